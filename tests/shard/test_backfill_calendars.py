"""Backfill of a schedule that names a calendar (docs/DESIGN.md §6.9, §5.7): planned by
the calendar's days as the namespace holds them, checked by the shard against its
own book, refused with the calendar named while the schedule waits for it, and held
(as by a pause) when the calendar is deleted mid-backfill."""

from __future__ import annotations

import pytest

from actors.shard.backfill_plan import occurrences
from actors.views.backfill_planning import target_of
from tests.kit.shard import DAY, HOUR, MINUTE, T0, Shard, upsert
from tests.shard.test_backfill_shard import backfill
from topics.calendar_commands import calendar_value

# T0 is Saturday 2026-10-10 00:00 UTC; "hol" excludes Monday the 12th.
SPEC = {"any": [{"cron": "0 9 * * *"}], "exclude": ["hol"]}
HOL = {"tz": "UTC", "dates": ["2026-10-12"]}


def nine(day: int) -> int:
    return T0 + day * DAY + 9 * HOUR


def ran(days: int = 6) -> Shard:
    """The schedule, its runs of the 10th to the 15th (not the 12th) succeeded."""
    shard = Shard()
    shard.learn_calendar("hol", calendar_value(HOL), at_ms=T0 - HOUR)
    shard.send(upsert(spec=SPEC, timeout_s=600), at_ms=T0)
    for d in range(days):
        for run in shard.run_until(nine(d)).runs:
            shard.report(run, "succeeded", at_ms=nine(d) + MINUTE)
    return shard


def test_the_plan_and_the_shard_go_by_the_calendars_days() -> None:
    shard = ran()
    state = shard.core._schedules["s"]
    with pytest.raises(ValueError, match="names calendar 'hol'"):
        target_of(state, {})  # the namespace does not hold it: no plan
    target = target_of(state, {"hol": HOL})
    planned = list(occurrences(target.compiled, T0, nine(5) + 1))
    assert planned == [nine(0), nine(1), nine(3), nine(4), nine(5)]
    # The 12th is excluded: a range ending there is not the schedule's, and is refused.
    refused = shard.send(backfill([(nine(1), nine(2), 2)], "b0"), at_ms=nine(5) + HOUR)
    assert not refused.runs
    assert refused.rejected and "not an occurrence" in refused.rejected[0].reason
    out = shard.send(backfill([(nine(1), nine(3), 2)], max_parallel=5), at_ms=nine(5) + HOUR)
    assert [(r.scheduled_ms, r.attempt) for r in out.runs] == [(nine(1), 2), (nine(3), 2)]


def test_a_backfill_is_refused_naming_the_calendar_the_schedule_waits_for() -> None:
    shard = ran()
    shard.learn_calendar("hol", None, at_ms=nine(5) + HOUR)  # deleted (rm --force)
    out = shard.send(backfill([(nine(0), nine(1), 2)]), at_ms=nine(5) + 2 * HOUR)
    assert not out.runs
    assert out.rejected and "waits for calendar 'hol'" in out.rejected[0].reason


def test_a_calendar_deleted_mid_backfill_holds_it_until_it_comes_back() -> None:
    shard = ran()
    now_ms = nine(5) + HOUR
    out = shard.send(backfill([(nine(0), nine(4), 2)], max_parallel=1), at_ms=now_ms)
    assert [r.scheduled_ms for r in out.runs] == [nine(0)]
    shard.learn_calendar("hol", None, at_ms=now_ms + MINUTE)
    held = shard.report(out.runs[0], "succeeded", at_ms=now_ms + 2 * MINUTE)
    assert not held.runs  # waits with its schedule: no day to check an instant by
    assert shard.run_until(now_ms + 10 * MINUTE).runs == []
    shard.learn_calendar("hol", calendar_value(HOL), at_ms=now_ms + 11 * MINUTE)
    fired = []
    pending = list(shard.run_until(now_ms + 12 * MINUTE).runs)
    while pending:  # each run succeeds; the backfill fires its next one then
        run = pending.pop(0)
        fired.append(run)
        pending += shard.report(run, "succeeded", at_ms=shard.now_ms + MINUTE).runs
    assert [(r.scheduled_ms, r.attempt) for r in fired] == [
        (nine(1), 2),
        (nine(3), 2),
        (nine(4), 2),
    ]  # none lost while it waited


def test_a_backfill_waits_for_the_calendars_to_be_known_as_fresh_as_its_command() -> None:
    # The follower lags: the calendars are known as of nine(5) only, and an edit
    # excluding the 11th, written before the backfill was asked for, is not heard yet.
    # Its instants are checked by the calendars as the topic holds them when it was
    # asked for (§6.9), so it fires nothing by the stale book, and once the edit is
    # heard the 11th is not an occurrence any more: only the 13th fires.
    shard = ran()
    shard.core.calendars_fresh(nine(5))
    asked_ms = nine(5) + HOUR
    out = shard.send(backfill([(nine(1), nine(3), 2)], max_parallel=5), at_ms=asked_ms)
    assert out.runs == [] and not out.rejected
    assert shard.run_until(asked_ms + MINUTE).runs == []
    assert shard.core.stats["calendar_held_total"] > 0
    edited = calendar_value({"tz": "UTC", "dates": ["2026-10-11", "2026-10-12"]})
    shard.learn_calendar("hol", edited, at_ms=asked_ms + 2 * MINUTE, written_ms=asked_ms - MINUTE)
    shard.core.calendars_fresh(asked_ms + 2 * MINUTE)
    later = shard.advance(asked_ms + 2 * MINUTE)
    assert [(r.scheduled_ms, r.attempt) for r in later.runs] == [(nine(3), 2)]
