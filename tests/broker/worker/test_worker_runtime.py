"""The worker against the real broker, with runs written by the test (no scheduler)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.kit.worker import WorkerProcess, produce, run_record, wait_for_results
from topics.names import Settings


async def test_every_run_gets_exactly_one_visible_result(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    runs = [run_record(f"noop-{i}", "test.noop") for i in range(200)]
    runs.append(run_record("fails", "test.fail", {"message": "card declined"}))
    runs.append(run_record("unknown", "test.nope"))
    await produce(kafka_settings, runs)
    worker = WorkerProcess(kafka_settings, tmp_path, "w1")
    try:
        found = await wait_for_results(
            kafka_settings, lambda rs: len(rs) >= len(runs), workers=[worker]
        )
    finally:
        worker.stop()
    per_run = Counter((r.run_id, r.attempt) for r in found)
    assert len(per_run) == len(runs) and set(per_run.values()) == {1}
    by_id = {r.schedule_id: r for r in found}
    assert all(by_id[f"noop-{i}"].status == "succeeded" for i in range(200))
    assert by_id["fails"].status == "failed" and by_id["fails"].error is not None
    assert by_id["fails"].error["type"] == "ValueError"
    assert by_id["fails"].error["message"] == "card declined on attempt 1"
    assert by_id["unknown"].status == "failed" and by_id["unknown"].error is not None
    assert by_id["unknown"].error["type"] == "UnknownJob"
    assert all(r.worker == "w1" for r in found)
