"""Per-shard figures kept in process: what `kafkron scheduler` logs periodically.

Rates are measured over a sliding window of whole seconds so a reader sees the
recent rate, not the average since start.
"""

from __future__ import annotations

from collections import deque


class RateWindow:
    """Events per second over the last ``window_s`` seconds (monotonic time, seconds)."""

    def __init__(self, window_s: int = 10) -> None:
        self._window_s = window_s
        self._buckets: deque[list[int]] = deque()  # [second, count]
        self.total = 0

    def add(self, now_s: float, count: int = 1) -> None:
        second = int(now_s)
        if self._buckets and self._buckets[-1][0] == second:
            self._buckets[-1][1] += count
        else:
            self._buckets.append([second, count])
        self.total += count
        self._trim(second)

    def per_s(self, now_s: float) -> float:
        second = int(now_s)
        self._trim(second)
        return sum(c for _, c in self._buckets) / self._window_s

    def _trim(self, second: int) -> None:
        while self._buckets and self._buckets[0][0] <= second - self._window_s:
            self._buckets.popleft()
