"""What a bounded `advance` leaves due waits in the core, and commands still reach it.

A bounded call keeps the rest of what is due in the core's own due list (not back
on the wheel, which would cost every call the whole backlog). Between two bounded
calls the shard still applies commands and results, so an entry of that list
must behave exactly as a timer on the wheel would: a deleted or paused schedule
does not fire, a re-upserted one fires by its new definition, a run that ended
is not timed out.
"""

from __future__ import annotations

from actors.shard.core import ShardCore
from tests.kit.shard import MINUTE, SECOND, T0, Shard, command, upsert
from topics.names import TopicKind
from topics.records import OutRecord


def _herd(count: int) -> Shard:
    """``count`` schedules due at T0 + 1 min, restored just after it (a takeover)."""
    shard = Shard(now_ms=T0 + 5)
    for i in range(count):
        shard.send(upsert(f"s{i:02d}", spec={"every": "1h", "anchor": "2026-10-10T00:01:00Z"}))
    restored, _ = shard.restored(T0 + MINUTE + SECOND)
    return restored


def _fired(shard: Shard, records: list[OutRecord]) -> list[str]:
    return [(r.key or b"").decode() for r in records if r.topic is TopicKind.RUNS]


def test_a_herd_bounded_per_call_fires_each_schedule_once_in_due_order() -> None:
    shard = _herd(20)
    now = shard.now_ms
    fired: list[str] = []
    calls = 0
    while (due := shard.core.next_due_ms()) is not None and due <= now:
        calls += 1
        assert calls <= 20
        out = shard.core.advance(now, max_fires=3)
        assert len(_fired(shard, out)) <= 3
        fired += _fired(shard, out)
    assert calls == 7 and sorted(fired) == [f"s{i:02d}" for i in range(20)]
    assert shard.core.stats["timers"] == 40  # 20 next fires, 20 deadlines


def test_commands_between_bounded_calls_reach_what_was_left_due() -> None:
    shard = _herd(6)
    now = shard.now_ms
    first = _fired(shard, shard.core.advance(now, max_fires=2))
    assert first == ["s00", "s01"]
    shard.send(command("schedule.delete", "s02"))
    shard.send(command("schedule.pause", "s03"))
    # re-upserted: its definition now fires at 00:30, so nothing is due for it now
    shard.send(upsert("s04", spec={"every": "1h", "anchor": "2026-10-10T00:30:00Z"}))
    rest: list[str] = []
    while (due := shard.core.next_due_ms()) is not None and due <= now:
        rest += _fired(shard, shard.core.advance(now, max_fires=2))
    assert rest == ["s05"]
    assert shard.core.schedule("s02") is None
    assert shard.run_until(T0 + 31 * MINUTE).runs[0].schedule_id == "s04"


def test_a_run_that_ended_between_bounded_calls_is_not_timed_out() -> None:
    shard = Shard(now_ms=T0 + 5)
    for i in range(4):
        shard.send(upsert(f"s{i}", spec={"every": "1h"}, timeout_s=10))
    runs = shard.run_until(T0 + 60 * MINUTE).runs
    assert len(runs) == 4
    later, _ = shard.restored(T0 + 60 * MINUTE + 45 * SECOND)  # every deadline passed
    timed_out = later.core.advance(later.now_ms, max_fires=1)
    assert [r.status for r in later._keep(timed_out).results] == ["timed_out"]
    for run in runs[1:3]:
        later.report(run, "succeeded")
    rest = []
    while (due := later.core.next_due_ms()) is not None and due <= later.now_ms:
        rest += later._keep(later.core.advance(later.now_ms, max_fires=1)).results
    assert [r.run_id for r in rest] == [runs[3].run_id]


