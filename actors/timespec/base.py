"""What every compiled spec shares: start/end bounds and the spread offset."""

from __future__ import annotations

from abc import ABC, abstractmethod


class BoundedSpec(ABC):
    """Fires are ``nominal + offset_ms``, kept only inside ``[start_ms, end_ms]``.

    Subclasses produce nominal fires; this class applies the spread offset (a fire
    is never earlier than its nominal time) and the inclusive bounds, which apply
    to the shifted fires: those are the run's scheduled times.
    """

    __slots__ = ("end_ms", "offset_ms", "start_ms")

    kind: str

    def __init__(self, offset_ms: int, start_ms: int | None, end_ms: int | None):
        self.offset_ms = offset_ms
        self.start_ms = start_ms
        self.end_ms = end_ms

    def next_after(self, after_ms: int) -> int | None:
        """The first fire (epoch ms UTC) strictly after ``after_ms``; None when exhausted."""
        nominal_after_ms = after_ms - self.offset_ms
        if self.start_ms is not None and after_ms < self.start_ms:
            nominal_after_ms = self.start_ms - 1 - self.offset_ms
        nominal_ms = self._next_nominal_ms(nominal_after_ms)
        if nominal_ms is None:
            return None
        fire_ms = nominal_ms + self.offset_ms
        if self.end_ms is not None and fire_ms > self.end_ms:
            return None
        return fire_ms

    @abstractmethod
    def _next_nominal_ms(self, after_ms: int) -> int | None:
        """The first nominal fire strictly after ``after_ms``."""
