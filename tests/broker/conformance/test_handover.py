"""Partitions handed between the Python worker and the Go worker (both directions):
the next owner reads the committed offset's metadata written by the other
implementation and runs exactly the open runs again (docs/WORKER-PROTOCOL.md §4).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from tests.conformance.harness import GO_WORKER, PYTHON_WORKER, Worker, probe, wait_results
from tests.kit.worker import (
    T0,
    key_for_partition,
    marks,
    produce,
    results,
    run_record,
    wait_marks,
)
from topics.messages import run_id_for
from topics.names import Settings

PARTITIONS = 3
SESSION_MS = 6_000


@pytest.mark.parametrize(
    ("first", "second"),
    [(PYTHON_WORKER, GO_WORKER), (GO_WORKER, PYTHON_WORKER)],
    ids=["python-to-go", "go-to-python"],
)
async def test_open_runs_are_handed_over_between_implementations(
    kafka_settings: Settings, tmp_path: Path, first: str, second: str
) -> None:
    """On partition 0: long run L1, three short ones, long run L2, two short ones. The
    short ones finish and commit while L1 and L2 run, so the committed offset is L1's
    and the metadata lists L2 open above it. The first owner is killed (SIGKILL); the
    other implementation adopts the partition, runs L1 and L2 again and none of the
    short ones: one result per attempt, nothing lost or run twice."""
    old = Worker(kafka_settings, tmp_path, "old", first, session_timeout_ms=SESSION_MS)
    new: Worker | None = None
    try:
        await probe(kafka_settings, PARTITIONS, "h")
        ids = [key_for_partition(f"hand-{i}", 0, PARTITIONS) for i in range(7)]
        longs = {ids[0], ids[4]}
        await produce(
            kafka_settings,
            [run_record(sid, "test.sleep", {"seconds": 8 if sid in longs else 0.1}) for sid in ids],
        )
        shorts = [sid for sid in ids if sid not in longs]
        await wait_results(
            kafka_settings,
            lambda rs: {r.schedule_id for r in rs} >= set(shorts),
            workers=[old],
            timeout_s=60,
        )
        await wait_marks(
            tmp_path,
            lambda ms: {m[1] for m in ms if m[0] == "start"} >= {run_id_for(s, T0) for s in longs},
        )
        old.kill()
        new = Worker(kafka_settings, tmp_path, "new", second, session_timeout_ms=SESSION_MS)
        found = await wait_results(
            kafka_settings,
            lambda rs: {r.schedule_id for r in rs} >= set(ids),
            workers=[new],
            timeout_s=90,
        )
        await asyncio.sleep(2)
        found = [r for r in await results(kafka_settings) if r.schedule_id in set(ids)]
    finally:
        old.stop()
        if new is not None:
            new.stop()
    counts = Counter((r.run_id, r.attempt) for r in found)
    assert sorted(counts.values()) == [1] * 7, counts
    by_id = {r.schedule_id: r for r in found}
    assert {by_id[s].worker for s in longs} == {"new"}
    assert {by_id[s].worker for s in shorts} == {"old"}
    assert {r.status for r in found} == {"succeeded"}
    starts = Counter(m[1] for m in marks(tmp_path) if m[0] == "start")
    for sid in shorts:
        assert starts[run_id_for(sid, T0)] == 1, sid
    for sid in longs:
        assert starts[run_id_for(sid, T0)] == 2, sid
