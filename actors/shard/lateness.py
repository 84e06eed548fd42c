"""Firing lateness of one shard: the recent window and a cumulative histogram.

The shard core collects ``now_ms - scheduled_ms`` for every occurrence it fires
and hands a batch's values over at the batch's end (`LatenessWindow.extend_all`).
Two readers want it differently:

- the figures log line wants percentiles of the *recent* fires: the last
  ``window`` values, kept as a bounded deque;
- a metrics scrape wants a *cumulative* histogram (Prometheus buckets only ever
  grow): a count per upper bound, the number of fires and their sum.

`LatenessWindow` is that deque with the histogram kept beside it on every
append, and nothing here imports a metrics library: the core stays pure, and the
scheduler's metrics collector reads ``bucket_counts()`` at scrape time.

Cost per fire: a list append in the core; per batch, one ``bisect`` over
`BUCKET_BOUNDS_MS` per distinct value (a herd's fires of one tick are late by a
few distinct milliseconds) and C-level bulk updates.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, deque

# Upper bounds (inclusive, ms) of the histogram's buckets, as Prometheus' ``le``.
# Dense below a second (a healthy shard), sparse up to five minutes (a failover,
# a restore, a grace period); everything later lands in +Inf.
BUCKET_BOUNDS_MS: tuple[int, ...] = (
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    30_000,
    60_000,
    300_000,
)


class LatenessWindow(deque[int]):
    """The last ``maxlen`` lateness values, plus a cumulative histogram of all of them."""

    def __init__(self, maxlen: int) -> None:
        super().__init__(maxlen=maxlen)
        # One slot per bound plus the +Inf slot; counts are per bucket, not cumulative.
        self._per_bucket = [0] * (len(BUCKET_BOUNDS_MS) + 1)
        self.fires = 0
        self.sum_ms = 0

    def append(self, late_ms: int) -> None:
        super().append(late_ms)
        self._per_bucket[bisect_left(BUCKET_BOUNDS_MS, late_ms)] += 1
        self.fires += 1
        self.sum_ms += late_ms

    def extend_all(self, values: list[int]) -> None:
        """`append` of each of ``values`` in turn, in bulk: the shard hands over a
        batch's values at its end, and a herd's are a few distinct ones repeated."""
        super().extend(values)  # deque's own: it does not call `append` above
        per_bucket = self._per_bucket
        for late_ms, count in Counter(values).items():
            per_bucket[bisect_left(BUCKET_BOUNDS_MS, late_ms)] += count
        self.fires += len(values)
        self.sum_ms += sum(values)

    def bucket_counts(self) -> list[tuple[int | None, int]]:
        """``(upper_bound_ms, cumulative_count)`` per bucket; ``None`` is +Inf."""
        cumulative: list[tuple[int | None, int]] = []
        running = 0
        bounds: tuple[int | None, ...] = (*BUCKET_BOUNDS_MS, None)
        for bound, n in zip(bounds, self._per_bucket, strict=True):
            running += n
            cumulative.append((bound, running))
        return cumulative