def test_a_left_attempt_retried_between_bounded_calls_is_sent_once_not_also_timed_out() -> None:
    """Two attempts time out at once; a bounded call handles one. A failed result for
    the other arms its retry; the next call popped that retry from the wheel *and*
    took the same run from the left list (detached by the pop, it looked still due),
    so attempt 2 was sent and, in the same batch, timed out and dead-lettered."""
    from actors.shard.core import TIMEOUT_MARGIN_MS

    retry = {"max_attempts": 2, "initial_s": 1, "coefficient": 1.0, "jitter": "none"}
    shard = Shard(now_ms=T0)
    for sid in ("a", "b"):
        shard.send(upsert(sid, spec={"every": "60s"}, timeout_s=10, retry=retry))
    shard.advance(T0 + MINUTE)
    timed_out_at = T0 + MINUTE + 10 * SECOND + TIMEOUT_MARGIN_MS + 5
    shard.now_ms = timed_out_at
    shard._keep(shard.core.advance(timed_out_at, max_fires=1))
    (left,) = list(shard.core._left_attempts)
    shard.report(shard.last_attempt(left.run_id), "failed")
    out = shard.advance(timed_out_at + 2 * SECOND)
    assert [r.attempt for r in out.runs if r.run_id == left.run_id] == [2]  # sent once
    assert [r.status for r in out.results if r.run_id == left.run_id] == []  # not timed out
    assert out.dlq == []


def _count_judgements(core: ShardCore) -> list[int]:
    """Count the core's calls of ``_still_due`` from now on (in the one cell returned)."""
    judged = [0]
    still_due = core._still_due

    def counting(item: object) -> bool:
        judged[0] += 1
        return still_due(item)  # type: ignore[arg-type]

    core._still_due = counting  # type: ignore[method-assign]
    return judged


def test_bounded_calls_judge_each_left_timer_about_once_not_once_per_call() -> None:
    """A herd drained 10 per call judged everything left at every call: 300 due in 30
    calls was ~4,500 judgements (a million due, 5,000 per call: ~10^8, which made the
    bounded herd cost several times the unbounded one). Each call now looks only at
    what it takes."""
    shard = _herd(300)
    core = shard.core
    judged = _count_judgements(core)
    now = shard.now_ms
    fired: list[str] = []
    while (due := core.next_due_ms()) is not None and due <= now:
        fired += _fired(shard, core.advance(now, max_fires=10))
    assert sorted(fired) == sorted(f"s{i:02d}" for i in range(300))
    assert judged[0] <= 2 * 300


def test_a_left_schedule_re_armed_and_handed_back_again_fires_once() -> None:
    """A re-upsert re-arms a schedule deep in the left queue (same next fire); the
    next call's wheel hands it back again while its old place is still queued: it
    must fire once, and every other schedule once, in due order."""
    shard = _herd(12)
    now = shard.now_ms
    fired = _fired(shard, shard.core.advance(now, max_fires=2))
    assert fired == ["s00", "s01"]
    shard.send(upsert("s09", spec={"every": "1h", "anchor": "2026-10-10T00:01:00Z"}))
    while (due := shard.core.next_due_ms()) is not None and due <= now:
        fired += _fired(shard, shard.core.advance(now, max_fires=2))
    assert sorted(fired) == [f"s{i:02d}" for i in range(12)]
    assert fired.index("s09") > fired.index("s11")  # re-armed: ordered as a new insertion


def _spread_herd(count: int) -> Shard:
    """``count`` schedules due over 00:01:00..00:01:59, restored at 00:02 (a takeover)."""
    shard = Shard(now_ms=T0 + 5)
    for i in range(count):
        anchor = f"2026-10-10T00:01:{i * 60 // count:02d}Z"
        shard.send(upsert(f"s{i:03d}", spec={"every": "1h", "anchor": anchor}))
    restored, _ = shard.restored(T0 + 2 * MINUTE)
    return restored


def test_a_due_schedule_re_upserted_before_every_call_costs_no_rebuild_of_the_queue() -> None:
    """A takeover applies the commands produced while the shard was down as its herd
    drains: a re-upsert of a schedule due and not fired yet re-arms it in the past,
    so the wheel hands it back ahead of what is queued. Placing it used to sort and
    re-queue everything left (300 due, 10 per call: ~4,300 judgements)."""
    count = 300
    shard = _spread_herd(count)
    core = shard.core
    judged = _count_judgements(core)
    now = shard.now_ms
    fired: list[str] = []
    while (due := core.next_due_ms()) is not None and due <= now:
        unfired = [f"s{i:03d}" for i in range(count) if f"s{i:03d}" not in fired]
        again = unfired[len(unfired) // 2]
        anchor = f"2026-10-10T00:01:{int(again[1:]) * 60 // count:02d}Z"
        shard.send(upsert(again, spec={"every": "1h", "anchor": anchor}))
        fired += _fired(shard, core.advance(now, max_fires=10))
    assert sorted(fired) == [f"s{i:03d}" for i in range(count)]
    assert judged[0] <= 2 * count
