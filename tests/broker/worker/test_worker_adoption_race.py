"""Runs arriving while a partition is being adopted are run, on the real broker.

Issue 12, finding 2: aiokafka hands out records of a new assignment before the
rebalance listener has run, and keeps fetching while an adoption waits on its
fence and its committed-offset read. A worker that dropped those records and then
took the next record it saw for the first one there was committed past runs that
never ran (they came back only at their deadline). The race is forced here, not
left to luck: every adoption's committed-offset read is slowed by a different
amount per partition (``tests.jobs.slow_adoption``), so the adoptions of one rebalance
end at different instants while the consumer keeps fetching; runs keep arriving
in small batches (as a scheduler fires a burst) while workers join and die. An
independent read_committed reader then checks that every run has exactly one
result.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.kit.worker import WorkerProcess, produce, results, run_record, wait_for_results
from topics.names import Settings

RUNS = 2_400
BATCH = 40
BATCH_EVERY_S = 0.2  # runs arrive over 12 s, through every rebalance below
RUNS_PARTITIONS = 12
SESSION_MS = 6_000
ADOPT_DELAY_MS = 700


def _worker(settings: Settings, tmp: Path, name: str) -> WorkerProcess:
    return WorkerProcess(
        settings,
        tmp,
        name,
        jobs="tests.jobs.worker,tests.jobs.slow_adoption",
        concurrency=50,
        session_timeout_ms=SESSION_MS,
        env={"KAFKRON_TEST_ADOPT_DELAY_MS": str(ADOPT_DELAY_MS)},
    )


@pytest.mark.kafka_partitions(3, runs=RUNS_PARTITIONS)
async def test_workers_joining_and_dying_under_a_burst_run_every_run_once(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    # Deadlines an hour away: a skipped run would not come back within the test.
    runs = [run_record(f"burst-{i}", "test.brief", timeout_s=3600) for i in range(RUNS)]

    async def feed() -> None:
        for start in range(0, RUNS, BATCH):
            await produce(kafka_settings, runs[start : start + BATCH])
            await asyncio.sleep(BATCH_EVERY_S)

    workers = [_worker(kafka_settings, tmp_path, "w1"), _worker(kafka_settings, tmp_path, "w2")]
    feeding = asyncio.ensure_future(feed())
    try:
        await wait_for_results(kafka_settings, lambda rs: len(rs) >= 50, workers=workers)
        workers.append(_worker(kafka_settings, tmp_path, "w3"))  # a rebalance mid-burst
        await asyncio.sleep(3)
        workers[0].signal(signal.SIGKILL)  # its partitions move after its session
        await asyncio.sleep(4)
        workers.append(_worker(kafka_settings, tmp_path, "w4"))
        alive = workers[1:]
        await wait_for_results(
            kafka_settings,
            lambda rs: len({r.run_id for r in rs}) >= RUNS,
            workers=alive,
            timeout_s=120,
        )
        await feeding
        await asyncio.sleep(2)  # anything still in flight would show as a duplicate
        found = await results(kafka_settings)
    finally:
        feeding.cancel()
        for worker in workers:
            worker.stop()
    per_run = Counter(r.run_id for r in found)
    assert len(per_run) == RUNS
    assert set(per_run.values()) == {1}, [k for k, n in per_run.items() if n > 1][:10]
    assert all(r.status == "succeeded" for r in found)
