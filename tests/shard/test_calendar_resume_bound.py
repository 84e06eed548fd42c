"""A `schedule.resume` of a calendar-naming schedule is bounded by how fresh the
calendars are known (docs/DESIGN.md §5.7): what came due while paused is reported
skipped by the calendars in effect, so a resume applied while the follower lags is
kept (paused still, firing nothing) until they are known as of it."""

from __future__ import annotations

from actors.views.schedule_status import status_text
from tests.kit.shard import MINUTE, T0, Out, Shard, command, upsert
from topics.calendar_commands import calendar_value
from topics.timefmt import format_ms

# T0 is Saturday 2026-10-10 00:00 UTC. hol excludes today at first; an edit written
# at 00:15 gives it back, heard only at 00:22 (the follower fresh as of 00:10 till then).
SPEC = {"any": [{"cron": "* * * * *"}], "exclude": ["hol"]}
TODAY = calendar_value({"tz": "UTC", "dates": ["2026-10-10"]})
OTHER = calendar_value({"tz": "UTC", "dates": ["2026-10-12"]})
WRITTEN_MS = T0 + 15 * MINUTE
RESUMED_MS = T0 + 20 * MINUTE
HEARD_MS = T0 + 22 * MINUTE


def _minutes(instants: list[int]) -> list[int]:
    return sorted((i - T0) // MINUTE for i in instants)


def _paused_then_resumed() -> tuple[Shard, Out]:
    shard = Shard()
    shard.learn_calendar("hol", TODAY, at_ms=T0, written_ms=T0)
    shard.core.calendars_fresh(T0 + 10 * MINUTE)
    shard.send(upsert(spec=SPEC, overlap="allow"), at_ms=T0)
    shard.run_until(T0 + 10 * MINUTE)
    shard.send(command("schedule.pause"), at_ms=T0 + 10 * MINUTE)
    resumed = shard.send(command("schedule.resume"), at_ms=RESUMED_MS)
    resumed.records += shard.run_until(T0 + 21 * MINUTE).records
    return shard, resumed


def _skipped(out: Out) -> list[int]:
    return _minutes([r.scheduled_ms for r in out.results if r.status == "skipped"])


def _fired(out: Out) -> list[int]:
    return _minutes([r.scheduled_ms for r in out.runs if r.attempt == 1])


def test_a_resume_waits_for_the_calendars_to_report_what_came_due_while_paused() -> None:
    shard, resumed = _paused_then_resumed()
    assert _skipped(resumed) == [] and _fired(resumed) == []  # kept: not known fresh
    assert shard.state_doc()["paused"] is True
    assert shard.state_doc()["pause"]["resumed"] is True
    said = status_text(shard.core._schedules["s"])
    assert said == "resuming as of 2026-10-10 00:20 UTC, once its calendars are known that fresh"
    # Heard: today given back from 00:15. 15..20 came due while paused (skipped by the
    # version in effect at each); 21 and 22 after the resume (fired).
    shard.learn_calendar("hol", OTHER, at_ms=HEARD_MS, written_ms=WRITTEN_MS)
    shard.core.calendars_fresh(HEARD_MS)
    later = shard.run_until(HEARD_MS)
    assert _skipped(later) == [15, 16, 17, 18, 19, 20]
    assert _fired(later) == [21, 22]
    assert shard.state_doc()["paused"] is False


def test_a_new_owner_completes_a_kept_resume() -> None:
    shard, _ = _paused_then_resumed()
    records = [("hol", TODAY, T0), ("hol", OTHER, WRITTEN_MS)]
    new, restored = shard.restored(HEARD_MS, calendars=records, fresh_ms=HEARD_MS)
    later = new.run_until(HEARD_MS)
    out = Out(restored.records + later.records)
    assert _skipped(out) == [15, 16, 17, 18, 19, 20]
    assert _fired(out) == [21, 22]


def test_a_resume_with_the_calendars_fresh_completes_at_once() -> None:
    shard = Shard()
    shard.learn_calendar("hol", OTHER, at_ms=T0, written_ms=T0)
    shard.core.calendars_fresh(T0 + 10 * MINUTE)
    shard.send(upsert(spec=SPEC, overlap="allow"), at_ms=T0)
    shard.run_until(T0 + 10 * MINUTE)
    shard.send(command("schedule.pause"), at_ms=T0 + 10 * MINUTE + 1)
    shard.core.calendars_fresh(T0 + 14 * MINUTE)
    out = shard.send(command("schedule.resume"), at_ms=T0 + 14 * MINUTE)
    assert _skipped(out) == [11, 12, 13, 14]
    assert shard.state_doc()["paused"] is False


CATCH_UP = {"policy": "catch_up", "grace_s": 60, "catch_up_max": 100}
PAUSED_UNTIL_MS = T0 + 25 * MINUTE


def _kept_resume_replaced_by_a_pause() -> tuple[Shard, Out]:
    """catch_up; paused 00:10; a resume at 00:20 kept (the calendars fresh as of
    00:19:50); a pause until 00:25 sent at 00:20:30 replaces it."""
    shard = Shard()
    shard.learn_calendar("hol", OTHER, at_ms=T0, written_ms=T0)
    shard.core.calendars_fresh(T0 + 10 * MINUTE)
    shard.send(upsert(spec=SPEC, overlap="allow", misfire=CATCH_UP), at_ms=T0)
    shard.run_until(T0 + 10 * MINUTE)
    shard.send(command("schedule.pause"), at_ms=T0 + 10 * MINUTE + 1)
    shard.core.calendars_fresh(RESUMED_MS - 10_000)
    out = shard.send(command("schedule.resume"), at_ms=RESUMED_MS)
    assert shard.state_doc()["pause"]["resumed"] is True
    until = format_ms(PAUSED_UNTIL_MS)
    out.records += shard.send(
        command("schedule.pause", until=until), at_ms=RESUMED_MS + 30_000
    ).records
    assert shard.state_doc()["pause"]["resumed_as_of"] == format_ms(RESUMED_MS)
    return shard, out


def test_a_pause_replacing_a_kept_resume_reports_what_came_due_before_it_skipped() -> None:
    # The resume's effect is kept: 11..20 skipped when the pause ends (before, fired
    # by catch_up as if never resumed); 21..25 go through the policy, as after a pause.
    shard, out = _kept_resume_replaced_by_a_pause()
    shard.core.calendars_fresh(PAUSED_UNTIL_MS)
    out.records += shard.run_until(PAUSED_UNTIL_MS).records
    assert _skipped(out) == list(range(11, 21))
    assert _fired(out) == [21, 22, 23, 24, 25]
    assert shard.state_doc()["paused"] is False


def test_the_carried_resume_waits_for_the_calendars_and_survives_a_restore() -> None:
    shard, out = _kept_resume_replaced_by_a_pause()
    out.records += shard.run_until(PAUSED_UNTIL_MS).records  # not known as of 00:20
    assert _skipped(out) == [] and _fired(out) == []
    new, restored = shard.restored(
        PAUSED_UNTIL_MS + 1, calendars=[("hol", OTHER, T0)], fresh_ms=PAUSED_UNTIL_MS
    )
    later = new.run_until(PAUSED_UNTIL_MS + MINUTE)
    done = Out(restored.records + later.records)
    assert _skipped(done) == list(range(11, 21))
    assert _fired(done) == [21, 22, 23, 24, 25]
