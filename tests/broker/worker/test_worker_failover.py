"""Leases, deadlines and fencing of workers, on the real broker (runs written by the test).

Session timeout 6 s (the broker's minimum) keeps these tests short; the jobs are
made longer than it on purpose.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from tests.kit.worker import (
    T0,
    WorkerProcess,
    key_for_partition,
    marks,
    produce,
    results,
    run_record,
    wait_for_results,
    wait_marks,
    wait_until_split,
)
from topics.messages import run_id_for
from topics.names import Settings

SESSION_MS = 6_000
PARTITIONS = 3


async def test_a_job_longer_than_the_session_keeps_its_partition(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """Two workers; jobs of 15 s (async and sync) with a 6 s session and an 8 s
    max.poll.interval: each runs once, on the worker that started it, no rebalance."""
    extra = ("--max-poll-interval-ms", "8000")
    workers = [
        WorkerProcess(
            kafka_settings, tmp_path, name, session_timeout_ms=SESSION_MS, extra_args=extra
        )
        for name in ("w1", "w2")
    ]
    try:
        await wait_until_split(workers, PARTITIONS)
        await produce(
            kafka_settings,
            [
                run_record("long-async", "test.sleep", {"seconds": 15}),
                run_record("long-sync", "test.sleep_sync", {"seconds": 15}),
            ],
        )
        found = await wait_for_results(kafka_settings, lambda rs: len(rs) >= 2, workers=workers)
        await asyncio.sleep(1)
        found = await results(kafka_settings)
        logs = [w.log() for w in workers]
    finally:
        for worker in workers:
            worker.stop()
    assert sorted((r.schedule_id, r.attempt, r.status) for r in found) == [
        ("long-async", 1, "succeeded"),
        ("long-sync", 1, "succeeded"),
    ]
    starts = [m for m in marks(tmp_path) if m[0] == "start"]
    assert len(starts) == 2, starts  # nobody else ever started them
    started_by = {run_id: worker for _, run_id, _, worker in starts}
    for result in found:
        assert result.worker == started_by[result.run_id]
    for log in logs:
        assert "cancelling" not in log and "no heartbeat reached" not in log
        # Each worker adopted partitions once: the group never rebalanced under the jobs.
        assert log.count("owns runs partitions") <= 2


async def test_a_job_past_its_deadline_is_timed_out_and_its_slot_comes_back(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    worker = WorkerProcess(kafka_settings, tmp_path, "w1", concurrency=2)
    try:
        await wait_until_split([worker], PARTITIONS)
        await produce(
            kafka_settings,
            [
                run_record("slow-async", "test.sleep", {"seconds": 60}, timeout_s=2),
                run_record("slow-sync", "test.sleep_sync", {"seconds": 60}, timeout_s=2),
            ],
        )
        found = await wait_for_results(kafka_settings, lambda rs: len(rs) >= 2, workers=[worker])
        # Both slots are free again: two more runs complete.
        await produce(
            kafka_settings,
            [run_record(f"after-{i}", "test.noop") for i in range(2)],
        )
        found = await wait_for_results(kafka_settings, lambda rs: len(rs) >= 4, workers=[worker])
    finally:
        worker.stop()
    by_id = {r.schedule_id: r for r in found}
    for schedule_id in ("slow-async", "slow-sync"):
        result = by_id[schedule_id]
        assert result.status == "timed_out" and result.error is not None
        assert result.error["type"] == "Timeout"
        assert result.started_ms is not None and result.finished_ms is not None
        assert result.finished_ms - result.started_ms >= 1_000  # not before the deadline
    assert by_id["after-0"].status == by_id["after-1"].status == "succeeded"
    assert not [m for m in marks(tmp_path) if m[0] == "end"]  # both jobs were stopped


async def _zombie(
    settings: Settings, tmp_path: Path, *, watchdog: bool
) -> tuple[list[str], str, str]:
    """w1 runs a 10 s job and is SIGSTOPped; w2 takes over; w1 resumes afterwards."""
    w1_args = () if watchdog else ("--lease-loss-heartbeats", "0")
    w1 = WorkerProcess(settings, tmp_path, "w1", session_timeout_ms=SESSION_MS, extra_args=w1_args)
    w2 = WorkerProcess(settings, tmp_path, "w2", session_timeout_ms=SESSION_MS)
    try:
        owned = await wait_until_split([w1, w2], PARTITIONS)
        schedule_id = key_for_partition("zombie", min(owned[0]), PARTITIONS)
        run_id = run_id_for(schedule_id, T0)
        await produce(settings, [run_record(schedule_id, "test.sleep", {"seconds": 10})])
        await wait_marks(tmp_path, lambda ms: ("start", run_id, 1, "w1") in ms)
        w1.signal(signal.SIGSTOP)
        await wait_marks(tmp_path, lambda ms: ("start", run_id, 1, "w2") in ms)
        await wait_for_results(settings, lambda rs: len(rs) >= 1, workers=[w2])
        w1.signal(signal.SIGCONT)
        await w1.wait_log("fenced" if not watchdog else "no heartbeat reached")
        await wait_until_split([w1, w2], PARTITIONS)
        await asyncio.sleep(1)
        found = await results(settings)
        return [f"{r.run_id}#{r.attempt}:{r.status}:{r.worker}" for r in found], run_id, w1.log()
    finally:
        w1.stop()
        w2.stop()


async def test_a_paused_workers_late_result_is_fenced_and_invisible(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """With its own watchdog off, the resumed zombie finishes the job and tries to
    commit: its producer was fenced by the new owner, so the result never shows."""
    found, run_id, log = await _zombie(kafka_settings, tmp_path, watchdog=False)
    assert found == [f"{run_id}#1:succeeded:w2"]
    assert ("end", run_id, 1, "w1") in marks(tmp_path)  # w1 did finish it, too late
    assert "was fenced" in log


async def test_a_paused_worker_cancels_its_jobs_when_it_notices_the_lost_lease(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    found, run_id, log = await _zombie(kafka_settings, tmp_path, watchdog=True)
    assert found == [f"{run_id}#1:succeeded:w2"]
    assert ("end", run_id, 1, "w1") not in marks(tmp_path)  # cancelled before it ended
    assert "no heartbeat reached the group coordinator" in log
