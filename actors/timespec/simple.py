"""The two specs without a calendar: ``every`` (a fixed period) and ``at`` (once)."""

from __future__ import annotations

from actors.timespec.base import BoundedSpec


class EverySpec(BoundedSpec):
    """Fires at ``anchor + k * period`` for k = 0, 1, 2, ...

    The anchor is the phase of the schedule, not the time it was created: without
    an anchor the phase is the Unix epoch, so ``every 90s`` fires at the same
    instants whichever process computes it and however often the scheduler restarts
    (a restart never shifts it). An explicit anchor is the first fire.
    """

    __slots__ = ("anchor_ms", "period_ms")

    kind = "every"

    def __init__(
        self,
        period_s: int,
        anchor_ms: int,
        offset_ms: int = 0,
        start_ms: int | None = None,
        end_ms: int | None = None,
    ):
        super().__init__(offset_ms, start_ms, end_ms)
        self.period_ms = period_s * 1000
        self.anchor_ms = anchor_ms

    def _next_nominal_ms(self, after_ms: int) -> int | None:
        if after_ms < self.anchor_ms:
            return self.anchor_ms
        return self.anchor_ms + ((after_ms - self.anchor_ms) // self.period_ms + 1) * self.period_ms

    def next_after(self, after_ms: int) -> int | None:
        # `BoundedSpec.next_after` with `_next_nominal_ms` inline: a herd of ``every``
        # schedules calls it once per fire, and one call is a good part of its cost.
        offset_ms = self.offset_ms
        start_ms = self.start_ms
        nominal_after_ms = after_ms - offset_ms
        if start_ms is not None and after_ms < start_ms:
            nominal_after_ms = start_ms - 1 - offset_ms
        anchor_ms = self.anchor_ms
        if nominal_after_ms < anchor_ms:
            fire_ms = anchor_ms + offset_ms
        else:
            period_ms = self.period_ms
            periods = (nominal_after_ms - anchor_ms) // period_ms + 1
            fire_ms = anchor_ms + periods * period_ms + offset_ms
        end_ms = self.end_ms
        if end_ms is not None and fire_ms > end_ms:
            return None
        return fire_ms


class AtSpec(BoundedSpec):
    """Fires once, at ``at_ms`` (plus the spread offset, if any)."""

    __slots__ = ("at_ms",)

    kind = "at"

    def __init__(
        self,
        at_ms: int,
        offset_ms: int = 0,
        start_ms: int | None = None,
        end_ms: int | None = None,
    ):
        super().__init__(offset_ms, start_ms, end_ms)
        self.at_ms = at_ms

    def _next_nominal_ms(self, after_ms: int) -> int | None:
        return self.at_ms if self.at_ms > after_ms else None
