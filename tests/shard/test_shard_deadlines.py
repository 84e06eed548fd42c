"""Deadline alerts (docs/DESIGN.md §6.10): one ``deadline_missed`` per late run and
deadline, written by the shard in the batch that records it in the changelog, never
again after a restore; none for a punctual run; a ``deadline_recovered`` closing it."""

from __future__ import annotations

from typing import Any

from tests.kit.shard import SECOND, T0, Out, Shard, upsert
from topics.alerts import DEADLINE_REPORT_GRACE_MS, Alert, AlertType, DeadlineKind, parse_alert
from topics.messages import PROGRESS_STATUS, Run, result_value
from topics.names import TopicKind

START_S, FINISH_S = 5, 30


def alerts(out: Out) -> list[Alert]:
    return [parse_alert(r.value) for r in out.of(TopicKind.ALERTS) if r.value is not None]


def deadline_shard(**deadline: Any) -> tuple[Shard, Run]:
    """A shard with one every-60s schedule with a deadline, its first run fired at T0."""
    shard = Shard(now_ms=T0 - SECOND)
    body = upsert(spec={"every": "60s", "anchor": "2026-10-10T00:00:00Z"})
    body["deadline"] = deadline or {"start_within_s": START_S, "finish_within_s": FINISH_S}
    assert not shard.send(body).rejected
    [run] = shard.advance(T0).runs
    return shard, run


def started(shard: Shard, run: Run, started_ms: int, *, at_ms: int) -> Out:
    """The worker's start report (a progress report), applied at ``at_ms``."""
    shard.now_ms = at_ms
    value = result_value(
        run_id=run.run_id,
        schedule_id=run.schedule_id,
        task=None,
        attempt=run.attempt,
        status=PROGRESS_STATUS,
        scheduled_ms=run.scheduled_ms,
        started_ms=started_ms,
        finished_ms=None,
        worker="w-1",
        error=None,
        progress=(None, started_ms),
    )
    return shard.raw_result(run.schedule_id.encode(), value)


def test_the_run_record_asks_for_a_start_report_only_under_a_start_deadline() -> None:
    _, run = deadline_shard()
    assert run.report_start
    _, run = deadline_shard(finish_within_s=FINISH_S)
    assert not run.report_start
    shard = Shard(now_ms=T0 - SECOND)
    shard.send(upsert(spec={"every": "60s", "anchor": "2026-10-10T00:00:00Z"}))
    [plain] = shard.advance(T0).runs
    assert not plain.report_start


def test_a_punctual_run_gets_no_alert() -> None:
    shard, run = deadline_shard()
    out = started(shard, run, T0 + 2 * SECOND, at_ms=T0 + 2 * SECOND)
    assert alerts(out) == []
    out = shard.report(run, "succeeded", at_ms=T0 + 20 * SECOND)
    assert alerts(out) == []
    assert alerts(shard.run_until(T0 + 59 * SECOND)) == []  # the next run fires at +60 s
    assert shard.core.stats["deadline_missed_total"] == 0


def test_silence_past_the_start_deadline_alerts_once_then_the_start_recovers_it() -> None:
    shard, run = deadline_shard(start_within_s=START_S)
    due_ms = T0 + START_S * SECOND
    assert alerts(shard.run_until(due_ms + DEADLINE_REPORT_GRACE_MS - 1)) == []
    out = shard.run_until(due_ms + DEADLINE_REPORT_GRACE_MS)
    [alert] = alerts(out)
    assert (alert.type, alert.deadline, alert.run_id) == (
        AlertType.MISSED,
        DeadlineKind.START,
        run.run_id,
    )
    assert (alert.due_ms, alert.late_by_ms, alert.seen_ms) == (
        due_ms,
        DEADLINE_REPORT_GRACE_MS,
        None,
    )
    # The fact that it alerted is in the same batch's changelog record.
    [state] = [r for r in out.changelog if r.key == b"s"]
    assert b'"alerted":["start"]' in (state.value or b"")
    assert alerts(shard.run_until(due_ms + 20 * SECOND)) == []
    out = started(shard, run, due_ms + 25 * SECOND, at_ms=due_ms + 25 * SECOND)
    [closing] = alerts(out)
    assert (closing.type, closing.late_by_ms, closing.seen_ms) == (
        AlertType.RECOVERED,
        25 * SECOND,
        due_ms + 25 * SECOND,
    )
    assert shard.core.stats["late_starts_total"] == 1
    assert alerts(shard.report(run, "succeeded", at_ms=due_ms + 30 * SECOND)) == []


def test_a_late_start_reported_before_the_judgement_alerts_once_from_the_report() -> None:
    shard, run = deadline_shard(start_within_s=START_S)
    due_ms = T0 + START_S * SECOND
    out = started(shard, run, due_ms + 1_500, at_ms=due_ms + 2_000)
    [alert] = alerts(out)
    assert (alert.type, alert.late_by_ms, alert.seen_ms) == (
        AlertType.MISSED,
        1_500,
        due_ms + 1_500,
    )
    assert alerts(shard.run_until(due_ms + 60 * SECOND - 1)) == []
    assert shard.core.stats["late_starts_total"] == 1


def test_a_start_in_time_reported_late_is_closed_as_in_time() -> None:
    shard, run = deadline_shard(start_within_s=START_S)
    due_ms = T0 + START_S * SECOND
    [_] = alerts(shard.run_until(due_ms + DEADLINE_REPORT_GRACE_MS))
    [closing] = alerts(started(shard, run, T0 + SECOND, at_ms=due_ms + 9 * SECOND))
    assert closing.type is AlertType.RECOVERED and closing.late_by_ms <= 0
    assert shard.core.stats["late_starts_total"] == 0


