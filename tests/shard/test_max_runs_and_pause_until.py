"""max_runs, a completed schedule, and a pause with a note, an end and after the current run."""

from __future__ import annotations

from tests.kit.shard import MINUTE, SECOND, T0, Shard, command, upsert
from topics.timefmt import format_ms


def test_max_runs_fires_that_many_then_the_schedule_is_completed() -> None:
    shard = Shard()
    shard.send(upsert(max_runs=3, overlap="allow"), at_ms=T0 - 1)
    out = shard.run_until(T0 + 10 * MINUTE)
    assert [r.scheduled_ms for r in out.runs] == [T0, T0 + MINUTE, T0 + 2 * MINUTE]
    doc = shard.state_doc()
    assert doc["completed"] == "max_runs" and doc["fired_count"] == 3 and doc["next"] is None
    trigger = shard.send(command("schedule.trigger"), at_ms=T0 + 11 * MINUTE)
    assert trigger.runs == [] and "is completed" in trigger.rejected[0].reason


def test_max_runs_is_counted_across_a_restore_and_a_trigger_counts() -> None:
    shard = Shard()
    shard.send(upsert(max_runs=3, overlap="allow"), at_ms=T0 - 1)
    first = shard.run_until(T0)
    triggered = shard.send(command("schedule.trigger"), at_ms=T0 + 10 * SECOND)
    restored, _ = shard.restored(T0 + 30 * SECOND)
    later = restored.run_until(T0 + 10 * MINUTE)
    fired = [r.scheduled_ms for r in first.runs + triggered.runs + later.runs]
    assert fired == [T0, T0 + 10 * SECOND, T0 + MINUTE]
    assert restored.state_doc()["completed"] == "max_runs"


def test_raising_max_runs_fires_again_and_lowering_it_completes_at_once() -> None:
    shard = Shard()
    shard.send(upsert(max_runs=1, overlap="allow"), at_ms=T0 - 1)
    shard.run_until(T0 + 5 * MINUTE)
    shard.send(upsert(max_runs=2, overlap="allow"), at_ms=T0 + 5 * MINUTE + 1)
    again = shard.run_until(T0 + 10 * MINUTE)
    assert [r.scheduled_ms for r in again.runs] == [T0 + 6 * MINUTE]
    shard.send(upsert(max_runs=5, overlap="allow"), at_ms=T0 + 10 * MINUTE + 1)
    shard.send(upsert(max_runs=2, overlap="allow"), at_ms=T0 + 10 * MINUTE + 2)
    assert shard.state_doc()["completed"] == "max_runs"
    assert shard.run_until(T0 + 20 * MINUTE).runs == []


def test_a_one_off_or_a_schedule_past_its_end_says_it_is_completed() -> None:
    shard = Shard()
    end = format_ms(T0 + 2 * MINUTE + 30 * SECOND)
    shard.send(upsert(end=end), at_ms=T0 - 1)
    shard.run_until(T0 + 10 * MINUTE)
    assert shard.state_doc()["completed"] == "end"
    shard.send(upsert("once", spec={"at": format_ms(T0 + MINUTE)}), at_ms=T0)
    shard.run_until(T0 + 2 * MINUTE)
    assert shard.state_doc("once")["completed"] == "end"


def test_a_pause_until_resumes_by_itself_once_and_the_misfire_policy_decides() -> None:
    shard = Shard()
    shard.send(upsert(misfire={"policy": "run_once", "grace_s": 90}, overlap="allow"), at_ms=T0 - 1)
    shard.run_until(T0)
    until = T0 + 5 * MINUTE + 30 * SECOND
    paused = shard.send(
        command("schedule.pause", note="db migration", until=format_ms(until), by="ops"),
        at_ms=T0 + 10 * SECOND,
    )
    assert paused.rejected == []
    doc = shard.state_doc()
    assert doc["paused"] is True
    assert doc["pause"] == {
        "at": format_ms(T0 + 10 * SECOND),
        "note": "db migration",
        "until": format_ms(until),
        "by": "ops",
    }
    assert shard.run_until(until - 1).runs == []
    out = shard.run_until(T0 + 7 * MINUTE)
    # As after a takeover: what came due within the 90 s grace before the resume
    # (04:00, 05:00) fires late, the older ones are reported missed; then it goes on.
    fired = [r.scheduled_ms for r in out.runs]
    assert fired == [T0 + m * MINUTE for m in (4, 5, 6, 7)]
    missed = sorted(r.scheduled_ms for r in out.results)
    assert missed == [T0 + m * MINUTE for m in (1, 2, 3)]
    assert {r.status for r in out.results} == {"missed"}
    doc = shard.state_doc()
    assert doc["paused"] is False and "pause" not in doc


