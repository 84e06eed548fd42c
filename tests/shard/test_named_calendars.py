"""Named calendars in the shard core: waiting for one, re-arming on an edit, a
restore that learns the calendars first, and the calendar commands (DESIGN §5.7)."""

from __future__ import annotations

import orjson
import pytest

from actors.timespec import CalendarNotBound, compile_spec
from tests.kit.shard import DAY, HOUR, MINUTE, T0, Out, Shard, command, upsert
from topics.calendar_commands import calendar_value
from topics.messages import Run
from topics.names import TopicKind
from topics.timefmt import format_ms

# T0 is Saturday 2026-10-10 00:00 UTC. A daily 09:00 UTC job that excludes "hol".
SPEC = {"any": [{"cron": "0 9 * * *"}], "exclude": ["hol"]}


def cal(*dates: str) -> bytes:
    return calendar_value({"tz": "UTC", "dates": list(dates)})


def firsts(out: Out) -> list[Run]:
    """The first attempts among the runs written (nobody reports here: the later
    attempts are the shard's retries after each deadline)."""
    return [r for r in out.runs if r.attempt == 1]


def succeed(shard: Shard, out: Out) -> None:
    """Every run of ``out`` succeeds a second after it was fired."""
    for run in firsts(out):
        shard.report(run, "succeeded", at_ms=max(shard.now_ms, run.fired_ms + 1000))


def nine(day: int) -> int:
    """09:00 UTC of 2026-10-(10 + day)."""
    return T0 + day * DAY + 9 * HOUR


def test_a_schedule_naming_an_unknown_calendar_waits_visibly_then_fires_when_it_comes() -> None:
    shard = Shard()
    shard.send(upsert(spec=SPEC, overlap="allow"), at_ms=T0)
    assert shard.run_until(nine(0) + MINUTE).runs == []
    doc = shard.state_doc()
    assert doc["waiting"] == "hol" and doc["next"] is None and "completed" not in doc
    # The calendar comes at 09:03 (within the 300 s grace): today's 09:00 fires late
    # under its misfire policy; 2026-10-11 is excluded; 2026-10-12 fires.
    shard.learn_calendar("hol", cal("2026-10-11"), at_ms=nine(0) + 3 * MINUTE)
    out = shard.run_until(nine(2))
    assert [r.scheduled_ms for r in firsts(out)] == [nine(0), nine(2)]
    assert "waiting" not in shard.state_doc()


def test_an_edit_re_arms_the_schedules_that_name_it_and_only_those() -> None:
    shard = Shard()
    shard.learn_calendar("hol", cal("2026-10-11"), at_ms=T0)
    shard.send(upsert("a", spec=SPEC, overlap="allow"), at_ms=T0)
    shard.send(upsert("b", spec={"cron": "0 9 * * *"}, overlap="allow"), at_ms=T0)
    first = shard.run_until(nine(0))
    assert [r.scheduled_ms for r in firsts(first)] == [nine(0), nine(0)]
    succeed(shard, first)
    assert shard.state_doc("a")["next"] == format_ms(nine(2))
    # Exclude the 12th and the 13th too: "a" moves to the 14th at once, "b" is untouched.
    edit_ms = nine(1) - HOUR
    shard.learn_calendar("hol", cal("2026-10-11", "2026-10-12", "2026-10-13"), at_ms=edit_ms)
    edited = shard.advance(edit_ms)
    assert [r.key for r in edited.changelog] == [b"a"]
    assert shard.state_doc("a")["next"] == format_ms(nine(4))
    assert shard.core.calendar_users("hol") == ["a"]
    out = shard.run_until(nine(4))
    assert sorted((r.schedule_id, r.scheduled_ms) for r in firsts(out)) == [
        ("a", nine(4)),
        ("b", nine(1)),
        ("b", nine(2)),
        ("b", nine(3)),
        ("b", nine(4)),
    ]
    # Giving a day back: the 13th fires again, nothing before now is fired late.
    shard.learn_calendar("hol", cal("2026-10-11"), at_ms=nine(4) + HOUR)
    shard.advance(nine(4) + HOUR)
    assert shard.state_doc("a")["next"] == format_ms(nine(5))


def test_a_re_upsert_without_the_name_leaves_the_index_and_a_delete_too() -> None:
    shard = Shard()
    shard.learn_calendar("hol", cal("2026-10-11"), at_ms=T0)
    shard.send(upsert("a", spec=SPEC), at_ms=T0)
    shard.send(upsert("c", spec=SPEC), at_ms=T0)
    assert shard.core.calendar_users("hol") == ["a", "c"]
    shard.send(upsert("a", spec={"cron": "0 9 * * *"}), at_ms=T0 + 1)
    shard.send(command("schedule.delete", "c"), at_ms=T0 + 2)
    assert shard.core.calendar_users("hol") == []
    # Its calendar gone, "a" no longer waits nor moves: its own spec is what it runs.
    shard.learn_calendar("hol", None, at_ms=T0 + 3)
    assert firsts(shard.run_until(nine(1)))[-1].scheduled_ms == nine(1)


