"""The slots one worker process shares between a queue's two lanes (docs/DESIGN.md §8.4).

A worker started with ``--lanes`` runs two cores per queue: one reads the queue's
topic (the *normal* lane, priorities 0-4), one its high lane topic (5-9). They share
``concurrency`` slots through one `SlotPool`, which each core asks before it starts a
run (`may_start`). Pure: no I/O, no clock; the executors (the runtime, the
simulation's lane driver) carry out its wake-ups.

The rules, all decided here:

- **The high lane first.** While the high lane holds a run it could start but for a
  slot (``wanting``), a freed slot goes to it, not to the normal lane.
- **The starvation bound.** While the normal lane holds a run it could start, at most
  ``normal_every`` (K, `NORMAL_EVERY_HIGH_STARTS`) high runs start before one normal
  run does: of every K + 1 starts of a worker whose normal lane waits, one is the
  normal lane's. So a normal run at the head of its lane waits at most K high starts
  per normal start ahead of it: the normal lane keeps at least 1/(K + 1) of the
  worker's starts however busy the high lane is.
- **The reserve** (``--reserve N[:P]``): a run of priority below P starts only while
  fewer than ``concurrency - N`` slots are taken, so N slots are always left to runs of
  priority P or more (of either lane; P defaults to the high lane's 5). The starvation
  bound still holds with a reserve: when the normal lane's turn comes while the high
  lane's jobs fill the slots the reserve leaves to normal runs, the next high start
  waits until one of them frees a slot, which the normal run then takes. A normal
  lane that fills those slots with its own jobs holds no high run back.

Wake-ups: a core whose start was refused for the other lane's sake, or which leaves a
slot free while the other lane waits, wakes the other lane (`take_wake`, and the
callback its executor registered), whose core then fills its slots. Each refusal
names a lane that can start, so the two never wake each other for ever.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

from topics.priority import LANE_MIN_PRIORITY, MAX_PRIORITY, MIN_PRIORITY

NORMAL_EVERY_HIGH_STARTS = 4
"""K of the starvation bound: one normal start at least per K high starts."""


class Lane(IntEnum):
    NORMAL = 0
    HIGH = 1


class SlotPool:
    """``concurrency`` slots shared by a queue's lanes on one worker process."""

    def __init__(
        self,
        concurrency: int,
        *,
        reserve: int = 0,
        reserve_min_priority: int = LANE_MIN_PRIORITY,
        normal_every: int | None = NORMAL_EVERY_HIGH_STARTS,
        high_first: bool = True,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if not 0 <= reserve < concurrency:
            raise ValueError(
                f"--reserve {reserve}: must be at least 0 and below --concurrency {concurrency}"
                " (the runs below the reserve's priority need one slot)"
            )
        if not MIN_PRIORITY < reserve_min_priority <= MAX_PRIORITY:
            raise ValueError(
                f"--reserve N:P: P must be between {MIN_PRIORITY + 1} and {MAX_PRIORITY},"
                f" got {reserve_min_priority}"
            )
        if normal_every is not None and normal_every < 1:
            raise ValueError(f"normal_every must be at least 1, got {normal_every}")
        self.concurrency = concurrency
        self.reserve = reserve
        self.reserve_min_priority = reserve_min_priority
        # None: never yield to the normal lane; ``high_first`` False: no lane goes first
        # (each only the simulation's broken variant, `simulation.lanes`).
        self._normal_every = normal_every
        self._high_first = high_first
        self._running: dict[Lane, Callable[[], int]] = {}
        self._wanting: dict[Lane, int | None] = {Lane.NORMAL: None, Lane.HIGH: None}
        self._high_streak = 0  # high starts since the last normal one, while it waited
        self._woken: set[Lane] = set()
        self._wakers: dict[Lane, Callable[[], None]] = {}
        self.counts: dict[str, int] = {
            "high_starts": 0,
            "normal_starts": 0,
            "normal_turns": 0,  # high starts refused: the normal lane's turn (the bound)
            "reserve_waits": 0,
        }

    def join(self, lane: Lane, running: Callable[[], int]) -> None:
        """``lane``'s core takes part; ``running`` counts the slots it holds (a job
        holds its slot until it has exited, `WorkerCore.running`)."""
        self._running[lane] = running

    def on_wake(self, lane: Lane, callback: Callable[[], None]) -> None:
        """Call ``callback`` when ``lane`` is woken (its executor then ticks its core)."""
        self._wakers[lane] = callback

    def used(self) -> int:
        return sum(running() for running in self._running.values())

    def admits(self, priority: int, used: int) -> bool:
        """Whether a run of ``priority`` may take a slot when ``used`` are taken."""
        if used >= self.concurrency:
            return False
        return priority >= self.reserve_min_priority or used < self.concurrency - self.reserve

    def may_start(self, lane: Lane, priority: int) -> bool:
        """Whether ``lane``'s core may start a run of ``priority`` now."""
        used = self.used()
        if not self.admits(priority, used):
            if used < self.concurrency:
                self.counts["reserve_waits"] += 1
            return False
        every = self._normal_every
        if lane is Lane.NORMAL:
            # The high lane first, unless it has had its K starts in a row.
            return (
                not self._high_first
                or self._wanting[Lane.HIGH] is None
                or (every is not None and self._high_streak >= every)
            )
        normal = self._wanting[Lane.NORMAL]
        if (
            every is not None
            and normal is not None
            and self._high_streak >= every
            and (self.admits(normal, used) or self._high_holds_normal_out(normal))
        ):
            self.counts["normal_turns"] += 1
            return False  # the normal lane's turn: the starvation bound
        return True

    def _high_holds_normal_out(self, normal: int) -> bool:
        """Whether the normal lane's waiting run is kept out by the high lane's jobs in
        the slots the reserve leaves to it (not by its own: the normal lane below its
        share). Then the normal lane's turn holds the next high start back until a
        slot frees, or with ``--reserve`` a busy high lane would keep the normal lane
        out for ever; a normal lane that fills its share itself holds nothing back."""
        if normal >= self.reserve_min_priority:
            return False  # the reserve does not refuse it: only a full pool does
        running = self._running.get(Lane.NORMAL)
        return running is not None and running() < self.concurrency - self.reserve

    def started(self, lane: Lane) -> None:
        if lane is Lane.NORMAL:
            self.counts["normal_starts"] += 1
            self._high_streak = 0
            return
        self.counts["high_starts"] += 1
        if self._wanting[Lane.NORMAL] is not None:
            self._high_streak += 1

    def filled(self, lane: Lane, refused: int | None) -> None:
        """``lane``'s core ended a fill; ``refused`` is the priority of the run the pool
        refused it (None: it started all it could). Wakes the other lane if it waits
        while a slot is free (or was refused for its sake)."""
        self._wanting[lane] = refused
        other = Lane.HIGH if lane is Lane.NORMAL else Lane.NORMAL
        if other not in self._running:
            return
        waiting = self._wanting[other]
        if waiting is not None and self.admits(waiting, self.used()):
            self.wake(other)

    def wake(self, lane: Lane) -> None:
        if lane in self._woken:
            return
        self._woken.add(lane)
        callback = self._wakers.get(lane)
        if callback is not None:
            callback()

    def take_wake(self, lane: Lane) -> bool:
        """Whether ``lane`` was woken since it last asked (its core fills then)."""
        if lane in self._woken:
            self._woken.discard(lane)
            return True
        return False

    def wanting(self, lane: Lane) -> int | None:
        """The priority of the run ``lane``'s last fill could not start (a view)."""
        return self._wanting[lane]


def parse_reserve(text: str) -> tuple[int, int]:
    """``--reserve N[:P]`` as (N, P); P defaults to the high lane's `LANE_MIN_PRIORITY`.
    ValueError saying what is wrong."""
    count, colon, floor = text.partition(":")
    try:
        n = int(count)
        p = LANE_MIN_PRIORITY if not colon else int(floor)
    except ValueError:
        raise ValueError(
            f"--reserve {text!r}: expected N or N:P (N slots kept for runs of priority P or"
            f" more; P {MIN_PRIORITY + 1}-{MAX_PRIORITY}, default {LANE_MIN_PRIORITY})"
        ) from None
    if n < 0:
        raise ValueError(f"--reserve {text!r}: N must be at least 0")
    if not MIN_PRIORITY < p <= MAX_PRIORITY:
        raise ValueError(
            f"--reserve {text!r}: P must be between {MIN_PRIORITY + 1} and {MAX_PRIORITY}"
        )
    return n, p
