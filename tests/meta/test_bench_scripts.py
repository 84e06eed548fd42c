"""Every benchmark that needs no broker still runs: at a tiny size, to its last line.

The figures mean nothing at these sizes (timings never go in tests); what is tested
is that each script finishes and prints its ``bench NAME: ...`` line (and records
its figures where ``--record`` says, for `kafkron plan`), so a change to the code it drives
cannot leave it broken until the next person measures (the metrics benchmark stood
broken by a lateness-window change). The broker benchmarks are run by hand
(README, "Benchmarks").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit.paths import REPO

BENCH = REPO / "bench"

TINY = {
    "next_fire": ["--fires", "200", "--repeats", "1"],
    "wheel": ["--timers", "2000", "--big", "10000", "--heap-cancels", "500"],
    "shard_core": ["--schedules", "2000"],
    "metrics_overhead": ["--schedules", "2000", "--calls", "1000"],
    "audit": ["--schedules", "300"],
    "executor": ["--jobs", "200", "--repeats", "1"],
    "worker_core": ["--runs", "600", "--repeats", "1"],
}
RECORDS = {"shard_core"}  # takes --record PATH (tests/meta/test_bench_record.py)


@pytest.mark.parametrize("name", sorted(TINY))
def test_a_benchmark_runs_to_its_last_line(name: str, tmp_path: Path) -> None:
    measured = tmp_path / "measured.json"
    record = ["--record", str(measured)] if name in RECORDS else []
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *TINY[name], *record],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(f"bench {name}: "), last
    if name in RECORDS:
        assert json.loads(measured.read_text())[name]["figures"]
    else:
        assert not measured.exists()