def test_an_edit_made_while_the_owner_was_down_takes_effect_on_the_next_owner() -> None:
    shard = Shard()
    shard.learn_calendar("hol", cal("2026-10-11"), at_ms=T0)
    shard.send(upsert(spec=SPEC, overlap="allow"), at_ms=T0)
    first = shard.run_until(nine(0) + HOUR)
    assert shard.state_doc()["next"] == format_ms(nine(2))
    # The owner dies; the calendar is edited (the 12th excluded) before the next owner
    # restores: it learns the calendars to the topic's end before finishing.
    edited = [("hol", cal("2026-10-11")), ("hol", cal("2026-10-11", "2026-10-12"))]
    new, restored = shard.restored(nine(1), calendars=edited)
    assert restored.rejected == []
    later = new.run_until(nine(3))
    fired = [r.run_id for r in firsts(first) + firsts(later)]
    assert [r.scheduled_ms for r in firsts(first) + firsts(later)] == [nine(0), nine(3)]
    assert len(fired) == len(set(fired))


def test_a_restore_with_the_same_calendars_keeps_next_and_writes_nothing() -> None:
    shard = Shard()
    shard.learn_calendar("hol", cal("2026-10-11"), at_ms=T0)
    shard.send(upsert(spec=SPEC), at_ms=T0)
    succeed(shard, shard.run_until(nine(0)))
    new, _ = shard.restored(nine(0) + 2 * HOUR, calendars=[("hol", cal("2026-10-11"))])
    assert new.advance(nine(0) + 2 * HOUR).changelog == []
    assert new.core.schedule("s").next_ms == nine(2)  # type: ignore[union-attr]


def test_a_restore_that_does_not_know_the_calendar_waits_and_fires_nothing() -> None:
    shard = Shard()
    shard.learn_calendar("hol", cal("2026-10-11"), at_ms=T0)
    shard.send(upsert(spec=SPEC), at_ms=T0)
    succeed(shard, shard.run_until(nine(0)))
    new, _ = shard.restored(nine(1) - HOUR)  # told nothing: every name is unknown
    assert new.run_until(nine(3)).runs == []
    assert new.state_doc()["waiting"] == "hol"


def test_calendar_commands_write_the_calendars_topic_and_a_delete_in_use_is_refused() -> None:
    shard = Shard()
    body = {"tz": "Europe/London", "dates": ["2026-12-25"], "weekdays": ["SAT", "SUN"]}
    out = shard.send(command("calendar.upsert", "uk", calendar=body), at_ms=T0)
    [record] = out.of(TopicKind.CALENDARS)
    assert record.key == b"uk" and record.partition == 0
    assert orjson.loads(record.value or b"") == {"v": 1, "calendar": body}
    bad = shard.send(command("calendar.upsert", "uk", calendar={"dates": ["2026-13-01"]}))
    assert "calendar.dates[0]" in bad.rejected[0].reason and bad.of(TopicKind.CALENDARS) == []
    shard.learn_calendar("uk", record.value)
    shard.send(upsert("payroll", spec={"any": [{"cron": "0 6 * * *"}], "exclude": ["uk"]}))
    refused = shard.send(command("calendar.delete", "uk"))
    assert "'payroll'" in refused.rejected[0].reason
    assert refused.of(TopicKind.CALENDARS) == []
    shard.send(command("schedule.delete", "payroll"))
    [tombstone] = shard.send(command("calendar.delete", "uk")).of(TopicKind.CALENDARS)
    assert tombstone.key == b"uk" and tombstone.value is None


def test_a_dag_naming_a_calendar_starts_runs_on_the_days_it_leaves_and_an_edit_re_arms_it() -> None:
    shard = Shard()
    shard.learn_calendar("hol", cal("2026-10-11"), at_ms=T0)
    dag = {
        "v": 1,
        "type": "dag.upsert",
        "id": "d",
        "spec": SPEC,
        "tasks": {"a": {"job": {"name": "t.a", "args": {}}}},
    }
    assert not shard.send(dag, at_ms=T0).rejected
    assert shard.core.calendar_users("hol") == ["d"]
    out = shard.run_until(nine(0))
    assert [(r.run_id, r.task) for r in firsts(out)] == [(f"d@{format_ms(nine(0))}/a", "a")]
    succeed(shard, out)
    assert firsts(shard.run_until(nine(1) + HOUR)) == []  # the 11th is excluded
    # The 12th excluded too, a moment before it: the DAG's next run is the 13th's.
    shard.learn_calendar("hol", cal("2026-10-11", "2026-10-12"), at_ms=nine(2) - HOUR)
    later = shard.run_until(nine(3))
    assert [r.scheduled_ms for r in firsts(later)] == [nine(3)]
    succeed(shard, later)
    # A new owner told the calendar binds it again and goes on: the 14th.
    successor, _ = shard.restored(calendars=[("hol", cal("2026-10-11", "2026-10-12"))])
    assert successor.core.calendar_users("hol") == ["d"]
    assert [r.scheduled_ms for r in firsts(successor.run_until(nine(4)))] == [nine(4)]


