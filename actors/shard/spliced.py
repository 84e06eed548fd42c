"""A spec bound to two versions of the calendars it names (docs/DESIGN.md §5.7).

An edit heard late leaves a backlog due before its commit (a ``next`` kept before
``written``): the live schedule walks it by the days in effect at each of its
instants, the previous version's before the commit, the current one's from it on.
Only the live walk of that backlog: a backfill judges every instant by the current
book (`current_spec`), as a new owner, whose binding has no splice, does; and once the
live ``next`` is past the commit the schedule is bound without the splice again
(`ShardCalendars.walked`), so a live and a restored owner agree.
"""

from __future__ import annotations

from actors.timespec import CompiledSpec


class Spliced:
    """The previous version's fires before ``split_ms`` (an edit's commit), the
    current one's (`current`) from it on."""

    __slots__ = ("_before", "current", "kind", "split_ms")

    def __init__(self, before: CompiledSpec, after: CompiledSpec, split_ms: int) -> None:
        self._before = before
        self.current = after
        self.split_ms = split_ms
        self.kind = after.kind

    def next_after(self, after_ms: int) -> int | None:
        split_ms = self.split_ms
        if after_ms < split_ms - 1:
            found = self._before.next_after(after_ms)
            if found is not None and found < split_ms:
                return found
            after_ms = split_ms - 1
        return self.current.next_after(after_ms)


def current_spec(compiled: CompiledSpec) -> CompiledSpec:
    """The spec by the current book: a spliced one's after-part, else ``compiled``."""
    if isinstance(compiled, Spliced):
        return compiled.current
    return compiled
