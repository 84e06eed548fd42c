"""Every instant a calendar-naming schedule fires, not only the first, is bounded by
how fresh the calendars are known (docs/DESIGN.md §5.7): a backlog of several
instants (a shard that came late, a misfire plan, a trigger's due fires) stops at
the freshness point, and what lies beyond stays due until the calendars are known
past it."""

from __future__ import annotations

import orjson
import pytest

from tests.kit.shard import MINUTE, T0, Out, Shard, command, upsert
from topics.calendar_commands import calendar_value
from topics.timefmt import format_ms

# T0 is Saturday 2026-10-10 00:00 UTC; "hol" excludes the 12th (not these minutes).
SPEC = {"any": [{"cron": "* * * * *"}], "exclude": ["hol"]}
HOL = calendar_value({"tz": "UTC", "dates": ["2026-10-12"]})
SECOND = 1000


def _shard() -> Shard:
    shard = Shard()
    shard.learn_calendar("hol", HOL, at_ms=T0, written_ms=T0)
    shard.core.calendars_fresh(T0 + 10 * MINUTE)
    shard.send(upsert(spec=SPEC, overlap="allow"), at_ms=T0)
    shard.run_until(T0 + 10 * MINUTE)
    return shard


def _instants(out: Out) -> list[int]:
    """Every instant the batch handled: first attempts fired, and the occurrences the
    shard's results stand for (a folded result for its whole range, minute by minute)."""
    handled = [r.scheduled_ms for r in out.runs if r.attempt == 1]
    for result in out.results:
        covers = result.covers
        if covers is None:
            handled.append(result.scheduled_ms)
        else:
            handled.extend(range(covers.from_ms, covers.to_ms + 1, MINUTE))
    return sorted(handled)


def test_a_backlog_within_the_grace_fires_no_instant_later_than_the_calendars_are_fresh() -> None:
    shard = _shard()
    fresh_ms = T0 + 11 * MINUTE + 30 * SECOND
    shard.core.calendars_fresh(fresh_ms)
    held_before = shard.core.stats["calendar_held_total"]
    out = shard.advance(T0 + 14 * MINUTE)  # 11, 12, 13 and 14 are due; fresh as of 11:30
    assert _instants(out) == [T0 + 11 * MINUTE]
    assert shard.core.stats["calendar_held_total"] > held_before
    # Known fresh at last: the rest fires, each once, within the grace.
    shard.core.calendars_fresh(T0 + 14 * MINUTE)
    later = shard.run_until(T0 + 14 * MINUTE + 500)
    assert _instants(later) == [T0 + m * MINUTE for m in (12, 13, 14)]


def test_a_misfire_plan_neither_fires_nor_reports_an_instant_past_the_freshness() -> None:
    shard = _shard()
    fresh_ms = T0 + 11 * MINUTE + 30 * SECOND
    shard.core.calendars_fresh(fresh_ms)
    # 20 minutes late: the grace (300 s) is passed for 11..24, the plan judges them.
    out = shard.advance(T0 + 30 * MINUTE)
    # Part of the misfired backlog is not known allowed yet: the plan waits for all of
    # it (split at the freshness point, run_once would fire once per part).
    assert _instants(out) == []
    shard.core.calendars_fresh(T0 + 30 * MINUTE)
    later = shard.run_until(T0 + 30 * MINUTE + 500)
    handled = _instants(out) + _instants(later)
    assert handled == [T0 + m * MINUTE for m in range(11, 31)]  # each instant once


def test_a_trigger_does_not_fire_the_due_instants_later_than_the_calendars_are_fresh() -> None:
    shard = _shard()
    shard.core.calendars_fresh(T0 + 10 * MINUTE + 30 * SECOND)
    now_ms = T0 + 12 * MINUTE + 5 * SECOND  # 11 and 12 are due, not yet known allowed
    out = shard.send(command("schedule.trigger"), at_ms=now_ms)
    assert [r.scheduled_ms for r in out.runs] == [now_ms]  # the trigger's own run only
    shard.core.calendars_fresh(now_ms)
    later = shard.run_until(now_ms + 500)
    assert _instants(later) == [T0 + 11 * MINUTE, T0 + 12 * MINUTE]


