"""A runs partition handed over with its open-runs limit reached, on the real broker.

The worker commits, with each offset, the runs still open above it (at most
``MAX_OPEN_PER_PARTITION``). A worker that dies with that many open hands them to
the next owner through its last commit. The next owner used to count those restored
runs as held, find the partition full, pause it, and so never fetch the very records
whose runs would free it: the partition stalled for good (the simulation found it in
internet-midnight, seed 1 at a tenth; the pure tests are in test_worker_core and
test_worker_membership). Here the next owner must run every one of them.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.worker.offsets import MAX_OPEN_PER_PARTITION
from tests.kit.worker import T0, WorkerProcess, produce, run_record, wait_for_results, wait_marks
from topics.messages import run_id_for
from topics.names import Settings

SESSION_MS = 6_000
SLEEP_S = 12


@pytest.mark.kafka_partitions(1)
async def test_a_partition_handed_over_full_runs_every_open_run(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    schedule_id = "handed-over-full"
    # Offset 0 ends at once; the next MAX_OPEN_PER_PARTITION runs sleep, so the
    # first worker's commit after offset 0 names exactly the limit as open.
    records = [run_record(schedule_id, "test.noop", scheduled_ms=T0)]
    sleeping = [
        run_record(schedule_id, "test.sleep", {"seconds": SLEEP_S}, scheduled_ms=T0 + 1000 * i)
        for i in range(1, MAX_OPEN_PER_PARTITION + 1)
    ]
    records.extend(sleeping)
    run_ids = {run_id_for(schedule_id, T0 + 1000 * i) for i in range(MAX_OPEN_PER_PARTITION + 1)}
    concurrency = MAX_OPEN_PER_PARTITION + 8
    first = WorkerProcess(
        kafka_settings, tmp_path, "wa", concurrency=concurrency, session_timeout_ms=SESSION_MS
    )
    second: WorkerProcess | None = None
    try:
        await produce(kafka_settings, records)

        def started_on(worker: str) -> Callable[[list[tuple[str, str, int, str]]], bool]:
            def want(found: list[tuple[str, str, int, str]]) -> bool:
                started = {r for e, r, _, w in found if e == "start" and w == worker}
                return len(started) >= len(sleeping)

            return want

        await wait_marks(tmp_path, started_on("wa"), timeout_s=90)
        # The noop's result and the offset with every sleeping run open are committed
        # in one transaction; the result's visibility says that commit is done.
        await wait_for_results(kafka_settings, lambda rs: len(rs) >= 1, workers=[first])
        first.signal(signal.SIGKILL)
        second = WorkerProcess(
            kafka_settings, tmp_path, "wb", concurrency=concurrency, session_timeout_ms=SESSION_MS
        )
        await wait_marks(tmp_path, started_on("wb"), timeout_s=90)
        found = await wait_for_results(
            kafka_settings, lambda rs: {r.run_id for r in rs} >= run_ids, workers=[second]
        )
    finally:
        first.stop()
        if second is not None:
            second.stop()
    assert sorted(r.run_id for r in found) == sorted(run_ids)  # each once
    assert {r.status for r in found} == {"succeeded"}
    assert {r.worker for r in found if r.run_id != run_id_for(schedule_id, T0)} == {"wb"}
