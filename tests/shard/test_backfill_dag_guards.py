"""What keeps a DAG's backfill from starting a DAG run twice or writing an
unbounded record (actors/shard/backfill.py, dag_shard.py, dag_run.py; docs/DESIGN.md
§6.9)."""

from __future__ import annotations

import pytest

from actors.shard.runs import RunBook
from tests.kit.shard import DAY, SECOND, T0
from tests.shard.test_backfill_dag import backfill, missed_three_days, task_runs
from topics.messages import run_id_for

from tests.dag.test_dag_shard import DAG_ID


def test_an_emission_that_raises_part_way_leaves_no_dag_run_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second root's attempt raises (the core rejects the command as an internal
    error and goes on): the DAG run is not in the run book (else the next pump would
    let the instant pass with a DAG run running and a root that never runs), no root
    went out, the cursor has not moved, and the next pump starts the DAG run whole."""
    shard = missed_three_days()
    real = RunBook._emit_attempt
    calls = []

    def second_raises(self: RunBook, *args: object) -> str | None:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("produce refused")
        return real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(RunBook, "_emit_attempt", second_raises)
    out = shard.send(backfill(T0, T0, 2))
    assert len(calls) == 2 and "internal error" in out.rejected[0].reason
    assert out.runs == []
    monkeypatch.setattr(RunBook, "_emit_attempt", real)
    state = shard.core.schedule(DAG_ID)
    assert state is not None
    assert state.dag is not None and run_id_for(DAG_ID, T0) not in state.dag.runs
    assert not [r for r in state.runs.values() if r.scheduled_ms == T0]
    shard.advance(shard.now_ms + SECOND)
    assert sorted(r.task or "" for r in task_runs(shard) if r.scheduled_ms == T0) == [
        "fx-rates",
        "usage-rollup",
    ]
    doc = shard.state_doc(DAG_ID)["backfill"]
    assert doc["fired"] == 1 and "passed" not in doc