def test_a_held_instant_due_before_an_edit_was_written_fires_by_the_version_then() -> None:
    shard = _shard()
    shard.core.calendars_fresh(T0 + 10 * MINUTE + 30 * SECOND)
    held = shard.advance(T0 + 11 * MINUTE)  # 11 is due, the calendars not yet known then
    assert _instants(held) == []
    # Heard now: "hol" excludes today from 11:20 on. 11:00 was due before that: the
    # version in effect then allowed it, so it fires; 12:00 is today: it does not.
    today = calendar_value({"tz": "UTC", "dates": ["2026-10-10"]})
    written_ms = T0 + 11 * MINUTE + 20 * SECOND
    shard.learn_calendar("hol", today, at_ms=T0 + 11 * MINUTE + 40 * SECOND, written_ms=written_ms)
    shard.core.calendars_fresh(T0 + 11 * MINUTE + 40 * SECOND)
    later = shard.run_until(T0 + 12 * MINUTE + 500)
    assert _instants(later) == [T0 + 11 * MINUTE]


def test_a_new_owner_keeps_the_instant_an_edit_heard_late_left_in_place() -> None:
    # The live owner keeps 11:00 (due before the edit was written at 11:20, held until
    # the calendars were known that fresh) and writes nothing (nothing changed). It
    # dies before 11:00 fires: the new owner, told the same record, must keep it too.
    shard = _shard()
    shard.core.calendars_fresh(T0 + 10 * MINUTE + 30 * SECOND)
    assert _instants(shard.advance(T0 + 11 * MINUTE)) == []  # held
    today = calendar_value({"tz": "UTC", "dates": ["2026-10-10"]})
    written_ms = T0 + 11 * MINUTE + 20 * SECOND
    heard_ms = T0 + 11 * MINUTE + 40 * SECOND
    shard.learn_calendar("hol", today, at_ms=heard_ms, written_ms=written_ms)
    shard.advance(heard_ms)
    assert shard.state_doc()["next"] == format_ms(T0 + 11 * MINUTE)  # kept: nothing written
    new, restored = shard.restored(
        heard_ms + 5 * SECOND, calendars=[("hol", today)], written_ms=written_ms
    )
    assert restored.changelog == []  # the rule, applied again, changes nothing
    new.core.calendars_fresh(heard_ms + 5 * SECOND)
    later = new.run_until(T0 + 13 * MINUTE)
    assert _instants(restored) + _instants(later) == [T0 + 11 * MINUTE]


@pytest.mark.parametrize("first_spec", [None, {"any": [{"cron": "0 9 * * *"}], "exclude": ["hol"]}])
def test_an_edit_heard_late_never_re_arms_a_schedule_before_it_was_upserted(
    first_spec: dict[str, object] | None,
) -> None:
    # The edit is written at 11:20; "t" is upserted (or re-upserted, from a daily spec
    # that never fired) at 14:30, before the edit is heard at 14:40. Its instants
    # before 14:30 were never its to fire or report.
    shard = _shard()
    if first_spec is not None:
        shard.send(upsert("t", spec=first_spec), at_ms=T0 + MINUTE)
    upserted_ms = T0 + 14 * MINUTE + 30 * SECOND
    shard.send(upsert("t", spec=SPEC), at_ms=upserted_ms)
    other = calendar_value({"tz": "UTC", "dates": ["2026-10-13"]})  # today still allowed
    heard_ms = T0 + 14 * MINUTE + 40 * SECOND
    shard.learn_calendar("hol", other, at_ms=heard_ms, written_ms=T0 + 11 * MINUTE + 20 * SECOND)
    shard.core.calendars_fresh(T0 + 17 * MINUTE)
    out = shard.run_until(T0 + 17 * MINUTE)
    handled = [r.scheduled_ms for r in out.runs if r.schedule_id == "t" and r.attempt == 1]
    handled += [r.scheduled_ms for r in out.results if r.schedule_id == "t"]
    assert sorted(handled) == [T0 + m * MINUTE for m in (15, 16, 17)]


