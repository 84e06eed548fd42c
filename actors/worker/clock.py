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
