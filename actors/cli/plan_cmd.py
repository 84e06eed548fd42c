"""``kafkron plan``: how many shards, processes and how much memory, from measured figures.

Reads the figures the benchmarks recorded (``bench/measured.json``, or ``--measured
FILE``) and prints the plan with its inputs and the margins applied (the model is
in `actors.sizing`). ``--measure`` first runs the quick pure benchmark
(``bench/shard_core.py``) to refresh the bytes per schedule on this machine, and
records its figures into the ``--measured`` file: asking for it is what writes there
(a benchmark run by hand records only with ``--record``).

Examples:
  kafkron plan --schedules 10000000 --herd 2000000 --deadline 60
  kafkron plan --schedules 500000 --herd 50000 --deadline 30 --brokers 1 --json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "bench" / "measured.json"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="size a cluster from the benchmarks' measured figures",
        description="Shards, scheduler and worker processes, memory and takeover time for "
        "N schedules and a herd of M due at one instant, from what the benchmarks measured.",
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--schedules", type=int, required=True, metavar="N")
    parser.add_argument("--herd", type=int, required=True, metavar="M", help="due at one instant")
    parser.add_argument(
        "--deadline", type=float, required=True, metavar="S", help="seconds to drain the herd"
    )
    parser.add_argument("--brokers", type=int, default=3, metavar="B", help="(default 3)")
    parser.add_argument("--measured", metavar="FILE", default=str(MEASURED))
    parser.add_argument(
        "--measure",
        action="store_true",
        help="run bench/shard_core.py first (about a minute), recording into --measured FILE",
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from actors.sizing import MissingFigure, plan

    if args.measure:
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "shard_core.py"),
                "--schedules",
                "200000",
                "--record",
                args.measured,
            ],
            cwd=ROOT,
            stdout=sys.stderr,
        )
        if done.returncode != 0:
            print("kafkron plan: bench/shard_core.py failed; see above", file=sys.stderr)
            return 1
    try:
        measured = json.loads(Path(args.measured).read_text())
    except FileNotFoundError:
        print(
            f"kafkron plan: {args.measured}: no measured figures; run the benchmarks "
            "(bench/measured.py lists them) or pass --measured FILE",
            file=sys.stderr,
        )
        return 2
    except json.JSONDecodeError as error:
        print(f"kafkron plan: {args.measured}: not JSON ({error})", file=sys.stderr)
        return 2
    try:
        result = plan(
            measured,
            schedules=args.schedules,
            herd=args.herd,
            deadline_s=args.deadline,
            brokers=args.brokers,
        )
    except MissingFigure as error:
        print(f"kafkron plan: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"kafkron plan: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.as_json(), indent=2))
    else:
        print(result.text(), end="")
    return 0