def test_run_once_fires_once_for_a_backlog_the_calendars_are_known_for_in_parts() -> None:
    # Every 10 minutes; 10:00 fired. A process frozen until 37:00 sees its calendars
    # fresh as of 21:00 only: 20:00 and 30:00 are past the grace (300 s), one backlog.
    shard = Shard()
    shard.learn_calendar("hol", HOL, at_ms=T0, written_ms=T0)
    shard.core.calendars_fresh(T0 + 10 * MINUTE)
    spec = {"any": [{"cron": "*/10 * * * *"}], "exclude": ["hol"]}
    shard.send(upsert(spec=spec, overlap="allow"), at_ms=T0)
    shard.run_until(T0 + 10 * MINUTE)
    shard.core.calendars_fresh(T0 + 21 * MINUTE)
    frozen = shard.advance(T0 + 37 * MINUTE)
    shard.core.calendars_fresh(T0 + 37 * MINUTE)
    later = shard.run_until(T0 + 37 * MINUTE + 500)
    fired = [r.scheduled_ms for r in frozen.runs + later.runs if r.attempt == 1]
    assert fired == [T0 + 30 * MINUTE]  # run_once: the latest of the backlog, once
    assert _instants(frozen) + _instants(later) == [T0 + 20 * MINUTE, T0 + 30 * MINUTE]


def test_a_spec_denser_than_the_followers_lag_with_no_grace_still_fires() -> None:
    # Every second, grace 0: every instant is misfired by the time it is known fresh
    # (the follower lags 600 ms). Holding for the whole backlog would never end.
    shard = Shard()
    shard.learn_calendar("hol", HOL, at_ms=T0, written_ms=T0)
    spec = {"any": [{"cron": "* * * * * *"}], "exclude": ["hol"]}
    misfire = {"policy": "run_once", "grace_s": 0}
    shard.send(upsert(spec=spec, misfire=misfire, overlap="allow"), at_ms=T0)
    fired: list[int] = []
    for step in range(1, 41):
        now_ms = T0 + step * 250
        shard.core.calendars_fresh(now_ms - 600)
        fired += [r.scheduled_ms for r in shard.advance(now_ms).runs if r.attempt == 1]
    assert len(fired) >= 5


def test_a_restore_never_reaches_back_before_a_never_fired_schedule_without_a_floor() -> None:
    # A record written before upserts kept their floor (no "passed") of a schedule
    # that never fired: the calendar's record is older than the schedule, and a
    # restore re-arming from it would fire or report instants before it existed.
    shard = Shard()
    shard.learn_calendar("hol", HOL, at_ms=T0, written_ms=T0)
    shard.core.calendars_fresh(T0 + 30 * MINUTE)
    daily = {"any": [{"cron": "5 * * * *"}], "exclude": ["hol"]}
    shard.send(upsert("d", spec=daily), at_ms=T0 + 20 * MINUTE)
    shard.advance(T0 + 20 * MINUTE)
    doc = shard.state_doc("d")
    assert doc["next"] == format_ms(T0 + 65 * MINUTE)
    doc.pop("passed", None)
    shard.changelog[b"d"] = orjson.dumps(doc)
    new, restored = shard.restored(T0 + 30 * MINUTE, calendars=[("hol", HOL)], written_ms=T0)
    new.core.calendars_fresh(T0 + 70 * MINUTE)
    later = new.run_until(T0 + 70 * MINUTE)
    assert _instants(restored) + _instants(later) == [T0 + 65 * MINUTE]


HOUR = 60 * MINUTE
TODAY = calendar_value({"tz": "UTC", "dates": ["2026-10-10"]})


def _accounted(out: Out, schedule_id: str = "s") -> list[int]:
    """The instants a batch accounted for: first attempts fired, and the occurrences
    its missed/skipped results stand for (the hour's runs' timeouts left out)."""
    handled = [r.scheduled_ms for r in out.runs if r.attempt == 1 and r.schedule_id == schedule_id]
    for result in out.results:
        if result.status not in ("missed", "skipped") or result.schedule_id != schedule_id:
            continue
        covers = result.covers
        if covers is None:
            handled.append(result.scheduled_ms)
        else:
            handled.extend(range(covers.from_ms, covers.to_ms + 1, MINUTE))
    return sorted(handled)


