"""The story of a run: who owned which shard, what fired when, what was fenced.

Every node and the fault injector append `Event`\\ s in true (broker) time. The
rendering is for a person: ownership changes, faults, fencing, rebuilds, retries,
missed and dead runs are always printed one per line; fires and results are
printed one per line while there are few, and folded into one line per node and
second when a run fires thousands of them (a midnight of 20,000 jobs would
otherwise drown the failover in it).

Rendering is deterministic (no wall clock, no set order), so the same seed gives
the same text and JSON byte for byte.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from topics.timefmt import format_ms

# Kinds that are folded when there are many of them.
BULK_KINDS = frozenset(("fire", "result"))
BULK_DETAIL_MAX = 400


@dataclass(frozen=True, slots=True)
class Event:
    true_ms: int
    who: str  # a node name, "broker", "faults", "client"
    kind: str  # fault, heal, own, drop, fence, build, fire, retry, missed, skipped, dead, ...
    text: str

    def as_json(self) -> dict[str, Any]:
        at = format_ms(self.true_ms)
        return {"at": at, "who": self.who, "kind": self.kind, "text": self.text}


class Timeline:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, true_ms: int, who: str, kind: str, text: str) -> None:
        self.events.append(Event(true_ms, who, kind, text))

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(e.kind for e in self.events).items()))

    def render(self) -> list[str]:
        bulk = sum(1 for e in self.events if e.kind in BULK_KINDS)
        fold = bulk > BULK_DETAIL_MAX
        lines: list[str] = []
        folded: dict[tuple[str, str], int] = {}
        folded_second = -1
        for event in self.events:
            if fold and event.kind in BULK_KINDS:
                second = event.true_ms // 1000
                if second != folded_second:
                    lines.extend(_folded_lines(folded, folded_second))
                    folded = {}
                    folded_second = second
                folded[(event.who, event.kind)] = folded.get((event.who, event.kind), 0) + 1
                continue
            lines.append(f"{_clock(event.true_ms)}  {event.who:<10} {event.kind:<8} {event.text}")
        lines.extend(_folded_lines(folded, folded_second))
        return lines


def _folded_lines(folded: dict[tuple[str, str], int], second: int) -> list[str]:
    verbs = {"fire": "fired {} runs", "result": "committed {} results"}
    # Stamped with the second alone ("...:00.---"): the folded events happened
    # anywhere within it, so the line comes after the second's other events.
    stamp = _clock(second * 1000)[:-3] + "---"
    return [
        f"{stamp}  {who:<10} {kind:<8} " + verbs[kind].format(f"{count:,}")
        for (who, kind), count in sorted(folded.items())
    ]


def _clock(true_ms: int) -> str:
    """``2026-03-05 00:00:00.012``: readable, with the milliseconds that matter."""
    text = format_ms(true_ms)
    return text[:10] + " " + text[11:23]
