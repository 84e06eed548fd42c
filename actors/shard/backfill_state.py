"""A schedule's backfill as its changelog record holds it (docs/DESIGN.md §6.9).

One backfill per schedule at a time: its id, the ranges left to fire (the head
range's first instant is the cursor), the most runs it may have in flight and the
run ids it has in flight now, what it did so far, and how it ended. Every field
round-trips through the schedule's changelog record (``"backfill"``), written in the
same batch as each fire it causes, so a new owner goes on from exactly where the
last write left it: no instant fired twice, none skipped.

JSON (inside the schedule's record)::

    "backfill": {"id": "fix-2026-10", "max_parallel": 4,
                 "started": "2026-10-10T09:00:00.000Z",
                 "span": ["2026-10-01T00:00:00.000Z", "2026-10-03T00:00:00.000Z"],
                 "ranges": [["2026-10-01T00:00:00.000Z", "2026-10-03T00:00:00.000Z", 1]],
                 "running": ["nightly@2026-09-30T00:00:00.000Z"],
                 "fired": 12, "passed": 1,
                 "ended": "2026-10-10T10:00:00.000Z", "cancelled": "why"}

``ranges`` and ``running`` are left out when empty, ``passed``/``ended``/``cancelled``
when unset. A finished backfill (nothing left, nothing running) is kept, small, until
the next one replaces it, so ``kafkron backfill status`` can say it ended.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from topics.timefmt import format_ms, parse_instant

Range = list[int]
"""``[first_ms, last_ms, attempt]``: occurrences from first to last (both included)
to fire at that attempt; ``first_ms`` moves on as they fire."""


class BackfillState:
    __slots__ = (
        "backfill_id",
        "cancelled",
        "ended_ms",
        "fired",
        "first_ms",
        "last_ms",
        "max_parallel",
        "passed",
        "ranges",
        "running",
        "started_ms",
    )

    def __init__(self, backfill_id: str, max_parallel: int, started_ms: int) -> None:
        self.backfill_id = backfill_id
        self.max_parallel = max_parallel
        self.started_ms = started_ms  # when its first command was applied
        self.first_ms: int | None = None  # its span: the first and last occurrence planned
        self.last_ms: int | None = None
        self.ranges: list[Range] = []
        self.running: list[str] = []  # run ids of this backfill in flight
        self.fired = 0  # attempts it started
        self.passed = 0  # instants it let pass (in flight live, handled since, not an occurrence)
        self.ended_ms: int | None = None
        self.cancelled: str | None = None

    @property
    def active(self) -> bool:
        return self.ended_ms is None

    def left(self) -> bool:
        return bool(self.ranges)

    def holds(self, at_ms: int) -> bool:
        """Whether ``at_ms`` lies inside a range left to fire (the cursor included)."""
        ranges = self.ranges
        index = bisect_right(ranges, at_ms, key=lambda r: r[0]) - 1
        return index >= 0 and at_ms <= ranges[index][1]

    def json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "id": self.backfill_id,
            "max_parallel": self.max_parallel,
            "started": format_ms(self.started_ms),
        }
        if self.first_ms is not None and self.last_ms is not None:
            doc["span"] = [format_ms(self.first_ms), format_ms(self.last_ms)]
        if self.ranges:
            doc["ranges"] = [[format_ms(a), format_ms(b), n] for a, b, n in self.ranges]
        if self.running:
            doc["running"] = list(self.running)
        doc["fired"] = self.fired
        if self.passed:
            doc["passed"] = self.passed
        if self.ended_ms is not None:
            doc["ended"] = format_ms(self.ended_ms)
        if self.cancelled is not None:
            doc["cancelled"] = self.cancelled
        return doc

    @classmethod
    def of(cls, doc: dict[str, Any]) -> BackfillState:
        state = cls(doc["id"], doc["max_parallel"], parse_instant(doc["started"]))
        span = doc.get("span")
        if span is not None:
            state.first_ms, state.last_ms = parse_instant(span[0]), parse_instant(span[1])
        state.ranges = [
            [parse_instant(a), parse_instant(b), int(n)] for a, b, n in doc.get("ranges", ())
        ]
        state.running = list(doc.get("running", ()))
        state.fired = doc.get("fired", 0)
        state.passed = doc.get("passed", 0)
        ended = doc.get("ended")
        state.ended_ms = None if ended is None else parse_instant(ended)
        state.cancelled = doc.get("cancelled")
        return state
