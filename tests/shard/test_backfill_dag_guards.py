"""What keeps a DAG's backfill from starting a DAG run twice or writing an
unbounded record (actors/shard/backfill.py, dag_shard.py, dag_run.py; docs/DESIGN.md
§6.9)."""

from __future__ import annotations

import pytest

from actors.shard.backfill import dag_backfill_refusal
from actors.shard.runs import RunBook
from actors.shard.trim import CHANGELOG_MAX_BYTES
from tests.dag.test_dag_shard import DAG_ID, billing_dag
from tests.kit.shard import DAY, HOUR, SECOND, T0, Shard, command
from tests.shard.test_backfill_dag import (
    SKIP_MISSED,
    backfill,
    finish_everything,
    missed_three_days,
    task_runs,
)
from topics.messages import run_id_for
from topics.timefmt import format_ms


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
    assert [r.reason for r in out.rejected] == [dag_backfill_refusal(1000, 1, 20)]
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


def test_a_live_dag_run_inside_the_backfill_is_not_forgotten_by_the_backfill_s_own_ends() -> None:
    """A stale plan (made while the live DAG run of T0+20d ran: no own row yet) fires
    T0+20d at attempt 1. The backfill's 20 earlier runs end first, more than
    `dag_run.ENDED_MEMORY`: the live run must still be remembered when the cursor
    reaches it, and be let pass, not started again (its task at attempt 1 twice)."""
    shard = Shard(now_ms=T0 - 10 * SECOND)
    one = {"a": {"job": {"name": "one.part", "args": {}}}}
    assert shard.send(billing_dag(tasks=one, misfire=SKIP_MISSED)).rejected == []
    missed = shard.advance(T0 + 19 * DAY + 12 * HOUR).results
    assert len([r for r in missed if r.status == "missed"]) == 20
    shard.run_until(T0 + 20 * DAY)  # the live DAG run of T0+20d
    finish_everything(shard, [])
    live = [r for r in shard.written_runs() if r.scheduled_ms == T0 + 20 * DAY]
    assert len(live) == 1
    out = shard.send(
        command(
            "schedule.backfill",
            DAG_ID,
            backfill_id="fill",
            max_parallel=1,
            ranges=[
                [format_ms(T0), format_ms(T0 + 19 * DAY), 2],
                [format_ms(T0 + 20 * DAY), format_ms(T0 + 20 * DAY), 1],
            ],
        )
    )
    assert out.rejected == []
    finish_everything(shard, [])
    assert [r for r in shard.written_runs() if r.scheduled_ms == T0 + 20 * DAY] == live
    doc = shard.state_doc(DAG_ID)["backfill"]
    assert (doc["fired"], doc["passed"]) == (20, 1) and "ended" in doc
    # Held only while the cursor had not passed it: the next end forgets it.
    assert run_id_for(DAG_ID, T0 + 20 * DAY) in shard.state_doc(DAG_ID)["dag"]["runs"]
    shard.run_until(T0 + 21 * DAY)
    finish_everything(shard, [])
    runs = shard.state_doc(DAG_ID)["dag"]["runs"]
    assert len(runs) == 16 and run_id_for(DAG_ID, T0 + 20 * DAY) not in runs
