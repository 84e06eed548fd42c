"""Priorities in the worker core and its lanes (docs/DESIGN.md §8.4): the highest waiting
first, the high lane first across a shared pool, the starvation bound, the reserve,
and the wake-ups between the two lanes' cores."""

from __future__ import annotations

import pytest

from actors.worker.core import Outcome, StartJob, WorkerCore
from actors.worker.lanes import NORMAL_EVERY_HIGH_STARTS, Lane, SlotPool, parse_reserve
from actors.worker.waiting import Waiting
from topics.command_types import Job
from topics.messages import idempotency_key, parse_run, run_id_for, run_value
from topics.names import TopicKind
from topics.records import InRecord
from topics.vocabulary import RunStatus

T0 = 1_790_000_000_000
DONE = Outcome(RunStatus.SUCCEEDED)


def record(offset: int, priority: int = 0, partition: int = 0) -> InRecord:
    sid = f"s{offset}-p{priority}"
    run_id = run_id_for(sid, T0)
    value = run_value(
        run_id=run_id,
        schedule_id=sid,
        task=None,
        scheduled_ms=T0,
        fired_ms=T0,
        attempt=1,
        job=Job("noop", {}, priority=priority),
        idempotency_key=idempotency_key(run_id),
        deadline_ms=T0 + 600_000,
    )
    return InRecord(TopicKind.RUNS, partition, offset, sid.encode(), value)


def core(concurrency: int, pool: SlotPool | None = None, lane: Lane = Lane.NORMAL) -> WorkerCore:
    made = WorkerCore(
        worker=f"w-{lane.name}",
        concurrency=concurrency,
        known_job=lambda n: n == "noop",
        now_ms=T0,
        lease_loss_ms=600_000,
        pool=pool,
        lane=lane,
    )
    made.assign(0, 0, None, T0)
    return made


def started(actions: list[object]) -> list[str]:
    return [a.run.schedule_id for a in actions if isinstance(a, StartJob)]


def keys(actions: list[object]) -> list[tuple[int, int, int]]:
    return [a.key for a in actions if isinstance(a, StartJob)]


def test_a_run_record_carries_its_priority_and_leaves_0_out() -> None:
    assert parse_run(record(0, 7).value or b"").job.priority == 7
    assert b"priority" not in (record(0, 0).value or b"")
    assert parse_run(record(0, 0).value or b"").job.priority == 0


def test_the_highest_waiting_priority_starts_first_then_offset_order() -> None:
    worker = core(1)
    out = worker.receive(record(0, 0), T0)  # takes the one slot
    for offset, priority in ((1, 0), (2, 3), (3, 1), (4, 3), (5, 0)):
        out += worker.receive(record(offset, priority), T0)
    assert started(out) == ["s0-p0"]
    order = []
    for _ in range(5):
        running = keys(out)[-1]
        out = worker.job_exited(running, DONE, T0 + 1)
        order += started(out)
    assert order == ["s2-p3", "s4-p3", "s3-p1", "s1-p0", "s5-p0"]


def test_a_core_without_priorities_keeps_its_plain_deque() -> None:
    worker = core(1)
    for offset in range(3):
        worker.receive(record(offset), T0)
    assert not isinstance(worker._queue, Waiting)
    worker.receive(record(3, 2), T0)
    assert isinstance(worker._queue, Waiting) and worker.queued == 3


def test_a_revoked_partition_leaves_the_prioritised_queue_with_the_others() -> None:
    worker = core(1)
    worker.assign(1, 0, None, T0)
    worker.receive(record(0, 0), T0)
    worker.receive(record(1, 4, partition=1), T0)
    worker.receive(record(2, 2), T0)
    worker.revoke(1)
    assert isinstance(worker._queue, Waiting)
    assert [run.schedule_id for _, run in worker._queue] == ["s2-p2"]


