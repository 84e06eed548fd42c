"""A DAG's ``deadline`` (docs/DESIGN.md §6.10): per task run, counted from when the task
became ready (a root: its DAG run's instant; any other: its release), one
``deadline_missed`` per late task run and deadline, never again after a restore."""

from __future__ import annotations

import orjson

from tests.dag.test_dag_shard import DAG_ID, RUN_ID, billing_dag, by_task
from tests.kit.shard import SECOND, T0, Shard
from tests.shard.test_shard_deadlines import alerts
from topics.alerts import DEADLINE_REPORT_GRACE_MS, Alert, AlertType, Deadline, DeadlineKind
from topics.commands import DagUpsert, Rejection, decode_command
from topics.messages import PROGRESS_STATUS, Run, result_value

START_S, FINISH_S = 60, 600
DEADLINE = {"start_within_s": START_S, "finish_within_s": FINISH_S}


def progress(shard: Shard, run: Run, started_ms: int, *, at_ms: int) -> list[Alert]:
    """The worker's start report of a task run, applied at ``at_ms``."""
    shard.now_ms = at_ms
    value = result_value(
        run_id=run.run_id,
        schedule_id=run.schedule_id,
        task=run.task,
        attempt=run.attempt,
        status=PROGRESS_STATUS,
        scheduled_ms=run.scheduled_ms,
        started_ms=started_ms,
        finished_ms=None,
        worker="w-1",
        error=None,
        progress=(None, started_ms),
    )
    return alerts(shard.raw_result(run.schedule_id.encode(), value))


def started_dag(**deadline: int) -> tuple[Shard, dict[str, Run]]:
    """The billing DAG with a deadline, its first run's roots fired at T0."""
    shard = Shard(now_ms=T0 - SECOND)
    assert not shard.send(billing_dag(deadline=deadline or DEADLINE)).rejected
    return shard, by_task(shard.advance(T0))


def kinds(found: list[Alert]) -> list[tuple[str, str, str | None]]:
    return [(a.type.value, a.deadline.value, a.task) for a in found]


def test_dag_upsert_takes_a_deadline_and_checks_it_as_a_schedule_does() -> None:
    body = orjson.dumps(billing_dag(deadline=DEADLINE))
    command = decode_command(DAG_ID.encode(), body, T0)
    assert isinstance(command, DagUpsert)
    assert command.deadline == Deadline(START_S, FINISH_S)
    bad = decode_command(
        DAG_ID.encode(), orjson.dumps(billing_dag(deadline={"start_within_s": 0})), T0
    )
    assert isinstance(bad, Rejection)
    assert bad.reason.startswith("deadline.start_within_s:"), bad.reason


def test_each_task_run_is_judged_from_when_it_became_ready() -> None:
    shard, roots = started_dag()
    assert all(run.report_start for run in roots.values())  # the worker reports each start
    seen = progress(shard, roots["usage-rollup"], T0 + 10 * SECOND, at_ms=T0 + 10 * SECOND)
    seen += alerts(shard.report(roots["usage-rollup"], "succeeded", at_ms=T0 + 30 * SECOND))
    # fx-rates says nothing: silence past its start deadline (from the run's instant).
    silence_ms = T0 + START_S * SECOND + DEADLINE_REPORT_GRACE_MS
    assert seen + alerts(shard.run_until(silence_ms - 1)) == []
    [late] = alerts(shard.run_until(silence_ms))
    assert (late.type, late.deadline, late.task, late.run_id) == (
        AlertType.MISSED,
        DeadlineKind.START,
        "fx-rates",
        f"{RUN_ID}/fx-rates",
    )
    assert (late.scheduled_ms, late.due_ms) == (T0, T0 + START_S * SECOND)
    # It ends at +70 s (before its attempt's time-out): its start is closed late, its
    # end was in time. Its success releases invoice-nightly, which counts from there.
    released_ms = T0 + 70 * SECOND
    out = shard.report(roots["fx-rates"], "succeeded", at_ms=released_ms)
    assert kinds(alerts(out)) == [("deadline_recovered", "start", "fx-rates")]
    [invoice] = out.runs
    assert invoice.task == "invoice-nightly" and invoice.report_start
    # Started 50 s after its release: in time, though 120 s after the run's instant.
    begun_ms = released_ms + 50 * SECOND
    assert progress(shard, invoice, begun_ms, at_ms=begun_ms) == []
    assert alerts(shard.run_until(released_ms + FINISH_S * SECOND)) == []
    out = shard.report(invoice, "succeeded", at_ms=released_ms + (FINISH_S + 100) * SECOND)
    [ended_late] = alerts(out)
    assert kinds([ended_late]) == [("deadline_missed", "finish", "invoice-nightly")]
    assert (ended_late.due_ms, ended_late.late_by_ms) == (
        released_ms + FINISH_S * SECOND,
        100 * SECOND,
    )


def test_a_new_owner_never_alerts_a_task_run_again() -> None:
    shard, roots = started_dag(start_within_s=START_S)
    progress(shard, roots["usage-rollup"], T0 + SECOND, at_ms=T0 + SECOND)
    silence_ms = T0 + START_S * SECOND + DEADLINE_REPORT_GRACE_MS
    [late] = alerts(shard.run_until(silence_ms))
    assert late.task == "fx-rates"
    # A takeover before fx-rates's attempt times out (60 s plus the 30 s margin).
    new, out = shard.restored(silence_ms + 5 * SECOND)
    assert alerts(out) + alerts(new.run_until(silence_ms + 15 * SECOND)) == []
    out = new.report(roots["fx-rates"], "succeeded", at_ms=silence_ms + 20 * SECOND)
    assert kinds(alerts(out)) == [("deadline_recovered", "start", "fx-rates")]
    assert new.core.stats["deadline_missed_total"] == 0  # the new owner wrote none


def test_a_dag_without_a_deadline_watches_nothing_and_keeps_its_definition_bytes() -> None:
    shard = Shard(now_ms=T0 - SECOND)
    [record] = shard.send(billing_dag()).changelog
    assert "deadline" not in orjson.loads(record.value or b"")["def"]
    roots = by_task(shard.advance(T0))
    assert not any(run.report_start for run in roots.values())
    assert alerts(shard.run_until(T0 + 400 * SECOND)) == []
    watched = Shard(now_ms=T0 - SECOND)
    [record] = watched.send(billing_dag(deadline=DEADLINE)).changelog
    assert orjson.loads(record.value or b"")["def"]["deadline"] == DEADLINE
