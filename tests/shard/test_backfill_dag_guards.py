"""What keeps a DAG's backfill from starting a DAG run twice or writing an
unbounded record (actors/shard/backfill.py, dag_shard.py, dag_run.py; docs/DESIGN.md
§6.9)."""

from __future__ import annotations

import pytest

from actors.shard.backfill import dag_backfill_refusal
from actors.shard.runs import RunBook
from actors.shard.trim import CHANGELOG_MAX_BYTES
from tests.dag.test_dag_shard import DAG_ID, billing_dag
from tests.kit.shard import DAY, HOUR, SECOND, T0, Shard
from tests.shard.test_backfill_dag import SKIP_MISSED, backfill, missed_three_days, task_runs
from topics.messages import run_id_for


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


def _wide_dag_missed(tasks: int) -> Shard:
    """A DAG of ``tasks`` independent tasks whose scheduler was away over three
    midnights (each reported missed at attempt 1)."""
    shard = Shard(now_ms=T0 - 10 * SECOND)
    wide = {f"t{i}": {"job": {"name": "wide.part", "args": {"i": i}}} for i in range(tasks)}
    out = shard.send(billing_dag(tasks=wide, misfire=SKIP_MISSED))
    assert out.rejected == []
    missed = shard.advance(T0 + 2 * DAY + 12 * HOUR).results
    assert [(r.scheduled_ms, r.status) for r in missed] == [
        (T0 + d * DAY, "missed") for d in range(3)
    ]
    return shard


def test_a_dag_backfill_whose_running_task_entries_exceed_the_budget_is_refused() -> None:
    """(20 + 1) x 1000 tasks would hold 21000 task entries in the DAG's changelog
    record (1.37 MB): refused with a reason naming what fits, nothing started, no
    backfill kept; (1 + 1) x 1000 fits and starts one DAG run."""
    shard = _wide_dag_missed(1000)
    out = shard.send(backfill(T0, T0 + 2 * DAY, 2, max_parallel=20))
    assert [r.reason for r in out.rejected] == [
        dag_backfill_refusal(1000, 1, 20)
    ]
    assert "max_parallel 1 or less" in out.rejected[0].reason
    assert out.runs == [] and "backfill" not in shard.state_doc(DAG_ID)
    assert max(len(r.value or b"") for r in out.changelog + shard.written) < CHANGELOG_MAX_BYTES
    out = shard.send(backfill(T0, T0 + 2 * DAY, 2, max_parallel=1))
    assert out.rejected == []
    assert {r.scheduled_ms for r in out.runs} == {T0} and len(out.runs) == 1000
    assert max(len(r.value or b"") for r in out.changelog) < CHANGELOG_MAX_BYTES


def test_the_budget_counts_max_active_runs_and_says_what_fits() -> None:
    assert dag_backfill_refusal(4, 1, 100) is None  # (100 + 1) x 4 = 404
    assert dag_backfill_refusal(500, 1, 3) is None  # exactly 2000
    why = dag_backfill_refusal(500, 1, 4)
    assert why is not None and "2500" in why and "max_parallel 3 or less" in why
    why = dag_backfill_refusal(1000, 2, 1)
    assert why is not None and "max_active_runs" in why and "or less" not in why
