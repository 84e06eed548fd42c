"""The worker's time for its decisions: its wall clock, never behind the broker's.

A worker decides by time: a run past its deadline is ``timed_out``, and from
``deadline + TIMEOUT_MARGIN_MS`` on it writes no result at all, because the shard
then decides the attempt itself, by the broker's clock (docs/DESIGN.md §5). The
shard's clock is held to the broker's; a worker's is whatever its host says. A
worker whose clock is behind (a VM restored from a snapshot, an NTP step the
wrong way) believes deadlines are further off than they are, and reports a late
job's own result after the shard has written ``timed_out`` for that attempt: two
results for one attempt. A step back also stretches the lease: the worker keeps
running jobs of partitions the group has already given to someone else.

Every run record carries the broker's time (``{ns}.runs`` uses LogAppendTime,
checked by ``kafkron topics check``), and the record was appended before it was
fetched, so the broker's clock read at least that much then, and at least that
plus the monotonic time elapsed since, now. ``BrokerFloor`` keeps that lower bound
and the worker's time is the later of it and the wall clock. Its rules:

- The floor only rises: each sample raises it if it says more than the floor does.
- It advances with the monotonic clock (``CLOCK_BOOTTIME`` in the runtime: a
  suspended host lived through that time too), never with the wall clock, so no
  step of the wall clock moves it.
- A clock that is ahead is left as it is: a lower bound cannot see it. Such a
  worker cuts jobs short by its lead (``timed_out`` early) and may find its lease
  lost after a forward step; neither gives an attempt two results.

Pure: the executors (the aiokafka runtime, the simulation) read the clocks and
feed it.
"""

from __future__ import annotations


class BrokerFloor:
    """A lower bound of the broker's clock, carried forward on the monotonic clock."""

    __slots__ = ("_base_ms",)

    def __init__(self) -> None:
        # floor at monotonic instant m = _base_ms + m (None: no sample yet).
        self._base_ms: int | None = None

    def observe(self, broker_ms: int, mono_ms: int) -> None:
        """A record appended at ``broker_ms`` (broker time) was fetched by ``mono_ms``."""
        if broker_ms <= 0:  # no timestamp (a CreateTime topic's missing one)
            return
        base = broker_ms - mono_ms
        if self._base_ms is None or base > self._base_ms:
            self._base_ms = base

    def floor_ms(self, mono_ms: int) -> int | None:
        """The least the broker's clock can read at ``mono_ms`` (None: no sample)."""
        return None if self._base_ms is None else self._base_ms + mono_ms

    def now_ms(self, wall_ms: int, mono_ms: int) -> int:
        """The worker's time: its wall clock, raised to the floor when behind it."""
        base = self._base_ms
        if base is None:
            return wall_ms
        floor = base + mono_ms
        return floor if floor > wall_ms else wall_ms

    def behind_ms(self, wall_ms: int, mono_ms: int) -> int:
        """How far the wall clock is behind the floor (0 if it is not)."""
        return self.now_ms(wall_ms, mono_ms) - wall_ms


MOVE_REPORTED_MS = 5
"""How far the worker's time must have moved off the monotonic clock before the move
is reported (`TimeMoves`): a wall clock and a monotonic clock read one after the
other, in whole milliseconds, disagree by a millisecond back and forth at every
reading; a wait at most 5 ms off lets a rate limit of R a second at most 0.005·R
more starts in a window."""


class TimeMoves:
    """How far the worker's time moved other than with the monotonic clock: a step of
    the wall clock (NTP, a VM restored), or the broker floor raising a wall clock that
    was behind (a fresh worker's first fetch).

    The worker's time is right for instants the broker judges (a deadline), but a
    wait measured on it is cut short by a forward move: a partition adopted at 10:00:00
    by a worker 10 s behind, whose first fetch raises its time to the broker's, would
    end an 18 s adoption wait (docs/DESIGN.md §8.2) after 8 s, and start a key's runs
    beside the previous owner's. So every reading reports the move since the last
    report, and the core moves its waits by as much (`WorkerCore.time_moved`): they
    are then measured on the monotonic clock, whatever the wall clock does. A backward
    move moves the lease too (`WorkerMachine.time_moved`): a clock ahead of the
    broker's, which the floor cannot see, stepped back would otherwise hold the lease
    for the whole step.

    Pure: the executors (the aiokafka runtime, the simulation) read the clocks."""

    __slots__ = ("_base_ms",)

    def __init__(self) -> None:
        # The worker's time less the monotonic clock at the last report (None: none yet).
        self._base_ms: int | None = None

    def moved_ms(self, now_ms: int, mono_ms: int) -> int:
        """The worker's time ``now_ms`` was read at ``mono_ms``: how far it moved off the
        monotonic clock since the last move reported (0 below `MOVE_REPORTED_MS`)."""
        base = now_ms - mono_ms
        last = self._base_ms
        if last is None:
            self._base_ms = base
            return 0
        moved = base - last
        if -MOVE_REPORTED_MS < moved < MOVE_REPORTED_MS:
            return 0
        self._base_ms = base
        return moved