def test_an_auto_resume_happens_once_across_a_restore() -> None:
    shard = Shard()
    shard.send(upsert(overlap="allow"), at_ms=T0 - 1)
    shard.run_until(T0)
    until = T0 + 3 * MINUTE
    shard.send(command("schedule.pause", until=format_ms(until)), at_ms=T0 + SECOND)
    before, _ = shard.restored(until - SECOND)  # restored paused: until armed again
    assert before.run_until(until - 1).runs == []
    resumed = before.run_until(until + MINUTE)
    # Paused 3 minutes, within the default grace (300 s): everything due fires late.
    assert [r.scheduled_ms for r in resumed.runs] == [T0 + m * MINUTE for m in (1, 2, 3, 4)]
    after, _ = before.restored(until + MINUTE + SECOND)  # restored after the resume
    assert after.state_doc()["paused"] is False
    assert [r.scheduled_ms for r in after.run_until(until + 2 * MINUTE).runs] == [
        until + 2 * MINUTE
    ]


def test_a_pause_until_in_the_past_is_rejected_and_a_resume_clears_the_note() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 - 1)
    out = shard.send(command("schedule.pause", until=format_ms(T0)), at_ms=T0 + 5)
    assert "is not in the future" in out.rejected[0].reason
    shard.send(command("schedule.pause", note="why"), at_ms=T0 + 10)
    assert shard.state_doc()["pause"]["note"] == "why"
    shard.send(command("schedule.resume"), at_ms=T0 + 20)
    assert "pause" not in shard.state_doc()


def test_pause_after_current_stops_firing_now_and_is_pausing_until_the_runs_end() -> None:
    shard = Shard()
    shard.send(upsert(overlap="allow"), at_ms=T0 - 1)
    first = shard.run_until(T0).runs
    second = shard.run_until(T0 + MINUTE).runs
    shard.send(command("schedule.pause", after_current=True), at_ms=T0 + MINUTE + SECOND)
    doc = shard.state_doc()
    assert doc["paused"] is True and doc["pause"]["pending"] is True
    # Overlapping runs kept starting under the first version of this; nothing starts now.
    assert shard.run_until(T0 + 5 * MINUTE).runs == []
    shard.report(first[0], "succeeded", at_ms=T0 + 5 * MINUTE + SECOND)
    assert shard.state_doc()["pause"]["pending"] is True  # one more run is in flight
    shard.report(second[0], "succeeded", at_ms=T0 + 5 * MINUTE + 2 * SECOND)
    doc = shard.state_doc()
    assert doc["paused"] is True and "pause" not in doc
    idle = Shard()
    idle.send(upsert(), at_ms=T0 - 1)
    idle.send(command("schedule.pause", after_current=True), at_ms=T0 - 1)
    assert idle.state_doc()["paused"] is True and "pause" not in idle.state_doc()


def test_a_trigger_never_starts_more_than_max_runs_when_an_occurrence_was_due() -> None:
    shard = Shard()
    shard.send(upsert(max_runs=2, overlap="allow"), at_ms=T0 - 1)
    first = shard.run_until(T0).runs
    # Commands go before advance: the 01:00 occurrence fires first, and is the last run.
    triggered = shard.send(command("schedule.trigger"), at_ms=T0 + MINUTE + 500)
    later = shard.run_until(T0 + 10 * MINUTE).runs
    assert len(first + triggered.runs + later) == 2
    assert "is completed" in triggered.rejected[0].reason


def test_max_runs_counts_only_what_will_start_under_buffer_one_and_cancel_other() -> None:
    for overlap in ("buffer_one", "cancel_other", "buffer_all"):
        shard = Shard()
        shard.send(upsert(max_runs=3, overlap=overlap), at_ms=T0 - 1)
        started, running = [], []
        for second in range(0, 20 * 60, 10):
            now = T0 + second * SECOND
            new = []
            for end, run in [p for p in running if p[0] <= now]:
                running.remove((end, run))
                new += shard.report(run, "succeeded", at_ms=now).runs  # the buffer drains
            new += shard.run_until(now).runs
            started += new
            running += [(now + 150 * SECOND, run) for run in new]  # 150 s each
        firsts = {r.run_id for r in started if r.attempt == 1}
        assert len(firsts) == 3, (overlap, sorted(firsts))
