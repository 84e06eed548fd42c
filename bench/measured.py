"""Where a benchmark's figures go for `kafkron plan`: only where ``--record`` says.

Each benchmark prints its last line (``bench NAME: key=value ...``) and hands the
same figures to `record`. Without ``--record`` nothing is written: measuring
leaves the checkout as it was, and `kafkron plan` keeps answering from the
figures it answered from before. ``--record PATH`` merges them into PATH under
the benchmark's name, with the instant, the machine's CPU count, the Python
version and the command that measured them; ``--record`` alone means
``bench/measured.json``, the committed file `kafkron plan` reads by default, so
updating it is an explicit act (then commit it, or read your own file with
``kafkron plan --measured PATH``). A benchmark that could not measure records
nothing. The benchmarks that record, run from the project root::

    python bench/shard_core.py --schedules 200000 --record
    python bench/broker_ceiling.py --record   # these three need the local broker
    python bench/e2e_fire.py --record
    python bench/e2e_work.py --record my-machine.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

PATH = Path(__file__).resolve().parent / "measured.json"
OPTION = "--record"


def add_record_option(parser: argparse.ArgumentParser) -> None:
    """``--record [PATH]`` on a benchmark that records (its value: `record`'s ``to``)."""
    parser.add_argument(
        OPTION,
        nargs="?",
        const=str(PATH),
        default=None,
        metavar="PATH",
        help="merge the figures into PATH for `kafkron plan` (without PATH: "
        "bench/measured.json, the committed file it reads); without --record "
        "nothing is written",
    )


def record(
    bench: str,
    figures: dict[str, float | int | str | bool],
    *,
    argv: list[str],
    to: str | Path | None = None,
) -> None:
    """Merge one benchmark's figures into `to`; with no `to`, write nothing."""
    if to is None:
        print(
            f"figures not recorded ({OPTION} [PATH] keeps them; without PATH in "
            "bench/measured.json, which `kafkron plan` reads)",
            file=sys.stderr,
        )
        return
    path = Path(to)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        data = {}
    data[bench] = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "command": " ".join(["python", f"bench/{bench}.py", *_measuring(argv)]),
        "figures": figures,
    }
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"figures recorded in {path} under {bench!r}", file=sys.stderr)


def _measuring(argv: list[str]) -> list[str]:
    """`argv` without ``--record [PATH]``: the command kept says how to measure
    again, not where one run happened to write (often a temporary file)."""
    kept: list[str] = []
    dropping = False
    for arg in argv:
        if dropping:
            dropping = False
            # nargs="?": argparse takes the next word as the path unless it is an option.
            if not arg.startswith("-"):
                continue
        if arg == OPTION:
            dropping = True
            continue
        if arg.startswith(OPTION + "="):
            continue
        kept.append(arg)
    return kept
