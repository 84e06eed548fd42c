"""A stalled caller (docs/DESIGN.md §6.10): an `advance` long after the shard expected
one judges nothing by silence until the results that came meanwhile are read, and a
caller that simply comes only when asked is never taken for a stalled one."""

from __future__ import annotations

from actors.shard import ShardCore
from tests.kit.shard import SECOND, T0, Out, Shard, upsert
from tests.shard.test_shard_deadlines import alerts, started
from topics.alerts import DEADLINE_REPORT_GRACE_MS, AlertType, DeadlineKind
from topics.messages import Run, result_value

EVERY_MINUTE = {"every": "60s", "anchor": "2026-10-10T00:00:00Z"}


def watched(shard: Shard, schedule_id: str, start_within_s: int) -> None:
    body = upsert(schedule_id, spec=EVERY_MINUTE, deadline={"start_within_s": start_within_s})
    assert not shard.send(body).rejected


def fired_at_t0(shard: Shard) -> dict[str, Run]:
    return {run.schedule_id: run for run in shard.advance(T0).runs}


def ticking(shard: Shard, to_ms: int, every_ms: int = SECOND) -> Out:
    """A runtime's turns: `advance` every ``every_ms`` up to ``to_ms``."""
    records = []
    at_ms = shard.now_ms
    while at_ms < to_ms:
        at_ms = min(to_ms, at_ms + every_ms)
        records.extend(shard.advance(at_ms).records)
    return Out(records)


def succeeded(shard: Shard, run: Run, started_ms: int, finished_ms: int, *, at_ms: int) -> Out:
    """The worker's outcome: the run started and ended at those instants."""
    shard.now_ms = at_ms
    value = result_value(
        run_id=run.run_id,
        schedule_id=run.schedule_id,
        task=None,
        attempt=run.attempt,
        status="succeeded",
        scheduled_ms=run.scheduled_ms,
        started_ms=started_ms,
        finished_ms=finished_ms,
        worker="w-1",
        error=None,
    )
    return shard.raw_result(run.schedule_id.encode(), value)


def test_a_thawed_caller_whose_applied_results_removed_the_earliest_timer_is_stalled() -> None:
    # Two runs fire at T0: a must start within 5 s (judged by silence at +10 s), b
    # within 14 s (at +19 s). Both start in time. The process freezes at +1 s and
    # thaws at +20 s: its first poll brings a's outcome (it ran from +2 s to +3 s),
    # which ends a and takes its timer off the wheel; b's start report is still unread
    # when the turn comes. The earliest timer left is b's judgement, only a moment
    # ago: judged by it, b would be alerted for good although it started at +3 s.
    shard = Shard(now_ms=T0 - SECOND)
    watched(shard, "a", 5)
    watched(shard, "b", 14)
    runs = fired_at_t0(shard)
    seen = alerts(shard.advance(T0 + SECOND))
    ended = succeeded(shard, runs["a"], T0 + 2 * SECOND, T0 + 3 * SECOND, at_ms=T0 + 20 * SECOND)
    seen += alerts(ended)
    seen += alerts(shard.advance(T0 + 20 * SECOND))
    seen += alerts(started(shard, runs["b"], T0 + 3 * SECOND, at_ms=T0 + 20 * SECOND + 500))
    seen += alerts(shard.run_until(T0 + 59 * SECOND))
    assert seen == []
    assert shard.core.stats["deadline_missed_total"] == 0


def test_a_caller_frozen_past_its_cadence_is_stalled_though_no_timer_was_long_due() -> None:
    # The scheduler's turns come every second at least. Frozen from +2 s to +10.5 s,
    # half a second past a's judgement by silence: only the time since the last turn
    # tells the stall; a's report (it started at +2 s) is read right after.
    core = ShardCore(partition=0, partitions=1, now_ms=T0 - SECOND, advance_every_ms=SECOND)
    shard = Shard(now_ms=T0 - SECOND, core=core)
    watched(shard, "a", 5)
    runs = fired_at_t0(shard)
    seen = alerts(ticking(shard, T0 + 2 * SECOND))
    seen += alerts(shard.advance(T0 + 10 * SECOND + 500))
    seen += alerts(started(shard, runs["a"], T0 + 2 * SECOND, at_ms=T0 + 11 * SECOND))
    seen += alerts(ticking(shard, T0 + 59 * SECOND))
    assert seen == []


def test_a_stall_puts_judgement_off_once_not_for_ever() -> None:
    # The same freeze, but a never starts: once the turns come again every second, the
    # judgement waits out one grace and writes its alert, once.
    core = ShardCore(partition=0, partitions=1, now_ms=T0 - SECOND, advance_every_ms=SECOND)
    shard = Shard(now_ms=T0 - SECOND, core=core)
    watched(shard, "a", 5)
    runs = fired_at_t0(shard)
    ticking(shard, T0 + 2 * SECOND)
    thawed_ms = T0 + 10 * SECOND + 500
    assert alerts(shard.advance(thawed_ms)) == []
    seen = alerts(ticking(shard, thawed_ms + DEADLINE_REPORT_GRACE_MS + SECOND))
    assert [(a.type, a.deadline, a.run_id) for a in seen] == [
        (AlertType.MISSED, DeadlineKind.START, runs["a"].run_id)
    ]
    assert alerts(ticking(shard, T0 + 59 * SECOND)) == []


def test_a_caller_that_comes_only_when_asked_is_never_stalled() -> None:
    # The simulation calls `advance` only at the instants the shard asks for, here
    # seconds apart: each call comes when expected, so a silent run is judged at its
    # instant (the start due plus the grace), never put off from call to call.
    shard = Shard(now_ms=T0 - SECOND)
    watched(shard, "a", 5)
    runs = fired_at_t0(shard)
    judged_ms = T0 + 5 * SECOND + DEADLINE_REPORT_GRACE_MS
    calls = []
    while (due_ms := shard.core.next_due_ms()) is not None and due_ms <= judged_ms:
        calls.append(due_ms)
        seen = alerts(shard.advance(due_ms))
        if seen:
            break
    assert calls[0] - T0 > 2 * SECOND  # the first call after the fire comes seconds later
    [alert] = seen
    assert (alert.run_id, alert.late_by_ms) == (runs["a"].run_id, DEADLINE_REPORT_GRACE_MS)


def test_turns_slower_than_the_stall_bound_still_judge_and_time_out() -> None:
    # An overloaded scheduler whose every turn takes 3.5 s: each `advance` comes more
    # than the stall bound after it was expected. A grace at every such turn would put
    # judgement by silence, and the watched run's time-out, off for ever; the run
    # below never starts, so it must get its one alert and end timed_out.
    core = ShardCore(partition=0, partitions=1, now_ms=T0 - SECOND, advance_every_ms=SECOND)
    shard = Shard(now_ms=T0 - SECOND, core=core)
    body = upsert("a", spec=EVERY_MINUTE, deadline={"start_within_s": 5}, timeout_s=10)
    assert not shard.send(body).rejected
    runs = fired_at_t0(shard)
    out = ticking(shard, T0 + 50 * SECOND, every_ms=3_500)
    assert [(a.type, a.deadline, a.run_id) for a in alerts(out)] == [
        (AlertType.MISSED, DeadlineKind.START, runs["a"].run_id)
    ]
    assert runs["a"].run_id in {r.run_id for r in out.results if r.status == "timed_out"}
