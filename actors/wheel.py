"""A hierarchical timing wheel (Varghese and Lauck) for the next fires of one shard.

The schedule actor keeps every pending fire, retry and timeout of its shard here. The
wheel only says "these are due, in this order"; the caller acts on them. Like Kafka's
TimingWheel it queues buckets, not timers, so time passing over empty buckets costs
nothing, and a timer is cancelled by the identity of the handle `add` returned.
An object the caller keeps anyway can be its own handle instead: a subclass of
`Node`, armed with `arm` and handed back by `advance` as itself (a shard's schedules
and runs are, so a million schedules are not a million schedules plus a million
timers).

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

Levels for the default tick of 10 ms. Granularity is the width of a slot (64**k
ticks), range the span of the whole level (64**(k+1) ticks). A timer goes by the
block it shares with now, not by its distance, so a short delta that crosses a block
boundary sits higher than its distance suggests: at now_tick 63, tick 64 is filed at
level 1 slot 1 and cascades to level 0 when the clock gets there:

    =====  ===========  ===========  ==============================
    level  granularity  range        holds ticks that share with now
    =====  ===========  ===========  ==============================
    0      10 ms        640 ms       digits 1.. (same 64-block)
    1      640 ms       40.96 s      digits 2..
    2      40.96 s      43.7 min     digits 3..
    3      43.7 min     46.6 h       digits 4..
    4      46.6 h       124.3 days   digits 5..
    5      124.3 days   21.8 years   digits 6.. (bits 36 and up)
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
  ``now_ms >= ceil(due_ms / tick_ms) * tick_ms``, which is ``< due_ms + tick_ms``; a
  caller that advances at `next_due_ms` fires each item less than one tick late.
* Order: a batch is sorted by (due_ms, insertion order); a reschedule counts as a new
  insertion. No sequence number is needed for that: all timers of one tick are always
  in the same bucket, in insertion order, because add and reschedule append, and a
  cascade moves a bucket's timers in list order. A batch is a series of one-tick runs
  in tick order, and a run is stable-sorted by due_ms only when found out of order.
* `next_due_ms` is never later than the earliest pending due rounded up to the tick
  (it may be earlier: the start of a higher-level slot, after which it is exact).
* Cost: add, cancel, reschedule and `len` are O(1). `advance` costs O(levels) plus
  O(1) per timer fired or cascaded, however many timers are loaded.
* The clock never moves backwards: `advance` to an earlier time only returns timers
  that were added in the past with ``due_ms <= now_ms``.

Memory: one object of four slots per timer (64 bytes on CPython 3.11, see
bench/wheel.py), or three slots more on an object armed as its own node (24 bytes),
and 449 bucket sentinels per wheel. Timers are objects the cyclic
garbage collector tracks (heapq's tuples of ints are not), so a runtime loading a
shard in bulk should pause the collector meanwhile and `gc.freeze()` afterwards.

Not thread-safe; one shard's actor owns its wheel.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Generic, TypeVar, cast

__all__ = ["Node", "Timer", "TimingWheel"]

T = TypeVar("T")
N = TypeVar("N", bound="Node")

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

_by_due = attrgetter("_due_ms")
_new_timer = object.__new__


class Node:
    """A place in the wheel's bucket lists: what `add` wraps an item in, or an item
    itself (`TimingWheel.arm`).

    `due_ms` is read-only for callers; a node that has fired or been cancelled is
    detached (``_next is None``) and keeps its last due. A subclass armed with
    `TimingWheel.arm` is its own item, so the wheel hands it back as such: an object
    the caller keeps anyway (a shard's schedule) then costs no second object per timer.
    Such a subclass must set ``_next = None`` before it is first armed.
    """

    __slots__ = ("_due_ms", "_next", "_prev")

    _due_ms: int
    _prev: Node | None
    _next: Node | None

    @property
    def due_ms(self) -> int:
        return self._due_ms

    @property
    def pending(self) -> bool:
        """True from the moment it is armed until it fires or is cancelled."""
        return self._next is not None

    @property
    def _item(self) -> Any:
        """What `advance` returns for this node: the node itself (`Timer` overrides)."""
        return self


def park(node: Node, mark: Node) -> None:
    """Mark a detached `node` that the caller keeps aside for later (a timer found
    due but left for the next call, `actors.shard.leftovers`): `parked` holds until
    the node is armed again, whose linking overwrites the mark. It uses the node's
    back link, which a detached node does not use: no memory per node.
    """
    assert node._next is None, "only a detached node can be parked"
    node._prev = mark


def parked(node: Node, mark: Node) -> bool:
    """Whether `node` still carries `mark` from `park`: not armed since."""
    return node._prev is mark


class Timer(Node):
    """Handle of one pending item; returned by `TimingWheel.add`, cancelled by identity.

    `due_ms` and `item` are read-only for callers. A timer that has fired or been
    cancelled is detached (``_next is None``); `TimingWheel.reschedule` re-arms it.
    """

    __slots__ = ("_item",)

    _item: Any  # a slot: this one holds its item

    def __init__(self, due_ms: int, item: Any) -> None:
        self._due_ms = due_ms
        self._item = item

    @property
    def item(self) -> Any:
        return self._item

    def __repr__(self) -> str:
        state = "pending" if self._next is not None else "detached"
        return f"Timer(due_ms={self._due_ms}, item={self._item!r}, {state})"


class _Bucket(Node):
    """Sentinel of a circular bucket list, numbered level * 64 + slot."""

    __slots__ = ("_number",)

    def __init__(self, number: int) -> None:
        self._due_ms = -1
        self._number = number
        self._prev = self._next = self


class TimingWheel(Generic[T]):
    """Pending items of one shard by due time; see the module docstring for the model."""

    __slots__ = (
        "_added",
        "_buckets",
        "_expired_min_tick",
        "_masks",
        "_removed",
        "_round_up_ms",
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
        # len() is added - removed, so that add() counts with one increment.
        self._added = 0
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
        return self._added - self._removed

    def restart(self, now_ms: int) -> None:
        """Set an empty wheel's clock to ``now_ms``, as a new wheel would start (a
        shard's core arms its restored timers from the present, its parts keeping
        the same wheel)."""
        if len(self):
            raise ValueError("only an empty wheel restarts")
        TimingWheel.__init__(self, now_ms, self._tick_ms)

    def add(self, due_ms: int, item: T) -> Timer:
        """Schedule `item` at `due_ms`; O(1). A due at or before now fires on the next advance."""
        # The hot path of a restore: the timer built without __init__.
        timer = _new_timer(Timer)
        timer._due_ms = due_ms
        timer._item = item
        self._added += 1
        self._file(timer, due_ms)
        return timer

    def arm(self, node: Node, due_ms: int) -> None:
        """Put `node`, its own item, at `due_ms` (see `Node`); O(1). A pending node
        moves (a new insertion for the order of ties), as with `reschedule`.
        """
        nxt = node._next
        if nxt is None:
            self._added += 1
        else:
            self._unlink(node, nxt)
        node._due_ms = due_ms
        self._file(node, due_ms)

    def cancel(self, timer: Node) -> bool:
        """Remove `timer` at once; O(1). False if it already fired or was cancelled."""
        nxt = timer._next
        if nxt is None:
            return False
        self._unlink(timer, nxt)
        self._removed += 1
        return True

    def reschedule(self, timer: N, due_ms: int) -> N:
        """Move `timer` to `due_ms` and return it; O(1).

        Ties are then ordered as if it had been added now. A timer that already fired or
        was cancelled is armed again (the same handle).
        """
        self.arm(timer, due_ms)
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
        fired: list[Node] = []
        if masks[_EXPIRED_LEVEL]:
            self._drain_expired(target, fired)
            _sort_from(fired, 0)
        now_tick = self._tick
        if target <= now_tick:
            return self._release(fired)
        # Each pass handles one event: the next occupied slot, whose tick is found from
        # the masks. A batch is thus made of one-tick runs in tick order, and only a run
        # found out of order is sorted.
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
                    first = len(fired)
                    self._cascade(_OVERFLOW, fired)
                    _sort_from(fired, first)
                    continue
                break
            shift = level * _SLOT_BITS
            slot = (mask & -mask).bit_length() - 1
            event = (now_tick >> (shift + _SLOT_BITS) << (shift + _SLOT_BITS)) | (slot << shift)
            if event > target:
                break
            now_tick = self._tick = event
            first = len(fired)
            if level:
                self._cascade(level * _SLOTS + slot, fired)
                _sort_from(fired, first)
                continue
            # Every timer of a level-0 slot has exactly this tick: all fire. They are in
            # insertion order (see the module docstring), so a stable sort by due_ms is
            # all that is needed, and only if two dues within the tick are out of order.
            masks[0] = mask & ~(1 << slot)
            bucket = buckets[slot]
            node = bucket._next
            assert node is not None
            bucket._next = bucket._prev = bucket
            last_due = node._due_ms
            in_order = True
            while node is not bucket:
                assert node is not None
                due = node._due_ms
                if due < last_due:
                    in_order = False
                last_due = due
                fired.append(node)
                nxt = node._next
                node._next = node._prev = None
                node = nxt
            if not in_order:
                _sort_from(fired, first)
        self._tick = target
        return self._release(fired)

    # -- internals --------------------------------------------------------------------

    def _file(self, timer: Node, due_ms: int) -> None:
        """Link `timer` into the bucket of its due; the clock is `self._tick`.

        What `add`, `arm` and `reschedule` share: a shard arms a node per fire and per
        restored schedule, so the literals below are the constants, to save lookups.
        """
        tick = (due_ms + self._round_up_ms) // self._tick_ms
        now_tick = self._tick
        if tick <= now_tick:  # due already: the expired list (a restore after a pause)
            if not self._masks[_EXPIRED_LEVEL] or tick < self._expired_min_tick:
                self._expired_min_tick = tick
            number = _EXPIRED
        else:
            bits = (tick ^ now_tick).bit_length()
            if bits <= 36:  # _WHEEL_BITS
                number = _BASE_OF_BITS[bits] + ((tick >> _SHIFT_OF_BITS[bits]) & 63)
            else:
                number = _OVERFLOW
        bucket = self._buckets[number]
        tail = bucket._prev
        assert tail is not None
        timer._prev = tail
        timer._next = bucket
        tail._next = timer
        bucket._prev = timer
        if tail is bucket:  # the bucket was empty
            self._masks[number >> 6] |= 1 << (number & 63)

    def _unlink(self, timer: Node, nxt: Node) -> None:
        prev = timer._prev
        assert prev is not None
        prev._next = nxt
        nxt._prev = prev
        timer._next = timer._prev = None
        if prev is nxt:  # only the sentinel is left: the bucket is empty
            number = cast(_Bucket, prev)._number
            self._masks[number >> _SLOT_BITS] &= ~(1 << (number & _SLOT_MASK))

    @staticmethod
    def _slot_start(now_tick: int, level: int, mask: int) -> int:
        """First tick of the lowest occupied slot of `level` (all lie after now_tick)."""
        shift = level * _SLOT_BITS
        above = shift + _SLOT_BITS
        slot = (mask & -mask).bit_length() - 1
        return (now_tick >> above << above) | (slot << shift)

    def _detach(self, number: int) -> list[Node]:
        """Empty bucket `number` and return its timers, detached."""
        bucket = self._buckets[number]
        timers: list[Node] = []
        node = bucket._next
        bucket._next = bucket._prev = bucket
        self._masks[number >> _SLOT_BITS] &= ~(1 << (number & _SLOT_MASK))
        while node is not bucket:
            assert node is not None
            timers.append(node)
            node = node._next
        return timers

    def _cascade(self, number: int, fired: list[Node]) -> None:
        """Empty bucket `number`, filing its timers again relative to the clock (which
        puts them at lower levels) and firing those whose tick has come."""
        buckets = self._buckets
        masks = self._masks
        now_tick = self._tick
        tick_ms = self._tick_ms
        round_up_ms = self._round_up_ms
        bucket = buckets[number]
        node = bucket._next
        bucket._next = bucket._prev = bucket
        masks[number >> _SLOT_BITS] &= ~(1 << (number & _SLOT_MASK))
        # Walk the old chain; each node's successor is read before it is re-linked.
        while node is not bucket:
            assert node is not None
            nxt = node._next
            tick = (node._due_ms + round_up_ms) // tick_ms
            if tick <= now_tick:
                node._next = node._prev = None
                fired.append(node)
            else:
                bits = (tick ^ now_tick).bit_length()
                if bits <= _WHEEL_BITS:
                    into = _BASE_OF_BITS[bits] + ((tick >> _SHIFT_OF_BITS[bits]) & _SLOT_MASK)
                else:
                    into = _OVERFLOW
                target = buckets[into]
                tail = target._prev
                assert tail is not None
                node._prev = tail
                node._next = target
                tail._next = node
                target._prev = node
                if tail is target:
                    masks[into >> _SLOT_BITS] |= 1 << (into & _SLOT_MASK)
            node = nxt

    def _drain_expired(self, target: int, fired: list[Node]) -> None:
        """Move the expired list's timers due by tick `target` into `fired`.

        All of them are due unless the caller advances backwards; those are kept.
        """
        tick_ms = self._tick_ms
        round_up_ms = self._round_up_ms
        for timer in self._detach(_EXPIRED):
            if (timer._due_ms + round_up_ms) // tick_ms <= target:
                timer._next = timer._prev = None
                fired.append(timer)
            else:
                self._file(timer, timer._due_ms)

    def _release(self, fired: list[Node]) -> list[T]:
        self._removed += len(fired)
        return [t._item for t in fired]


def _sort_from(fired: list[Node], first: int) -> None:
    """Sort the run fired[first:] by (due_ms, insertion)."""
    if len(fired) - first > 1:
        run = fired[first:]
        run.sort(key=_by_due)
        fired[first:] = run