def test_a_run_still_going_past_its_finish_deadline_alerts_then_its_end_recovers_it() -> None:
    shard, run = deadline_shard()
    started(shard, run, T0 + SECOND, at_ms=T0 + SECOND)
    due_ms = T0 + FINISH_S * SECOND
    [alert] = alerts(shard.run_until(due_ms + DEADLINE_REPORT_GRACE_MS))
    assert (alert.type, alert.deadline) == (AlertType.MISSED, DeadlineKind.FINISH)
    [closing] = alerts(shard.report(run, "succeeded", at_ms=due_ms + 12 * SECOND))
    assert (closing.type, closing.deadline, closing.late_by_ms) == (
        AlertType.RECOVERED,
        DeadlineKind.FINISH,
        12 * SECOND,
    )


def test_an_outcome_with_a_late_start_alerts_it_from_its_instant() -> None:
    shard, run = deadline_shard()
    # The result says it started late (ended in time), before any judgement by silence.
    shard.core.advance(T0 + START_S * SECOND)  # nothing due yet but the grace
    out = shard.report(run, "succeeded", at_ms=T0 + START_S * SECOND + 1_000)
    kinds = sorted((a.type.value, a.deadline.value) for a in alerts(out))
    assert kinds == [("deadline_missed", "start")]  # ended before its finish deadline
    assert alerts(shard.run_until(T0 + 59 * SECOND)) == []  # the next run fires at +60 s


def test_a_new_owner_never_alerts_again_what_the_old_one_did() -> None:
    shard, run = deadline_shard()
    due_ms = T0 + START_S * SECOND
    [alert] = alerts(shard.run_until(due_ms + DEADLINE_REPORT_GRACE_MS))
    assert alert.deadline is DeadlineKind.START
    new, out = shard.restored(due_ms + 8 * SECOND)
    assert alerts(out) == []
    assert alerts(new.run_until(due_ms + 20 * SECOND)) == []  # before the finish deadline
    [closing] = alerts(started(new, run, due_ms + 21 * SECOND, at_ms=due_ms + 21 * SECOND))
    assert closing.type is AlertType.RECOVERED  # the old owner's alert, closed by the new


def test_a_new_owner_reads_the_results_backlog_before_judging_by_silence() -> None:
    shard, run = deadline_shard(start_within_s=START_S)
    due_ms = T0 + START_S * SECOND
    # The owner dies before the deadline; the worker's report (in time) waits on the
    # results topic while the shard has no owner.
    new, _ = shard.restored(due_ms + 30 * SECOND)
    assert alerts(new.advance(due_ms + 30 * SECOND)) == []  # within the restore's grace
    assert alerts(started(new, run, T0 + SECOND, at_ms=due_ms + 31 * SECOND)) == []
    assert alerts(new.run_until(due_ms + 90 * SECOND)) == []


def test_a_run_ended_without_a_reported_start_alerts_its_start_at_its_end() -> None:
    shard = Shard(now_ms=T0 - SECOND)
    body = upsert(
        spec={"every": "60s", "anchor": "2026-10-10T00:00:00Z"},
        timeout_s=1,
        retry={"max_attempts": 1},
        deadline={"start_within_s": 29},
    )
    assert not shard.send(body).rejected
    [run] = shard.advance(T0).runs
    # No worker ever answers: the shard times the attempt out at its deadline plus
    # the margin (31 s), after the start deadline (29 s) and before its judgement by
    # silence (34 s), and dead-letters the run: its start is judged at its end.
    out = shard.run_until(T0 + 31 * SECOND)
    assert [d.run_id for d in out.dlq] == [run.run_id]
    [alert] = alerts(out)
    assert (alert.type, alert.deadline, alert.seen_ms) == (
        AlertType.MISSED,
        DeadlineKind.START,
        None,
    )
    assert alert.late_by_ms == 2 * SECOND
    assert alerts(shard.run_until(T0 + 59 * SECOND)) == []


def test_deleting_the_schedule_closes_its_open_alerts() -> None:
    shard, _ = deadline_shard(start_within_s=START_S)
    shard.run_until(T0 + START_S * SECOND + DEADLINE_REPORT_GRACE_MS)
    out = shard.send({"v": 1, "type": "schedule.delete", "id": "s"})
    [closing] = alerts(out)
    assert (closing.type, closing.seen_ms) == (AlertType.RECOVERED, None)


def test_a_new_owner_past_the_time_out_reads_the_backlog_before_judging_the_start() -> None:
    # The run started in time and said so; the owner died and the takeover took past
    # the attempt's deadline plus the margin. The new owner's first turn finds the
    # attempt timed out: it must read the start report (waiting on the results topic)
    # before it judges the start, or a punctual run is alerted for good.
    shard = Shard(now_ms=T0 - SECOND)
    body = upsert(
        spec={"every": "60s", "anchor": "2026-10-10T00:00:00Z"},
        timeout_s=10,
        retry={"max_attempts": 1},
        deadline={"start_within_s": START_S},
    )
    assert not shard.send(body).rejected
    [run] = shard.advance(T0).runs
    new, out = shard.restored(T0 + 50 * SECOND)  # deadline 10 s + margin 30 s: past
    seen = alerts(out) + alerts(new.advance(T0 + 50 * SECOND))
    seen += alerts(started(new, run, T0 + SECOND, at_ms=T0 + 51 * SECOND))
    seen += alerts(new.run_until(T0 + 59 * SECOND))
    assert seen == []
