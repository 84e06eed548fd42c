"""Unit tests of the timing wheel: the docstring's worked example and the edge cases."""

from __future__ import annotations

import weakref

import pytest

from actors.wheel import Node, Timer, TimingWheel

DAY_MS = 86_400_000
NOW_MS = 1_764_000_000_000  # 2025-11-24T16:00:00Z, a multiple of the 10 ms tick


class Payload:
    """An item that can be weakly referenced, to prove the wheel let go of it."""


def test_worked_example_of_the_docstring() -> None:
    wheel: TimingWheel[str] = TimingWheel(0)
    wheel.add(25, "a")
    wheel.add(30, "b")
    wheel.add(1_000, "c")
    wheel.add(-5, "d")
    assert len(wheel) == 4
    assert wheel.next_due_ms() == 0
    assert wheel.advance(5) == ["d"]
    assert wheel.next_due_ms() == 30
    assert wheel.advance(29) == []
    assert wheel.advance(30) == ["a", "b"]
    assert wheel.next_due_ms() == 640
    assert wheel.advance(700) == []
    assert wheel.next_due_ms() == 1_000
    assert wheel.advance(5_000) == ["c"]
    assert len(wheel) == 0
    assert wheel.next_due_ms() is None


def test_never_early_and_late_by_at_most_one_tick() -> None:
    wheel: TimingWheel[int] = TimingWheel(NOW_MS)
    for offset_ms in range(1, 200):
        wheel.add(NOW_MS + offset_ms, offset_ms)
    fired_at: dict[int, int] = {}
    for now_ms in range(NOW_MS, NOW_MS + 220):
        for offset_ms in wheel.advance(now_ms):
            fired_at[offset_ms] = now_ms - NOW_MS
    assert sorted(fired_at) == list(range(1, 200))
    for offset_ms, at_ms in fired_at.items():
        assert offset_ms <= at_ms < offset_ms + 10


def test_batch_is_ordered_by_due_then_insertion() -> None:
    wheel: TimingWheel[str] = TimingWheel(0)
    wheel.add(19, "late in the tick")
    wheel.add(12, "first of 12")
    wheel.add(15, "15")
    wheel.add(12, "second of 12")
    wheel.add(-100, "in the past")
    assert wheel.advance(20) == [
        "in the past",
        "first of 12",
        "second of 12",
        "15",
        "late in the tick",
    ]


def test_ties_keep_insertion_order_across_cascades_and_reschedules() -> None:
    # Timers of one tick (1_000..1_009 ms) added before and after the level-1 slot
    # holding them cascades, and one rescheduled: a reschedule counts as the newest.
    wheel: TimingWheel[str] = TimingWheel(0)
    wheel.add(1_005, "a")
    moved = wheel.add(1_005, "moved")
    wheel.add(1_001, "b")
    assert wheel.advance(900) == []  # the slot cascaded: they now wait at level 0
    wheel.add(1_005, "c")
    wheel.add(1_001, "d")
    assert wheel.reschedule(moved, 1_005) is moved
    assert wheel.advance(1_010) == ["b", "d", "a", "c", "moved"]


def test_advance_backwards_is_a_no_op() -> None:
    wheel: TimingWheel[str] = TimingWheel(NOW_MS)
    wheel.add(NOW_MS + 5_000, "pending")
    assert wheel.advance(NOW_MS + 1_000) == []
    next_due_ms = wheel.next_due_ms()
    assert wheel.advance(NOW_MS - DAY_MS) == []
    assert wheel.now_ms == NOW_MS + 1_000
    assert wheel.next_due_ms() == next_due_ms
    assert len(wheel) == 1
    assert wheel.advance(NOW_MS + 5_000) == ["pending"]


def test_advance_backwards_returns_only_past_adds_due_by_then() -> None:
    wheel: TimingWheel[str] = TimingWheel(NOW_MS)
    wheel.add(NOW_MS - 2_000, "due by then")
    wheel.add(NOW_MS - 500, "not yet at that time")
    assert wheel.advance(NOW_MS - 1_000) == ["due by then"]
    assert wheel.advance(NOW_MS) == ["not yet at that time"]


def test_cancel_once_then_false_and_after_fire_false() -> None:
    wheel: TimingWheel[str] = TimingWheel(0)
    cancelled = wheel.add(100, "cancelled")
    fired = wheel.add(100, "fired")
    assert wheel.cancel(cancelled) is True
    assert wheel.cancel(cancelled) is False
    assert len(wheel) == 1
    assert wheel.advance(100) == ["fired"]
    assert wheel.cancel(fired) is False
    assert not fired.pending and not cancelled.pending
    assert len(wheel) == 0
    assert wheel.next_due_ms() is None