def _held_until_eleven() -> Shard:
    """Every minute; the calendars known fresh as of 11:00, so 11:01 onwards is held."""
    shard = Shard()
    shard.learn_calendar("hol", HOL, at_ms=T0, written_ms=T0)
    shard.send(upsert(spec=SPEC, overlap="allow"), at_ms=T0 + 10 * HOUR)
    shard.core.calendars_fresh(T0 + 11 * HOUR)
    shard.run_until(T0 + 11 * HOUR)
    assert _accounted(shard.advance(T0 + 11 * HOUR + 40 * MINUTE)) == []  # held
    return shard


def test_the_backlog_of_an_edit_heard_late_is_walked_by_the_days_in_effect_then() -> None:
    # An edit excluding today is written at 11:20 and heard at 11:40. 11:01..11:19 were
    # allowed by the version in effect at each (the audit owes them): fired or reported
    # through the misfire policy, none skipped as excluded; 11:20 onwards is excluded.
    shard = _held_until_eleven()
    heard_ms = T0 + 11 * HOUR + 40 * MINUTE
    shard.learn_calendar("hol", TODAY, at_ms=heard_ms, written_ms=T0 + 11 * HOUR + 20 * MINUTE)
    shard.core.calendars_fresh(heard_ms)
    later = shard.run_until(T0 + 12 * HOUR)
    assert _accounted(later) == [T0 + 11 * HOUR + m * MINUTE for m in range(1, 20)]


def test_an_identical_re_upsert_while_the_backlog_is_held_keeps_the_split() -> None:
    # As above, but an identical schedule.upsert (a re-apply) lands in the same turn
    # as the edit, before the advance: it keeps the due 11:01 and binds with the
    # edit's split too, so 11:01..11:19 are owed still (before, lost unreported).
    shard = _held_until_eleven()
    heard_ms = T0 + 11 * HOUR + 40 * MINUTE
    shard.learn_calendar("hol", TODAY, at_ms=heard_ms, written_ms=T0 + 11 * HOUR + 20 * MINUTE)
    shard.core.calendars_fresh(heard_ms)
    again = shard.send(upsert(spec=SPEC, overlap="allow"), at_ms=heard_ms)
    later = shard.run_until(T0 + 12 * HOUR)
    expected = [T0 + 11 * HOUR + m * MINUTE for m in range(1, 20)]
    assert _accounted(again) + _accounted(later) == expected


def test_a_new_owner_walks_the_backlog_of_an_edit_heard_late_the_same_way() -> None:
    # The live owner kept 11:01 (nothing to write) and died before firing: the new
    # owner, told both records of hol, splits the backlog at the edit's commit too.
    shard = _held_until_eleven()
    written_ms = T0 + 11 * HOUR + 20 * MINUTE
    heard_ms = T0 + 11 * HOUR + 40 * MINUTE
    shard.learn_calendar("hol", TODAY, at_ms=heard_ms, written_ms=written_ms)
    assert shard.advance(heard_ms).changelog == []  # held still: nothing changed
    records = [("hol", HOL, T0), ("hol", TODAY, written_ms)]
    new, restored = shard.restored(heard_ms + MINUTE, calendars=records)
    assert restored.changelog == []  # the rule, applied again, changes nothing
    new.core.calendars_fresh(heard_ms + MINUTE)
    later = new.run_until(T0 + 12 * HOUR)
    expected = [T0 + 11 * HOUR + m * MINUTE for m in range(1, 20)]
    assert _accounted(restored) + _accounted(later) == expected


