"""A spec bound to two versions of the calendars it names (docs/DESIGN.md §5.7).

An edit heard late leaves a backlog due before its commit (a ``next`` kept before
``written``): the live schedule walks it by the days in effect at each of its
instants: each stretch between two edits by the version then, the current one's
from the latest edit's commit on.
Only the live walk of that backlog: a backfill judges every instant by the current
book (`current_spec`), as a new owner, whose binding has no splice, does; and once the
live ``next`` is past the commit the schedule is bound without the splice again
(`ShardCalendars.walked`), so a live and a restored owner agree.
"""

from __future__ import annotations

from actors.timespec import CompiledSpec


class Spliced:
    """``parts``: (end, spec) in order, each spec firing before its end and from the
    previous part's end (the first: from before the backlog); `current` from the last
    end (``split_ms``, the latest edit's commit) on."""

    __slots__ = ("_parts", "current", "kind", "split_ms")

    def __init__(self, parts: list[tuple[int, CompiledSpec]], current: CompiledSpec) -> None:
        self._parts = tuple(parts)
        self.current = current
        self.split_ms = parts[-1][0]
        self.kind = current.kind

    def next_after(self, after_ms: int) -> int | None:
        for end_ms, spec in self._parts:
            if after_ms < end_ms - 1:
                found = spec.next_after(after_ms)
                if found is not None and found < end_ms:
                    return found
                after_ms = end_ms - 1
        return self.current.next_after(after_ms)


def current_spec(compiled: CompiledSpec) -> CompiledSpec:
    """The spec by the current book: a spliced one's after-part, else ``compiled``."""
    if isinstance(compiled, Spliced):
        return compiled.current
    return compiled