def test_waiting_keeps_priority_then_arrival_order_through_put_backs() -> None:
    runs = [(("k", i), parse_run(record(i, p).value or b"")) for i, p in enumerate((0, 5, 5, 9))]
    waiting = Waiting(runs)  # type: ignore[arg-type]
    first = waiting.popleft()
    second = waiting.popleft()
    assert [first[1].job.priority, second[1].job.priority] == [9, 5]
    waiting.extendleft(reversed([first, second]))
    assert [run.job.priority for _, run in waiting] == [9, 5, 5, 0]
    del waiting[1]
    assert [run.schedule_id for _, run in waiting] == ["s3-p9", "s2-p5", "s0-p0"]
    assert len(waiting) == 3 and waiting.top_priority() == 9


def lanes(concurrency: int, **options: int) -> tuple[SlotPool, WorkerCore, WorkerCore, list[Lane]]:
    pool = SlotPool(concurrency, **options)  # type: ignore[arg-type]
    woken: list[Lane] = []
    for lane in Lane:
        pool.on_wake(lane, lambda lane=lane: woken.append(lane))
    return pool, core(concurrency, pool, Lane.NORMAL), core(concurrency, pool, Lane.HIGH), woken


def test_two_lanes_share_the_slots_and_a_freed_one_goes_to_the_high_lane() -> None:
    pool, normal, high, woken = lanes(2)
    out = [normal.receive(record(i, 0), T0) for i in range(4)]
    assert [started(o) for o in out] == [["s0-p0"], ["s1-p0"], [], []]
    assert high.receive(record(0, 7), T0) == []  # both slots taken by the herd
    # A low job exits: its slot is not taken by the next low run, the high lane is woken.
    assert started(normal.job_exited((0, 0, 0), DONE, T0 + 5)) == []
    assert woken == [Lane.HIGH]
    assert started(high.advance(T0 + 5)) == ["s0-p7"]
    assert pool.used() == 2


def test_the_normal_lane_starts_one_run_per_k_high_starts() -> None:
    k = NORMAL_EVERY_HIGH_STARTS
    _pool, normal, high, woken = lanes(1)
    normal.receive(record(0, 0), T0)  # the slot
    for offset in range(1, 4):
        normal.receive(record(offset, 0), T0)
    for offset in range(2 * k + 2):
        high.receive(record(offset, 6), T0)
    order = []
    running: tuple[Lane, tuple[int, int, int]] = (Lane.NORMAL, (0, 0, 0))
    for step in range(2 * k + 2):
        lane, key = running
        exiting = normal if lane is Lane.NORMAL else high
        out = exiting.job_exited(key, DONE, T0 + step + 1)
        while not [a for a in out if isinstance(a, StartJob)] and woken:
            other = woken.pop(0)
            out = (normal if other is Lane.NORMAL else high).advance(T0 + step + 1)
        woken.clear()
        (action,) = [a for a in out if isinstance(a, StartJob)]
        lane = Lane.HIGH if action.run.job.priority >= 5 else Lane.NORMAL
        order.append(lane.name[0])
        running = (lane, action.key)
    assert "".join(order) == "H" * k + "N" + "H" * k + "N"


def test_the_reserve_keeps_slots_for_high_priorities() -> None:
    pool = SlotPool(3, reserve=1, reserve_min_priority=5)
    worker = core(3, pool)
    out = []
    for offset in range(4):
        out += worker.receive(record(offset, 0), T0)
    assert started(out) == ["s0-p0", "s1-p0"]  # the third slot is the reserve's
    assert started(worker.receive(record(4, 5), T0)) == ["s4-p5"]
    assert pool.used() == 3


def test_the_reserve_threshold_is_inclusive_and_counts_either_lane() -> None:
    pool, normal, _high, _ = lanes(2, reserve=1, reserve_min_priority=3)
    assert started(normal.receive(record(0, 2), T0)) == ["s0-p2"]
    assert started(normal.receive(record(1, 2), T0)) == []  # the reserve's slot
    assert started(normal.receive(record(2, 3), T0)) == ["s2-p3"]  # P itself may take it
    assert pool.used() == 2


