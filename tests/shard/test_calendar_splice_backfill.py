"""A backfill after an edit's spliced re-arm walks its range by the current book
(docs/DESIGN.md §5.7): the splice is for the live walk of the backlog an edit heard
late left, never for a backfill, and once the live ``next`` is past the edit the
schedule is bound without it, as a new owner binds it. Before, the backfill walked
the range by the previous days, fired a day the calendar now excludes and emitted a
``(run_id, attempt)`` a second time; a new owner did not."""

from __future__ import annotations

from actors.shard.spliced import Spliced
from tests.kit.shard import DAY, MINUTE, T0, Shard, command, upsert
from tests.shard.test_backfill_shard import backfill
from topics.calendar_commands import calendar_value
from topics.timefmt import format_ms

HOUR = 60 * MINUTE
# Daily 09:00 excluding hol; T0 is Saturday 2026-10-10 00:00 UTC.
SPEC = {"any": [{"cron": "0 9 * * *"}], "exclude": ["hol"]}
E0 = calendar_value({"tz": "UTC", "dates": ["2026-10-12"]})
E1 = calendar_value({"tz": "UTC", "dates": ["2026-10-11", "2026-10-12"]})
EDIT_MS = T0 + 5 * DAY + 10 * HOUR  # the 15th 10:00: after the paused next (the 14th)


def nine(day: int) -> int:
    return T0 + day * DAY + 9 * HOUR


def _edited_while_paused(retried: bool = False) -> Shard:
    """Runs of the 10th, 11th, 13th succeed (with ``retried``, the 11th at attempt 2);
    paused after the 13th; the edit adding the 11th to hol is heard at once; resumed."""
    shard = Shard()
    shard.learn_calendar("hol", E0, at_ms=T0 - HOUR, written_ms=T0 - HOUR)
    retry = {"retry": {"max_attempts": 3, "initial_s": 60, "jitter": "none"}} if retried else {}
    shard.send(upsert(spec=SPEC, timeout_s=600, **retry), at_ms=T0)
    for d in (0, 1, 2, 3):
        pending = list(shard.run_until(nine(d)).runs)
        while pending:
            run = pending.pop(0)
            status = "failed" if (retried and d == 1 and run.attempt == 1) else "succeeded"
            shard.report(run, status, at_ms=shard.now_ms + MINUTE)
            pending += shard.run_until(shard.now_ms + 2 * MINUTE).runs
    shard.send(command("schedule.pause"), at_ms=nine(3) + 2 * HOUR)
    shard.learn_calendar("hol", E1, at_ms=EDIT_MS, written_ms=EDIT_MS)
    shard.core.calendars_fresh(EDIT_MS + HOUR)
    shard.send(command("schedule.resume"), at_ms=EDIT_MS + HOUR)
    shard.core.calendars_fresh(EDIT_MS + 2 * HOUR)
    return shard


def test_a_backfill_after_a_spliced_re_arm_skips_a_day_the_calendar_now_excludes() -> None:
    # Planned by hol as it is ({11, 12}): [10th, 13th] holds the 10th and the 13th.
    shard = _edited_while_paused()
    out = shard.send(backfill([(nine(0), nine(3), 2)], max_parallel=5), at_ms=EDIT_MS + 2 * HOUR)
    assert not out.rejected
    assert [format_ms(r.scheduled_ms) for r in out.runs] == [
        format_ms(nine(0)),
        format_ms(nine(3)),
    ]


def test_a_backfill_after_a_spliced_re_arm_never_repeats_a_run_id_and_attempt() -> None:
    # The 11th's attempt 2 succeeded; `--reprocess all` folds the 10th and the 13th
    # (each at attempt 2) into one range: the 11th's attempt 2 must not come again.
    shard = _edited_while_paused(retried=True)
    shard.send(backfill([(nine(0), nine(3), 2)], max_parallel=5), at_ms=EDIT_MS + 2 * HOUR)
    seen = [(r.run_id, r.attempt) for r in shard.written_runs()]
    assert sorted({x for x in seen if seen.count(x) > 1}) == []
    assert (f"s@{format_ms(nine(0))}", 2) in seen


def test_the_live_and_a_new_owner_backfill_alike_and_bind_alike_past_the_edit() -> None:
    live = _edited_while_paused()
    live.core.calendars_fresh(nine(6) + HOUR)
    assert [r.scheduled_ms for r in live.run_until(nine(6)).runs] == [
        nine(6)
    ]  # the 16th fires: the backlog before the edit is long walked
    new, _ = live.restored(
        nine(6) + HOUR,
        calendars=[("hol", E0, T0 - HOUR), ("hol", E1, EDIT_MS)],
        fresh_ms=nine(6) + HOUR,
    )
    for owner in (live, new):
        assert not isinstance(owner.core._schedules["s"].definition.compiled, Spliced)
    plan = backfill([(nine(0), nine(3), 2)])
    fired = [[r.scheduled_ms for r in o.send(plan, at_ms=nine(6) + HOUR).runs] for o in (live, new)]
    assert fired[0] == fired[1] == [nine(0), nine(3)]


def test_a_backfill_while_the_backlog_before_the_edit_is_held_walks_by_the_current_book() -> None:
    # Not paused: the calendars known as of the 13th 10:00 hold the 14th; the edit
    # (written the 15th 10:00) is heard an hour later with the backlog still held, so
    # the schedule is spliced when the backfill comes in the same turn.
    shard = Shard()
    shard.learn_calendar("hol", E0, at_ms=T0 - HOUR, written_ms=T0 - HOUR)
    shard.send(upsert(spec=SPEC, timeout_s=600), at_ms=T0)
    for d in (0, 1, 2, 3):
        shard.core.calendars_fresh(nine(d) + HOUR)
        for run in shard.run_until(nine(d)).runs:
            shard.report(run, "succeeded", at_ms=nine(d) + MINUTE)
    shard.advance(nine(5))
    heard_ms = EDIT_MS + HOUR
    shard.learn_calendar("hol", E1, at_ms=heard_ms, written_ms=EDIT_MS)
    shard.core.calendars_fresh(heard_ms)
    assert isinstance(shard.core._schedules["s"].definition.compiled, Spliced)
    out = shard.send(backfill([(nine(0), nine(3), 2)], max_parallel=5), at_ms=heard_ms)
    out.records += shard.advance(heard_ms).records
    backfilled = sorted(r.scheduled_ms for r in out.runs if r.attempt == 2)
    assert backfilled == [nine(0), nine(3)]
    # The backlog itself went by the days then: the 15th 09:00 fired (the 14th, past
    # its grace, reported missed).
    assert [r.scheduled_ms for r in out.runs if r.attempt == 1] == [nine(5)]
    assert [r.scheduled_ms for r in out.results if r.status == "missed"] == [nine(4)]
