"""Where the benchmarks leave their figures for `kafkron plan`: ``bench/measured.json``.

Each benchmark prints its last line (``bench NAME: key=value ...``) and hands the
same figures to `record`, which merges them into the file under the benchmark's
name with the instant, the machine's CPU count and the Python version. The
sizing calculator reads that file (``kafkron plan``), so its per-process inputs
are what the benchmarks measured, never typed in. A benchmark that could not
measure records nothing. Run from the project root::

    python bench/shard_core.py --schedules 200000
    python bench/broker_ceiling.py          # these three need the local broker
    python bench/e2e_fire.py
    python bench/e2e_work.py
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

PATH = Path(__file__).resolve().parent / "measured.json"


def record(bench: str, figures: dict[str, float | int | str | bool], *, argv: list[str]) -> None:
    """Merge one benchmark's figures into ``bench/measured.json``."""
    path = Path(os.environ.get("KAFKRON_MEASURED", PATH))
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        data = {}
    data[bench] = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "command": " ".join(["python", f"bench/{bench}.py", *argv]),
        "figures": figures,
    }
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"figures recorded in {path.name} under {bench!r}", file=sys.stderr)