def test_the_bound_never_holds_a_high_run_back_for_a_normal_run_the_reserve_refuses() -> None:
    k = NORMAL_EVERY_HIGH_STARTS
    pool, normal, high, _woken = lanes(2, reserve=1)
    normal.receive(record(0, 0), T0)  # the one slot low runs may take
    normal.receive(record(1, 0), T0)  # waits: only the reserve's slot is left
    assert pool.wanting(Lane.NORMAL) == 0
    for offset in range(k + 2):
        high.receive(record(offset, 5), T0)
    high_key = (0, 0, 0)
    for step in range(k + 1):
        out = high.job_exited(high_key, DONE, T0 + step + 1)
        (action,) = [a for a in out if isinstance(a, StartJob)]  # the next high run
        high_key = action.key
    assert pool.counts["normal_turns"] == 0


def test_with_a_reserve_a_busy_high_lane_still_gives_the_normal_lane_its_turn() -> None:
    # Three slots, one reserved for the high lane: normal runs may take two. The high
    # lane keeps all three busy, so no normal run is ever admitted by the reserve; the
    # bound must still give the normal lane one start per K high ones (a high start is
    # held back until one of its jobs frees a slot the normal run then takes).
    k = NORMAL_EVERY_HIGH_STARTS
    pool, normal, high, woken = lanes(3, reserve=1)
    running = []
    for offset in range(3):
        running += [a.key for a in high.receive(record(offset, 6), T0) if isinstance(a, StartJob)]
    assert len(running) == 3
    normal.receive(record(0, 0), T0)  # waits: the high lane holds every slot
    for offset in range(3, 3 + 2 * k + 2):
        high.receive(record(offset, 6), T0)
    order = []
    for step in range(k + 2):
        out = high.job_exited(running.pop(0), DONE, T0 + step + 1)
        while not [a for a in out if isinstance(a, StartJob)] and woken:
            other = woken.pop(0)
            out = (normal if other is Lane.NORMAL else high).advance(T0 + step + 1)
        woken.clear()
        starts = [a for a in out if isinstance(a, StartJob)]
        if not starts:  # the normal lane's turn: the freed slot waits for the next one
            order.append("-")
            continue
        (action,) = starts
        if action.run.job.priority >= 5:
            running.append(action.key)
            order.append("H")
        else:
            order.append("N")
            break
    assert "".join(order) == "H" * k + "-N"
    assert pool.counts["normal_turns"] >= 1


def test_a_lane_left_without_runs_stops_being_waited_for() -> None:
    _pool, normal, high, woken = lanes(1)
    normal.receive(record(0, 0), T0)
    high.receive(record(0, 8), T0)  # waits for the slot
    high.revoke(0)  # its partition goes elsewhere: nothing of it waits any more
    normal.receive(record(1, 0), T0)
    out = normal.job_exited((0, 0, 0), DONE, T0 + 1)  # refused: the high lane still counts
    while woken:
        lane = woken.pop(0)
        out += (normal if lane is Lane.NORMAL else high).advance(T0 + 1)
    assert started(out) == ["s1-p0"]


@pytest.mark.parametrize(
    ("text", "expected"), [("2", (2, 5)), ("1:7", (1, 7)), ("0:1", (0, 1)), ("3:9", (3, 9))]
)
def test_reserve_flag(text: str, expected: tuple[int, int]) -> None:
    assert parse_reserve(text) == expected


@pytest.mark.parametrize("text", ["", "x", "1:", "1:0", "1:10", "-1", "2:a"])
def test_bad_reserve_flags_say_what_is_wrong(text: str) -> None:
    with pytest.raises(ValueError, match="--reserve"):
        parse_reserve(text)


def test_a_reserve_must_leave_a_slot() -> None:
    with pytest.raises(ValueError, match="below --concurrency"):
        SlotPool(2, reserve=2)