def test_a_bad_calendar_name_is_refused() -> None:
    shard = Shard()
    bad = shard.send(upsert(spec={"any": [{"cron": "0 9 * * *"}], "exclude": ["a/b"]}))
    assert "spec.exclude[0]" in bad.rejected[0].reason


def test_a_spec_compiled_without_its_calendars_never_answers() -> None:
    spec = compile_spec(SPEC, schedule_id="s")
    with pytest.raises(CalendarNotBound):
        spec.next_after(T0)


def test_a_schedule_ended_by_an_edit_comes_back_when_the_edit_is_reverted() -> None:
    shard = Shard()
    shard.learn_calendar("hol", cal("2026-10-11"), at_ms=T0)
    # Its last day is the 13th: excluding the 12th and the 13th leaves it nothing.
    ends = format_ms(nine(3) + HOUR)
    shard.send(upsert(spec=SPEC, overlap="allow", end=ends), at_ms=T0)
    succeed(shard, shard.run_until(nine(0)))
    edit_ms = nine(1) - HOUR
    shard.learn_calendar("hol", cal("2026-10-11", "2026-10-12", "2026-10-13"), at_ms=edit_ms)
    shard.advance(edit_ms)
    assert shard.state_doc()["completed"] == "end"
    # Reverted before the 12th: it fires the 12th and the 13th again.
    shard.learn_calendar("hol", cal("2026-10-11"), at_ms=edit_ms + MINUTE)
    shard.advance(edit_ms + MINUTE)
    doc = shard.state_doc()
    assert "completed" not in doc and doc["next"] == format_ms(nine(2))
    out = shard.run_until(nine(3) + 2 * HOUR)
    assert [r.scheduled_ms for r in firsts(out)] == [nine(2), nine(3)]
    assert shard.state_doc()["completed"] == "end"


def test_a_lagging_follower_holds_a_fire_naming_a_calendar_until_the_edit_is_heard() -> None:
    shard = Shard()
    shard.learn_calendar("hol", cal("2026-10-11"), at_ms=T0)
    shard.send(upsert("a", spec=SPEC, overlap="allow"), at_ms=T0)
    shard.send(upsert("b", spec={"cron": "0 9 * * *"}, overlap="allow"), at_ms=T0)
    # The calendars are known as of 08:00 on the 12th only (the follower is refused):
    # the 12th at 09:00 of "a" waits; "b", naming no calendar, fires.
    shard.core.calendars_fresh(nine(2) - HOUR)
    out = shard.run_until(nine(2) + 10 * MINUTE)
    assert sorted((r.schedule_id, r.scheduled_ms) for r in firsts(out)) == [
        ("a", nine(0)),
        ("b", nine(0)),
        ("b", nine(1)),
        ("b", nine(2)),
    ]
    assert shard.core.stats["calendar_held_total"] > 0
    # The edit committed at 08:30 excluded the 12th: heard now, the 12th never fires.
    shard.learn_calendar("hol", cal("2026-10-11", "2026-10-12"), written_ms=nine(2) - 30 * MINUTE)
    shard.core.calendars_fresh(nine(3))  # caught up (and kept up: fresh as of 09:00)
    later = shard.run_until(nine(3))
    assert [(r.schedule_id, r.scheduled_ms) for r in firsts(later) if r.schedule_id == "a"] == [
        ("a", nine(3))
    ]


def test_a_day_given_back_but_heard_late_goes_through_the_misfire_policy() -> None:
    shard = Shard()
    shard.learn_calendar("hol", cal("2026-10-11", "2026-10-12"), at_ms=T0)
    shard.send(upsert(spec=SPEC, overlap="allow"), at_ms=T0)
    succeed(shard, shard.run_until(nine(0)))
    assert shard.state_doc()["next"] == format_ms(nine(3))
    # The 12th is given back at 08:00 on the 12th; this shard hears it at 09:02.
    shard.learn_calendar(
        "hol", cal("2026-10-11"), at_ms=nine(2) + 2 * MINUTE, written_ms=nine(2) - HOUR
    )
    out = shard.run_until(nine(2) + 3 * MINUTE)
    assert [r.scheduled_ms for r in firsts(out)] == [nine(2)]  # late, within its grace