class Own(Node):
    """An item that is its own node (as a shard's schedules and runs are)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
        self._next = None

    def __repr__(self) -> str:
        return self.name


def test_an_item_armed_as_its_own_node_keeps_the_order_an_added_one_gets() -> None:
    # The same dues, once as items wrapped by add and once as nodes armed: the same
    # batches, through the expired list, level 0 and a cascade from level 2.
    dues = [("a", NOW_MS + 30), ("b", NOW_MS + 30), ("c", NOW_MS - 5), ("d", NOW_MS + DAY_MS)]
    dues += [("e", NOW_MS + 25), ("f", NOW_MS + DAY_MS)]
    added: TimingWheel[str] = TimingWheel(NOW_MS)
    armed: TimingWheel[Own] = TimingWheel(NOW_MS)
    nodes = {name: Own(name) for name, _ in dues}
    for name, due_ms in dues:
        added.add(due_ms, name)
        armed.arm(nodes[name], due_ms)
    assert len(armed) == len(added) == 6 and nodes["a"].pending
    for now_ms in (NOW_MS, NOW_MS + 30, NOW_MS + DAY_MS):
        fired = armed.advance(now_ms)
        assert [node.name for node in fired] == added.advance(now_ms)
        assert all(node is nodes[node.name] and not node.pending for node in fired)
    assert len(armed) == 0 and nodes["d"].due_ms == NOW_MS + DAY_MS


def test_arming_a_pending_node_moves_it_and_cancel_detaches_it() -> None:
    wheel: TimingWheel[Own | str] = TimingWheel(0)
    x, y = Own("x"), Own("y")
    wheel.arm(x, 50_000)
    wheel.arm(y, 100)
    timer = wheel.add(100, "t")
    wheel.arm(x, 100)  # moved: a new insertion, after y and t
    assert len(wheel) == 3 and x.due_ms == 100
    assert wheel.advance(100) == [y, "t", x]
    wheel.arm(y, 0)  # fired, in the past: armed again
    assert wheel.cancel(y) and not wheel.cancel(y) and not y.pending
    assert not wheel.cancel(timer)
    assert len(wheel) == 0 and wheel.advance(60_000) == []


def test_cancel_lets_go_of_timer_and_item_at_once() -> None:
    wheel: TimingWheel[Payload] = TimingWheel(NOW_MS)
    payload = Payload()
    gone = weakref.ref(payload)
    timer = wheel.add(NOW_MS + 40 * DAY_MS, payload)
    del payload
    assert gone() is not None  # the wheel holds it
    assert wheel.cancel(timer)
    del timer
    assert gone() is None  # freed by reference counting, without a collection


def test_reschedule_moves_a_pending_timer_and_rearms_a_fired_one() -> None:
    wheel: TimingWheel[str] = TimingWheel(0)
    timer = wheel.add(50_000, "x")
    other = wheel.add(100, "y")
    assert wheel.reschedule(timer, 100) is timer
    assert timer.due_ms == 100 and len(wheel) == 2
    assert wheel.advance(100) == ["y", "x"]  # a reschedule counts as a new insertion
    assert wheel.reschedule(other, 0) is other  # fired, in the past: armed again
    assert len(wheel) == 1
    assert wheel.advance(100) == ["y"]
    assert wheel.advance(60_000) == []


def test_next_due_ms_never_later_than_the_earliest_due_rounded_up() -> None:
    wheel: TimingWheel[int] = TimingWheel(NOW_MS)
    assert wheel.next_due_ms() is None
    added: list[int] = []
    for due_ms in (NOW_MS + 45 * DAY_MS + 3, NOW_MS + 2 * DAY_MS + 7, NOW_MS + 61_001, NOW_MS + 7):
        wheel.add(due_ms, due_ms)
        added.append(due_ms)
        earliest_rounded_ms = -(-min(added) // 10) * 10
        next_due_ms = wheel.next_due_ms()
        assert next_due_ms is not None and next_due_ms <= earliest_rounded_ms
    assert wheel.next_due_ms() == NOW_MS + 10  # level 0: exact
    past = wheel.add(NOW_MS - 1_234, -1)
    assert wheel.next_due_ms() == NOW_MS - 1_230
    wheel.cancel(past)
    assert wheel.next_due_ms() == NOW_MS + 10


def test_sleeping_until_next_due_reaches_a_timer_a_century_away_in_few_wakeups() -> None:
    wheel: TimingWheel[str] = TimingWheel(NOW_MS)
    due_ms = NOW_MS + 36_525 * DAY_MS + 1  # beyond the wheel's 21.8 years: overflow list
    wheel.add(due_ms, "centenary")
    wakeups = 0
    fired: list[str] = []
    while not fired:
        next_due_ms = wheel.next_due_ms()
        assert next_due_ms is not None and next_due_ms <= due_ms + 9
        fired = wheel.advance(next_due_ms)
        wakeups += 1
    assert fired == ["centenary"]
    assert wheel.now_ms == due_ms + 9
    # One wakeup per overflow block entered (every 2**36 ticks), then one per level.
    blocks_crossed = (due_ms // 10 >> 36) - (NOW_MS // 10 >> 36)
    assert wakeups <= blocks_crossed + 6 + 1


def test_timer_fields_are_read_only() -> None:
    wheel: TimingWheel[str] = TimingWheel(0)
    timer = wheel.add(10, "x")
    assert isinstance(timer, Timer)
    with pytest.raises(AttributeError):
        timer.due_ms = 20  # type: ignore[misc]
    with pytest.raises(AttributeError):
        timer.item = "y"  # type: ignore[misc]
    assert "due_ms=10" in repr(timer)


def test_rejects_a_tick_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="tick_ms must be a positive"):
        TimingWheel(0, tick_ms=0)
