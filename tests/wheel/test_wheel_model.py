"""The timing wheel against a heapq reference model (Kafka's timer tests do the same
against a PriorityQueue): random adds, cancels, reschedules and advances, including
dues in the past and decades ahead, must fire the same items in the same order."""

from __future__ import annotations

import heapq

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from actors.wheel import Timer, TimingWheel

DAY_MS = 86_400_000
TICKS_PER_OVERFLOW_BLOCK = 1 << 36  # the wheel re-files its overflow list at these


class HeapTimers:
    """The obvious implementation: a heap of (due_ms, seq, key) with lazy deletion."""

    def __init__(self, now_ms: int, tick_ms: int) -> None:
        self.tick_ms = tick_ms
        self.heap: list[tuple[int, int, int]] = []
        self.live: dict[int, int] = {}  # key -> seq of its current entry
        self.seq = 0

    def _ceil_tick(self, due_ms: int) -> int:
        return -(-due_ms // self.tick_ms)

    def add(self, key: int, due_ms: int) -> None:
        self.seq += 1
        self.live[key] = self.seq
        heapq.heappush(self.heap, (due_ms, self.seq, key))

    def cancel(self, key: int) -> bool:
        return self.live.pop(key, None) is not None

    def advance(self, now_ms: int) -> list[int]:
        target = now_ms // self.tick_ms
        fired = []
        while self.heap and self._ceil_tick(self.heap[0][0]) <= target:
            _, seq, key = heapq.heappop(self.heap)
            if self.live.get(key) == seq:
                del self.live[key]
                fired.append(key)
        return fired

    def earliest_due_ms(self) -> int | None:
        dues = [due for due, seq, key in self.heap if self.live.get(key) == seq]
        return min(dues) if dues else None


offsets_ms = st.one_of(
    st.integers(-5_000, 5_000),  # around now, including the past
    st.integers(-10 * DAY_MS, 2 * DAY_MS),
    st.integers(30 * DAY_MS, 40_000 * DAY_MS),  # beyond 30 days, up to a century
)
steps_ms = st.one_of(
    st.integers(0, 2_000),
    st.integers(0, 3 * DAY_MS),
    st.integers(0, 40_000 * DAY_MS),
)


class WheelAgainstHeap(RuleBasedStateMachine):
    timers = Bundle("timers")

    @initialize(
        tick_ms=st.sampled_from([1, 7, 10, 1_000]),
        start_ms=st.integers(0, 2_000_000_000_000),
        # Start just before the k-th overflow block boundary (k = 1..3) instead, so the
        # overflow list gets re-filed within reach of the advances.
        boundary=st.one_of(st.none(), st.tuples(st.integers(1, 3), st.integers(-50_000, 50))),
    )
    def setup(self, tick_ms: int, start_ms: int, boundary: tuple[int, int] | None) -> None:
        if boundary is not None:
            block, offset_ms = boundary
            start_ms = block * TICKS_PER_OVERFLOW_BLOCK * tick_ms + offset_ms
        self.now_ms = start_ms
        self.wheel: TimingWheel[int] = TimingWheel(start_ms, tick_ms=tick_ms)
        self.model = HeapTimers(start_ms, tick_ms)
        self.next_key = 0

    @rule(target=timers, offset_ms=offsets_ms)
    def add(self, offset_ms: int) -> Timer:
        key = self.next_key
        self.next_key += 1
        timer = self.wheel.add(self.now_ms + offset_ms, key)
        self.model.add(key, self.now_ms + offset_ms)
        assert timer.item == key and timer.due_ms == self.now_ms + offset_ms
        return timer

    @rule(timer=timers)
    def cancel(self, timer: Timer) -> None:
        assert self.wheel.cancel(timer) == self.model.cancel(timer.item)
        assert not timer.pending

    @rule(timer=timers, offset_ms=offsets_ms)
    def reschedule(self, timer: Timer, offset_ms: int) -> None:
        due_ms = self.now_ms + offset_ms
        assert self.wheel.reschedule(timer, due_ms) is timer
        self.model.cancel(timer.item)
        self.model.add(timer.item, due_ms)
        assert timer.due_ms == due_ms and timer.pending

    @rule(step_ms=steps_ms)
    def advance(self, step_ms: int) -> None:
        self.now_ms += step_ms
        assert self.wheel.advance(self.now_ms) == self.model.advance(self.now_ms)

    @rule(back_ms=st.integers(1, 10 * DAY_MS))
    def advance_backwards(self, back_ms: int) -> None:
        # Allowed and harmless: only dues added in the past can come out.
        then_ms = self.now_ms - back_ms
        assert self.wheel.advance(then_ms) == self.model.advance(then_ms)

    @precondition(lambda self: len(self.wheel) > 0)
    @rule()
    def sleep_until_next_due(self) -> None:
        """What the runtime does: sleep until next_due_ms, then advance (just before, too)."""
        next_due_ms = self.wheel.next_due_ms()
        assert next_due_ms is not None
        just_before = self.wheel.advance(next_due_ms - 1)
        assert just_before == self.model.advance(next_due_ms - 1)
        self.now_ms = max(self.now_ms, next_due_ms)
        assert self.wheel.advance(self.now_ms) == self.model.advance(self.now_ms)

    @invariant()
    def same_size(self) -> None:
        assert len(self.wheel) == len(self.model.live)

    @invariant()
    def next_due_never_late(self) -> None:
        earliest = self.model.earliest_due_ms()
        next_due_ms = self.wheel.next_due_ms()
        if earliest is None:
            assert next_due_ms is None
        else:
            tick_ms = self.model.tick_ms
            assert next_due_ms is not None
            assert next_due_ms <= -(-earliest // tick_ms) * tick_ms


WheelAgainstHeap.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestWheelAgainstHeap = WheelAgainstHeap.TestCase
