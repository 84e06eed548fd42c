"""Who served which shard when: the intervals the report and the plot draw.

A scheduler node reports the shards it serves (live in its lifecycle machine)
after each of its turns and when it dies or freezes; `Ownership` turns those
reports into intervals per shard. A gap between two intervals of a shard is a
takeover: from the moment the old owner stopped serving (it was killed, frozen,
or the rebalance revoked the shard) to the moment the next one was live on it
(fenced, restored, positioned). These are the takeover times of the report.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Interval:
    shard: int
    node: str
    start_ms: int
    end_ms: int | None = None  # None: still serving at the end of the run


class Ownership:
    def __init__(self) -> None:
        self.intervals: list[Interval] = []
        self._open: dict[str, dict[int, Interval]] = {}  # node -> shard -> open interval

    def serving(self, node: str, shards: set[int], true_ms: int) -> None:
        """``node`` serves exactly ``shards`` from ``true_ms`` on."""
        held = self._open.setdefault(node, {})
        for p in [p for p in held if p not in shards]:
            held.pop(p).end_ms = true_ms
        for p in sorted(shards - held.keys()):
            interval = Interval(p, node, true_ms)
            held[p] = interval
            self.intervals.append(interval)

    def takeovers(self, start_ms: int, end_ms: int) -> list[tuple[int, int, int]]:
        """(shard, unserved from, served again at) for each gap beginning in [start, end).

        Only gaps after a shard was first served count (the start-up is no takeover).
        """
        by_shard: dict[int, list[Interval]] = {}
        for interval in self.intervals:
            by_shard.setdefault(interval.shard, []).append(interval)
        gaps = []
        for p, intervals in sorted(by_shard.items()):
            intervals.sort(key=lambda i: i.start_ms)
            covered_until = intervals[0].end_ms
            for interval in intervals[1:]:
                if covered_until is None:
                    break  # served to the end by an earlier interval
                if interval.start_ms > covered_until and start_ms <= covered_until < end_ms:
                    gaps.append((p, covered_until, interval.start_ms))
                if interval.end_ms is None:
                    covered_until = None
                else:
                    covered_until = max(covered_until, interval.end_ms)
        return gaps
