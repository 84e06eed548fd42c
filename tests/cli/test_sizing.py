"""`kafkron plan`: the plan follows from the measured figures and the stated margins."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from actors.sizing import RECORDS_PER_RUN, Margins, MissingFigure, plan
from tests.kit.paths import REPO as ROOT


def _measured(**overrides: float) -> dict[str, object]:
    figures = {
        "e2e_fire": {"max_runs_s": 10_000, "restore_s": 2.0, "schedules": 100_000,
                     "failover_first_fire_s": 15.0},
        "shard_core": {"bytes_per_schedule": 600},
        "e2e_work": {"workers_alone_runs_per_s": 8_000, "workers": 2},
        "broker_ceiling": {"txn1000_msgs_s": 25_000},
    }  # fmt: skip
    for key, value in overrides.items():
        bench, name = key.split("__")
        figures[bench][name] = value
    return {bench: {"measured_at": "t", "cpus": 2, "figures": f} for bench, f in figures.items()}


def test_each_figure_of_the_plan_follows_from_an_input_and_a_margin() -> None:
    m = Margins()
    p = plan(_measured(), schedules=10_000_000, herd=2_000_000, deadline_s=60, brokers=3)
    herd_rate = 2_000_000 / 60
    assert p.schedulers_for_herd == math.ceil(herd_rate / (10_000 * m.throughput))
    restore_rate = 100_000 / 2.0
    assert p.schedulers_for_takeover == math.ceil(10_000_000 / (restore_rate * 60 / 4))
    assert p.schedulers == max(p.schedulers_for_herd, p.schedulers_for_takeover, 2)
    assert p.shards >= 4 * p.schedulers and p.shards & (p.shards - 1) == 0
    assert p.shards < 8 * p.schedulers  # the next power of two, not more
    assert p.workers == math.ceil(herd_rate / (4_000 * m.throughput))
    assert p.memory_per_scheduler_bytes == 10_000_000 / (p.schedulers - 1) * 600 * m.memory
    assert p.broker_records_per_s == herd_rate * RECORDS_PER_RUN
    # A faster scheduler process needs fewer of them for the herd; the inputs are listed.
    faster = plan(_measured(e2e_fire__max_runs_s=40_000), schedules=10_000_000, herd=2_000_000,
                  deadline_s=60)  # fmt: skip
    assert faster.schedulers_for_herd < p.schedulers_for_herd
    assert "fires/s, one scheduler process" in p.text() and "safety margins" in p.text()


def test_too_few_brokers_are_called_out() -> None:
    p = plan(_measured(), schedules=1_000_000, herd=1_000_000, deadline_s=10, brokers=1)
    assert p.brokers_needed > 1 and "WARNING: 1 broker(s) cannot take" in p.text()


def test_a_figure_never_measured_says_which_benchmark_to_run() -> None:
    measured = _measured()
    del measured["e2e_work"]
    with pytest.raises(MissingFigure, match=r"run `python bench/e2e_work.py`"):
        plan(measured, schedules=10, herd=1, deadline_s=1)
    with pytest.raises(ValueError, match="--herd"):
        plan(_measured(), schedules=10, herd=11, deadline_s=1)


def test_cli_reads_the_measured_file(tmp_path: Path) -> None:
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(_measured()))
    argv = ["--schedules", "10000000", "--herd", "2000000", "--deadline", "60"]
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "plan", *argv, "--measured", str(path), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    expected = plan(_measured(), schedules=10_000_000, herd=2_000_000, deadline_s=60)
    assert json.loads(done.stdout) == expected.as_json()
    missing = subprocess.run(
        [sys.executable, "-m", "actors.cli", "plan", *argv, "--measured", str(tmp_path / "no")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert missing.returncode == 2 and "no measured figures" in missing.stderr