def test_a_new_owner_live_on_a_stale_book_fires_its_plain_schedules_and_holds_the_rest() -> None:
    # hol excludes today; an edit written at 00:10:30 gives it back, and the live owner
    # re-arms "s" to 00:11. The new owner's follower is refused since 00:10 (fresh as
    # of then, the edit unread): the shard goes live all the same (DESIGN §5.7). The
    # plain schedule fires at once; "s", re-armed by the stale book, fires nothing
    # until the follower catches up, then 00:11..00:13 by the edit, from its commit.
    shard = Shard()
    shard.learn_calendar("hol", TODAY, at_ms=T0, written_ms=T0)
    shard.core.calendars_fresh(T0 + 10 * MINUTE)
    shard.send(upsert(spec=SPEC, overlap="allow"), at_ms=T0)
    shard.send(upsert("plain", spec={"cron": "* * * * *"}, overlap="allow"), at_ms=T0)
    shard.run_until(T0 + 10 * MINUTE)
    written_ms = T0 + 10 * MINUTE + 30 * SECOND
    shard.learn_calendar("hol", HOL, at_ms=written_ms + SECOND, written_ms=written_ms)
    shard.advance(written_ms + SECOND)
    assert shard.state_doc()["next"] == format_ms(T0 + 11 * MINUTE)
    taken_ms = T0 + 12 * MINUTE + 5 * SECOND
    new, restored = shard.restored(
        taken_ms, calendars=[("hol", TODAY, T0)], fresh_ms=T0 + 10 * MINUTE
    )
    live = new.run_until(T0 + 13 * MINUTE)
    plain = _accounted(restored, "plain") + _accounted(live, "plain")
    assert plain == [T0 + m * MINUTE for m in (11, 12, 13)]
    assert _accounted(restored) + _accounted(live) == []  # held: not known fresh
    caught_up_ms = T0 + 13 * MINUTE + 10 * SECOND
    new.learn_calendar("hol", HOL, at_ms=caught_up_ms, written_ms=written_ms)
    new.core.calendars_fresh(caught_up_ms)
    later = new.run_until(caught_up_ms)
    assert _accounted(later) == [T0 + m * MINUTE for m in (11, 12, 13)]


TODAY_AND_13 = calendar_value({"tz": "UTC", "dates": ["2026-10-10", "2026-10-13"]})


def _paused_across_two_edits() -> tuple[Shard, Out]:
    """hol excludes the 12th (today, the 10th, allowed). Paused at 00:10 (next 00:11);
    E1, written and heard at 00:15, excludes today; E2, at 00:20, adds the 13th."""
    shard = Shard()
    shard.learn_calendar("hol", HOL, at_ms=T0, written_ms=T0)
    shard.send(upsert(spec=SPEC, overlap="allow"), at_ms=T0)
    shard.run_until(T0 + 10 * MINUTE)
    shard.send(command("schedule.pause"), at_ms=T0 + 10 * MINUTE + 1)
    shard.learn_calendar("hol", TODAY, at_ms=T0 + 15 * MINUTE, written_ms=T0 + 15 * MINUTE)
    shard.core.calendars_fresh(T0 + 15 * MINUTE)
    out = shard.advance(T0 + 15 * MINUTE)
    shard.learn_calendar("hol", TODAY_AND_13, at_ms=T0 + 20 * MINUTE, written_ms=T0 + 20 * MINUTE)
    out.records += shard.advance(T0 + 20 * MINUTE).records
    return shard, out


def test_a_backlog_across_two_edits_is_walked_by_the_days_before_each() -> None:
    # Resumed at 00:30: 11..14 were allowed (by the days before E1) and are reported
    # skipped; 15.. were excluded (E1, then E2). Before, 11..14 were walked by E2's
    # previous days (E1's): excluded, neither fired nor reported.
    shard, out = _paused_across_two_edits()
    shard.core.calendars_fresh(T0 + 30 * MINUTE)
    out.records += shard.send(command("schedule.resume"), at_ms=T0 + 30 * MINUTE).records
    out.records += shard.run_until(T0 + 31 * MINUTE).records
    assert _accounted(out) == [T0 + m * MINUTE for m in (11, 12, 13, 14)]


def test_a_new_owner_walks_a_backlog_across_two_edits_the_same_way() -> None:
    shard, out = _paused_across_two_edits()
    records = [
        ("hol", HOL, T0),
        ("hol", TODAY, T0 + 15 * MINUTE),
        ("hol", TODAY_AND_13, T0 + 20 * MINUTE),
    ]
    new, restored = shard.restored(T0 + 25 * MINUTE, calendars=records, fresh_ms=T0 + 30 * MINUTE)
    assert restored.changelog == []  # the rule, applied again, changes nothing
    out.records += restored.records
    out.records += new.send(command("schedule.resume"), at_ms=T0 + 30 * MINUTE).records
    out.records += new.run_until(T0 + 31 * MINUTE).records
    assert _accounted(out) == [T0 + m * MINUTE for m in (11, 12, 13, 14)]
