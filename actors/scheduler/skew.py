"""How far the local clock runs ahead of the broker's, from our own writes.

A shard writes `{ns}.runs` with ``message.timestamp.type=LogAppendTime``, so the
broker stamps every batch with *its* clock when it appends it, and the produce
response carries that stamp. For one batch sent at local time ``sent_ms`` and
acknowledged at local time ``acked_ms`` the broker's stamp ``broker_ms`` was taken
somewhere in between (in true time). If the local clock reads ``true + a`` then::

    sent_ms - broker_ms  <=  a  <=  acked_ms - broker_ms

so every sample proves a lower bound on how far ahead we run (``sent - broker``) and
an upper bound (``acked - broker``). The estimator keeps the tightest lower bound of
a sliding window (`ahead_ms`) — a proof, not a guess — and the midpoint of the
sample with the shortest round trip as the point estimate (`skew_ms`).

Never early is a guarantee of kafkron (docs/DESIGN.md §3.4, §5.5), so a clock proven to run
ahead by more than ``bound_ms`` is held back: the shard's notion of now becomes
``local - (ahead - bound)``. Small skew (within the bound) is tolerated because the
round trip of a produce request already blurs the measurement by that much.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

DEFAULT_BOUND_MS = 1_000
DEFAULT_WINDOW = 64


@dataclass(frozen=True, slots=True)
class SkewSample:
    sent_ms: int
    acked_ms: int
    broker_ms: int

    @property
    def ahead_at_least_ms(self) -> int:
        return self.sent_ms - self.broker_ms

    @property
    def round_trip_ms(self) -> int:
        return self.acked_ms - self.sent_ms


class SkewEstimator:
    """Sliding-window estimate of local-minus-broker clock offset. Pure: no clock reads."""

    def __init__(self, *, bound_ms: int = DEFAULT_BOUND_MS, window: int = DEFAULT_WINDOW) -> None:
        if bound_ms < 0:
            raise ValueError(f"bound_ms must be >= 0, got {bound_ms}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.bound_ms = bound_ms
        self._samples: deque[SkewSample] = deque(maxlen=window)
        self.samples_seen = 0

    def observe(self, *, sent_ms: int, acked_ms: int, broker_ms: int) -> None:
        """Record one produce round trip. Stamps that cannot be log-append times are ignored.

        A negative ``broker_ms`` is what Kafka returns for a CreateTime topic, and an
        acknowledgement before the send means the local clock stepped: neither says
        anything about the broker's clock.
        """
        if broker_ms < 0 or acked_ms < sent_ms:
            return
        self._samples.append(SkewSample(sent_ms, acked_ms, broker_ms))
        self.samples_seen += 1

    @property
    def ahead_ms(self) -> int | None:
        """Proven lower bound of how far the local clock runs ahead (negative: behind)."""
        if not self._samples:
            return None
        return max(s.ahead_at_least_ms for s in self._samples)

    @property
    def skew_ms(self) -> int | None:
        """Point estimate of local minus broker, from the tightest round trip."""
        if not self._samples:
            return None
        best = min(self._samples, key=lambda s: s.round_trip_ms)
        return (best.sent_ms + best.acked_ms) // 2 - best.broker_ms

    @property
    def uncertainty_ms(self) -> int | None:
        """Half the shortest round trip: how far `skew_ms` may be off."""
        if not self._samples:
            return None
        return min(s.round_trip_ms for s in self._samples) // 2

    def holdback_ms(self) -> int:
        """How much to subtract from the local clock so that no schedule fires early."""
        ahead = self.ahead_ms
        if ahead is None:
            return 0
        return max(0, ahead - self.bound_ms)

    def adjusted_now_ms(self, local_ms: int) -> int:
        """The instant a shard may treat as now: the local clock minus the holdback."""
        return local_ms - self.holdback_ms()

    def figures(self) -> dict[str, int | None]:
        return {
            "skew_ms": self.skew_ms,
            "skew_uncertainty_ms": self.uncertainty_ms,
            "ahead_at_least_ms": self.ahead_ms,
            "holdback_ms": self.holdback_ms(),
            "skew_samples": self.samples_seen,
        }
