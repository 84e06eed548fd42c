"""Virtual time: one true clock for the world, a skewed view of it per node.

The world's time (``true_ms``) is what the broker stamps and what the checkers
judge by. Each node reads its own `NodeClock`, which implements the runtime's
`actors.scheduler.clock.Clock` protocol (``now_ms() -> int``), so the scheduler
loop in `simulation.node` reads time exactly as the real one does. A node's clock
is the true time plus an offset that may be constant, drift (parts per million of
elapsed time) or be stepped by a fault (an NTP jump, a VM resumed with a stale
clock) for a while.
"""

from __future__ import annotations

from actors.scheduler.clock import Clock


class WorldTime:
    """The simulation's one true clock; only the world advances it."""

    __slots__ = ("true_ms",)

    def __init__(self, start_ms: int) -> None:
        self.true_ms = start_ms


class NodeClock:
    """A node's wall clock: true time + constant offset + drift + active steps."""

    __slots__ = ("_drift_ppm", "_epoch_ms", "_offset_ms", "_step_ms", "_world")

    def __init__(self, world: WorldTime, *, offset_ms: int = 0, drift_ppm: float = 0.0) -> None:
        self._world = world
        self._offset_ms = offset_ms
        self._drift_ppm = drift_ppm
        self._epoch_ms = world.true_ms
        self._step_ms = 0

    def now_ms(self) -> int:
        return self.local_ms(self._world.true_ms)

    def local_ms(self, true_ms: int) -> int:
        """What this clock reads at the true instant ``true_ms``."""
        drift_ms = int((true_ms - self._epoch_ms) * self._drift_ppm / 1_000_000)
        return true_ms + self._offset_ms + drift_ms + self._step_ms

    def mono_ms(self) -> int:
        """The node's monotonic clock: its oscillator (drift included), never stepped."""
        true_ms = self._world.true_ms
        return true_ms + int((true_ms - self._epoch_ms) * self._drift_ppm / 1_000_000)

    def true_ms_at(self, local_ms: int) -> int:
        """The true instant at which this clock reads ``local_ms`` (at the latest).

        Exact for constant offsets and steps; for drift it errs late by at most a
        millisecond, so a node woken at the returned instant never finds itself early.
        """
        guess = local_ms - (self.local_ms(self._world.true_ms) - self._world.true_ms)
        while self.local_ms(guess) < local_ms:
            guess += 1
        return guess

    def step(self, delta_ms: int) -> None:
        """Jump the clock by ``delta_ms`` (a skew fault starts, or ends with -delta)."""
        self._step_ms += delta_ms

    @property
    def skew_ms(self) -> int:
        """How far this clock runs ahead of true time right now (negative: behind)."""
        return self.now_ms() - self._world.true_ms


def _is_clock(clock: Clock) -> Clock:  # mypy proves NodeClock satisfies the protocol
    return clock


_is_clock(NodeClock(WorldTime(0)))
