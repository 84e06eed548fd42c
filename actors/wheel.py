"""A hierarchical timing wheel (Varghese and Lauck) for the next fires of one shard.

The schedule actor keeps every pending fire, retry and timeout of its shard here. The
wheel only says "these are due, in this order"; the caller acts on them. Like Kafka's
TimingWheel it queues buckets, not timers, so time passing over empty buckets costs
nothing, and a timer is cancelled by the identity of the handle `add` returned.

Model
-----
Time is cut into ticks of `tick_ms` (10 ms by default). A timer due at `due_ms` belongs
to tick ``ceil(due_ms / tick_ms)``: rounding *up* is what makes it never fire early.
The wheel's clock ``now_tick = floor(now_ms / tick_ms)`` is the last tick it has passed.

A tick number is read as base-64 digits, six bits each. Level k has 64 slots indexed by
digit k. A pending timer lives at the level of the highest digit in which its tick
differs from `now_tick`, in the slot of its own digit there::

    level = (bit_length(tick ^ now_tick) - 1) // 6        slot = (tick >> 6*level) & 63

So level 0 holds the ticks of the current block of 64, level 1 those of the current
block of 4096 but not the current block of 64, and so on. Ticks beyond level 5
(differing above bit 36) wait in one overflow list that is re-filed when `now_tick`
enters the next block of 2**36 ticks; ticks at or before `now_tick` (added in the
past) wait in an "expired" list that the next `advance` empties.

Levels for the default tick of 10 ms (the range is what one level spans; a timer is
filed at the lowest level whose block it shares with now, so a level can hold deltas
shorter than the level below it spans when the delta crosses a block boundary):

    =====  ===========  ===========  ==============================
    level  granularity  range        holds ticks that share with now
    =====  ===========  ===========  ==============================
    0      10 ms        640 ms       digits 1.. (same 64-block)
    1      640 ms       40.96 s      digits 2..
    2      40.96 s      43.7 min     digits 3..
    3      43.7 min     46.6 h       digits 4..
    4      46.6 h       124.3 days   digits 5..
    5      124.3 days   21.8 years   bits 36 and above
    over   (a list)     unbounded    nothing (re-filed every 21.8 years)
    =====  ===========  ===========  ==============================

When `advance` moves the clock into the block of a non-empty slot of level k >= 1, it
cascades that slot: each timer is re-filed relative to the new clock, which puts it at
a lower level (or fires it if its tick has come). A timer is re-filed at most once
per level, so cascading costs O(levels) per timer over its whole life.

Each level keeps a 64-bit occupancy mask (a Python int). Every occupied slot of level
k lies after the clock's digit k, so the lowest set bit of the lowest non-empty level
is the next thing that can happen: `advance` and `next_due_ms` jump straight to it
and never walk empty slots. Buckets are circular doubly-linked lists threaded through
the timers themselves (a sentinel per bucket), so add, cancel and reschedule are O(1),
and a cancelled timer is unlinked at once: nothing of it stays in the wheel.

Worked example (tick 10 ms, clock at 0 ms, so now_tick = 0):

    add(25, "a")      tick 3      3 ^ 0 = 0b11, 2 bits       level 0, slot 3
    add(30, "b")      tick 3      same bucket as "a"          level 0, slot 3
    add(1_000, "c")   tick 100    100 = 1*64 + 36, 7 bits     level 1, slot 1
    add(-5, "d")      tick 0      not after now_tick          expired list

    next_due_ms() == 0            the expired list is due now
    advance(5)    -> ["d"]        the clock stays at tick 0 (5 // 10)
    next_due_ms() == 30           level 0 slot 3, tick 3
    advance(29)   -> []           tick 2: "a" is due at 25 but rounds up to 30
    advance(30)   -> ["a", "b"]   tick 3: sorted by due_ms, ties by insertion
    next_due_ms() == 640          level 1 slot 1 starts at tick 64: a bucket, not "c"
    advance(700)  -> []           tick 70: the slot cascades, "c" (tick 100) moves to
                                  level 0 slot 36 since 100 ^ 70 = 0b101110
    next_due_ms() == 1_000        now exact
    advance(5_000) -> ["c"]

Guarantees
----------
* Never early: `advance(now_ms)` returns only items with ``due_ms <= now_ms``.
* Late by at most one tick: an item is returned by the first `advance` whose
  ``now_ms >= ceil(due_ms / tick_ms) * tick_ms``, which is ``< due_ms + tick_ms``.
* Order: a batch is sorted by (due_ms, insertion order); a reschedule counts as a new
  insertion. Only the due batch is sorted.
* `next_due_ms` is never later than the earliest pending due rounded up to the tick
  (it may be earlier: the start of a higher-level slot, after which it is exact).
* Cost: add, cancel, reschedule and `len` are O(1). `advance` costs O(levels) plus
  O(1) per timer fired or cascaded, however many timers are loaded.
* The clock never moves backwards: `advance` to an earlier time only returns timers
  that were added in the past with ``due_ms <= now_ms``.

Not thread-safe; one shard's actor owns its wheel.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Generic, TypeVar

__all__ = ["Timer", "TimingWheel"]

T = TypeVar("T")

_SLOT_BITS = 6
_SLOTS = 1 << _SLOT_BITS
_SLOT_MASK = _SLOTS - 1
_LEVELS = 6
_WHEEL_BITS = _SLOT_BITS * _LEVELS  # 36: ticks differing above this go to overflow

# Buckets are numbered level * 64 + slot; two extra lists take the indices of a
# seventh and eighth "level" so that one mask list covers them too.
_EXPIRED = _LEVELS * _SLOTS
_OVERFLOW = _EXPIRED + _SLOTS
_EXPIRED_LEVEL = _EXPIRED >> _SLOT_BITS
_OVERFLOW_LEVEL = _OVERFLOW >> _SLOT_BITS

# Indexed by bit_length(tick ^ now_tick) in 1..36: the shift of the level's digit and
# the number of its first bucket. Table lookups beat arithmetic in the add path.
_SHIFT_OF_BITS = (0, *(((b - 1) // _SLOT_BITS) * _SLOT_BITS for b in range(1, 37)))
_BASE_OF_BITS = (0, *(((b - 1) // _SLOT_BITS) * _SLOTS for b in range(1, 37)))

_by_due_then_seq = attrgetter("_due_ms", "_seq")
_new_timer = object.__new__


class Timer:
    """Handle of one pending item; returned by `TimingWheel.add`, cancelled by identity.

    `due_ms` and `item` are read-only for callers. A timer that has fired or been
    cancelled is detached (``_next is None``); `TimingWheel.reschedule` re-arms it.
    """

    __slots__ = ("_due_ms", "_item", "_next", "_prev", "_seq")

    _prev: Timer | None
    _next: Timer | None

    def __init__(self, due_ms: int, item: Any, seq: int) -> None:
        self._due_ms = due_ms
        self._item = item
        self._seq = seq

    @property
    def due_ms(self) -> int:
        return self._due_ms

    @property
    def item(self) -> Any:
        return self._item

    @property
    def pending(self) -> bool:
        """True until the timer fires or is cancelled."""
        return self._next is not None

    def __repr__(self) -> str:
        state = "pending" if self._next is not None else "detached"
        return f"Timer(due_ms={self._due_ms}, item={self._item!r}, {state})"


class _Bucket(Timer):
    """Sentinel of a circular bucket list; its `_seq` is the bucket number."""

    __slots__ = ()

    def __init__(self, number: int) -> None:
        super().__init__(-1, None, number)
        self._prev = self._next = self


class TimingWheel(Generic[T]):
    """Pending items of one shard by due time; see the module docstring for the model."""

    __slots__ = (
        "_buckets",
        "_expired_min_tick",
        "_masks",
        "_removed",
        "_round_up_ms",
        "_seq",
        "_tick",
        "_tick_ms",
    )

    def __init__(self, now_ms: int, tick_ms: int = 10) -> None:
        if tick_ms <= 0:
            raise ValueError(f"tick_ms must be a positive number of milliseconds, got {tick_ms}")
        self._tick_ms = tick_ms
        self._tick = now_ms // tick_ms  # last tick passed: everything up to it has fired
        self._buckets = [_Bucket(n) for n in range(_OVERFLOW + 1)]
        self._masks = [0] * (_OVERFLOW_LEVEL + 1)
        self._round_up_ms = tick_ms - 1  # (due_ms + this) // tick_ms rounds up
        # len() is seq - removed: every add takes a seq; the hot path counts nothing else.
        self._seq = 0
        self._removed = 0
        self._expired_min_tick = 0  # meaningful only while the expired list is non-empty

    @property
    def tick_ms(self) -> int:
        return self._tick_ms

    @property
    def now_ms(self) -> int:
        """Start of the last tick the wheel has passed."""
        return self._tick * self._tick_ms

    def __len__(self) -> int:
        return self._seq - self._removed

    def add(self, due_ms: int, item: T) -> Timer:
        """Schedule `item` at `due_ms`; O(1). A due at or before now fires on the next advance."""
        # The hot path of a restore: `_file` inlined, the timer built without __init__.
        timer = _new_timer(Timer)
        timer._due_ms = due_ms
        timer._item = item
        seq = self._seq
        timer._seq = seq
        self._seq = seq + 1
        tick = (due_ms + self._round_up_ms) // self._tick_ms
        now_tick = self._tick
        if tick <= now_tick:
            self._file(timer, due_ms)
            return timer
        bits = (tick ^ now_tick).bit_length()
        if bits > 36:  # _WHEEL_BITS; literals below are the constants, to save lookups
            self._file(timer, due_ms)
            return timer
        number = _BASE_OF_BITS[bits] + ((tick >> _SHIFT_OF_BITS[bits]) & 63)
        bucket = self._buckets[number]
        tail = bucket._prev
        assert tail is not None
        timer._prev = tail
        timer._next = bucket
        tail._next = timer
        bucket._prev = timer
        if tail is bucket:  # the bucket was empty
            self._masks[number >> 6] |= 1 << (number & 63)
        return timer

    def cancel(self, timer: Timer) -> bool:
        """Remove `timer` at once; O(1). False if it already fired or was cancelled."""
        nxt = timer._next
        if nxt is None:
            return False
        self._unlink(timer, nxt)
        self._removed += 1
        return True

    def reschedule(self, timer: Timer, due_ms: int) -> Timer:
        """Move `timer` to `due_ms` and return it; O(1).

        Ties are then ordered as if it had been added now. A timer that already fired or
        was cancelled is armed again (the same handle).
        """
        nxt = timer._next
        if nxt is not None:
            self._unlink(timer, nxt)
            self._removed += 1  # it takes a new seq below without adding to len()
        seq = self._seq
        self._seq = seq + 1
        timer._seq = seq
        timer._due_ms = due_ms
        self._file(timer, due_ms)
        return timer

    def next_due_ms(self) -> int | None:
        """When to call `advance` next: the start of the earliest non-empty bucket.

        Never later than the earliest pending due rounded up to the tick; None if empty.
        """
        masks = self._masks
        if masks[_EXPIRED_LEVEL]:
            return self._expired_min_tick * self._tick_ms
        now_tick = self._tick
        for level in range(_LEVELS):
            mask = masks[level]
            if mask:
                return self._slot_start(now_tick, level, mask) * self._tick_ms
        if masks[_OVERFLOW_LEVEL]:
            return ((now_tick >> _WHEEL_BITS) + 1 << _WHEEL_BITS) * self._tick_ms
        return None

    def advance(self, now_ms: int) -> list[T]:
        """Move the clock to `now_ms` and return the items now due, in due order.

        Returns every pending item whose due rounded up to the tick is <= now_ms, sorted
        by (due_ms, insertion); never one with due_ms > now_ms.
        """
        target = now_ms // self._tick_ms
        masks = self._masks
        buckets = self._buckets
        fired: list[Timer] = []
        if masks[_EXPIRED_LEVEL]:
            self._drain_expired(target, fired)
        now_tick = self._tick
        if target <= now_tick:
            return self._release(fired)
        while True:
            for level in range(_LEVELS):
                mask = masks[level]
                if mask:
                    break
            else:
                if masks[_OVERFLOW_LEVEL]:
                    event = (now_tick >> _WHEEL_BITS) + 1 << _WHEEL_BITS
                    if event > target:
                        break
                    now_tick = self._tick = event
                    self._refile(self._detach(_OVERFLOW), fired)
                    continue
                break
            shift = level * _SLOT_BITS
            slot = (mask & -mask).bit_length() - 1
            event = (now_tick >> (shift + _SLOT_BITS) << (shift + _SLOT_BITS)) | (slot << shift)
            if event > target:
                break
            now_tick = self._tick = event
            number = level * _SLOTS + slot
            if level == 0:
                # Every timer of a level-0 slot has exactly this tick: all fire.
                masks[0] = mask & ~(1 << slot)
                bucket = buckets[number]
                node = bucket._next
                bucket._next = bucket._prev = bucket
                while node is not bucket:
                    assert node is not None
                    fired.append(node)
                    nxt = node._next
                    node._next = node._prev = None
                    node = nxt
            else:
                self._refile(self._detach(number), fired)
        self._tick = target
        return self._release(fired)

    # -- internals --------------------------------------------------------------------

    def _file(self, timer: Timer, due_ms: int) -> None:
        """Link `timer` into the bucket of its due; the clock is `self._tick`."""
        tick = (due_ms + self._round_up_ms) // self._tick_ms
        now_tick = self._tick
        if tick > now_tick:
            bits = (tick ^ now_tick).bit_length()
            if bits <= _WHEEL_BITS:
                number = _BASE_OF_BITS[bits] + ((tick >> _SHIFT_OF_BITS[bits]) & _SLOT_MASK)
            else:
                number = _OVERFLOW
        else:
            if not self._masks[_EXPIRED_LEVEL] or tick < self._expired_min_tick:
                self._expired_min_tick = tick
            number = _EXPIRED
        bucket = self._buckets[number]
        tail = bucket._prev
        assert tail is not None
        timer._prev = tail
        timer._next = bucket
        tail._next = timer
        bucket._prev = timer
        self._masks[number >> _SLOT_BITS] |= 1 << (number & _SLOT_MASK)

    def _unlink(self, timer: Timer, nxt: Timer) -> None:
        prev = timer._prev
        assert prev is not None
        prev._next = nxt
        nxt._prev = prev
        timer._next = timer._prev = None
        if prev is nxt:  # only the sentinel is left: the bucket is empty
            number = prev._seq
            self._masks[number >> _SLOT_BITS] &= ~(1 << (number & _SLOT_MASK))

    @staticmethod
    def _slot_start(now_tick: int, level: int, mask: int) -> int:
        """First tick of the lowest occupied slot of `level` (all lie after now_tick)."""
        shift = level * _SLOT_BITS
        above = shift + _SLOT_BITS
        slot = (mask & -mask).bit_length() - 1
        return (now_tick >> above << above) | (slot << shift)

    def _detach(self, number: int) -> list[Timer]:
        """Empty bucket `number` and return its timers, detached."""
        bucket = self._buckets[number]
        timers: list[Timer] = []
        node = bucket._next
        bucket._next = bucket._prev = bucket
        self._masks[number >> _SLOT_BITS] &= ~(1 << (number & _SLOT_MASK))
        while node is not bucket:
            assert node is not None
            timers.append(node)
            node = node._next
        return timers

    def _refile(self, timers: list[Timer], fired: list[Timer]) -> None:
        """Cascade: file `timers` again relative to the clock, firing those now due."""
        now_tick = self._tick
        tick_ms = self._tick_ms
        for timer in timers:
            if -(-timer._due_ms // tick_ms) <= now_tick:
                timer._next = timer._prev = None
                fired.append(timer)
            else:
                self._file(timer, timer._due_ms)

    def _drain_expired(self, target: int, fired: list[Timer]) -> None:
        """Move the expired list's timers due by tick `target` into `fired`.

        All of them are due unless the caller advances backwards; those are kept.
        """
        tick_ms = self._tick_ms
        for timer in self._detach(_EXPIRED):
            if -(-timer._due_ms // tick_ms) <= target:
                timer._next = timer._prev = None
                fired.append(timer)
            else:
                self._file(timer, timer._due_ms)

    def _release(self, fired: list[Timer]) -> list[T]:
        self._removed += len(fired)
        if len(fired) > 1:
            fired.sort(key=_by_due_then_seq)
        return [t._item for t in fired]
