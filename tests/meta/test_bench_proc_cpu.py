"""`bench/proc_cpu.py` and `bench/e2e_work.py`'s CPU split: the ``/proc`` stat line read
into CPU seconds, and the µs per run of each role. The arithmetic only: no benchmark runs
here (the one CPU reading is of this test's own process)."""

from __future__ import annotations

import os
import time
from types import ModuleType

import pytest

from tests.kit.bench import load_bench


def _bench(name: str) -> ModuleType:
    return load_bench(name)


def test_a_stat_line_gives_user_plus_system_seconds_whatever_the_command_name() -> None:
    proc_cpu = _bench("proc_cpu")
    ticks = os.sysconf("SC_CLK_TCK")
    # A command name may hold spaces and parentheses: fields are counted after the last ")".
    line = f"4242 (java (x) y) S 1 4242 4242 0 -1 4194560 1 0 0 0 {3 * ticks} {ticks} 0 0 20 0"
    assert proc_cpu.cpu_s_of_stat(line) == pytest.approx(4.0)


def test_this_process_cpu_grows_with_work_and_a_gone_pid_reads_unknown() -> None:
    proc_cpu = _bench("proc_cpu")
    before = proc_cpu.cpu_s(os.getpid())
    deadline = time.process_time() + 0.1
    while time.process_time() < deadline:  # 100 ms of CPU: ten clock ticks at least
        pass
    after = proc_cpu.cpu_s(os.getpid())
    assert before is not None and after is not None and after > before
    assert proc_cpu.cpu_s(2**22 + 7) is None  # above any pid_max: no such process


def test_a_broker_that_is_not_local_has_no_pid() -> None:
    assert _bench("proc_cpu").broker_pid("kafka.example:9092") is None


def test_a_snapshot_difference_is_unknown_where_either_side_is() -> None:
    snapshot = _bench("proc_cpu").Snapshot
    spent = snapshot({"a": 3.0, "b": None, "c": 2.0}).spent_since(
        snapshot({"a": 1.0, "b": 1.0, "c": None})
    )
    assert spent == {"a": 2.0, "b": None, "c": None}


def test_cpu_per_run_sums_the_workers_and_counts_the_path_without_the_observer() -> None:
    e2e = _bench("e2e_work")
    spent = {"sched": 0.3, "worker0": 0.2, "worker1": 0.4, "broker": 0.6, "observer": 0.9}
    out = e2e.cpu_per_run("", spent, 10_000)
    assert out["sched_cpu_us_per_run"] == pytest.approx(30.0)
    assert out["worker_cpu_us_per_run"] == pytest.approx(60.0)
    assert out["broker_cpu_us_per_run"] == pytest.approx(60.0)
    assert out["observer_cpu_us_per_run"] == pytest.approx(90.0)
    assert out["total_cpu_us_per_run"] == pytest.approx(150.0)


def test_a_path_with_an_unread_part_has_no_total() -> None:
    e2e = _bench("e2e_work")
    out = e2e.cpu_per_run("drain_", {"sched": 0.1, "worker0": 0.2, "observer": 0.0}, 1_000)
    assert out["drain_broker_cpu_us_per_run"] == -1.0
    assert out["drain_total_cpu_us_per_run"] == -1.0
    assert out["drain_worker_cpu_us_per_run"] == pytest.approx(200.0)
