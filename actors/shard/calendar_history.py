"""The latest versions of each named calendar, each with the instant it holds from
(docs/DESIGN.md §5.7, "The backlog of an edit heard late").

A backlog an edit heard late left (a kept ``next`` older than the edit's commit) is
walked by the days in effect at each of its instants; it may span several edits (two
while paused, or heard late together), so the shard keeps the latest `HISTORY_MAX`
versions per calendar, never anything per schedule, and cuts such a backlog into
stretches, one per edit (`stretches`), each bound to the versions then (`Spliced`).
"""

from __future__ import annotations

from topics.calendar_days import CalendarDays

# Versions kept per calendar: a backlog spanning more edits than this (all heard
# late, or while paused) walks its oldest part by the oldest version kept.
HISTORY_MAX = 16

# One stretch of a backlog: where it ends (an edit's commit), and each named
# calendar's version and days in effect before that.
Stretch = tuple[int, tuple[int, ...], dict[str, CalendarDays]]


class CalendarHistory:
    """Per calendar, its latest versions, oldest first: (version, from when it holds
    (its record's commit, else when heard), its days; None: deleted)."""

    def __init__(self) -> None:
        self._by_name: dict[str, list[tuple[int, int, CalendarDays | None]]] = {}

    def record(self, name: str, version: int, since_ms: int, days: CalendarDays | None) -> None:
        history = self._by_name.setdefault(name, [])
        history.append((version, since_ms, days))
        if len(history) > HISTORY_MAX:
            del history[0]

    def stretches(self, names: tuple[str, ...], kept_ms: int) -> list[Stretch]:
        """The backlog from ``kept_ms`` cut at every edit of ``names`` after it (the
        latest edit on is the current book's, not listed): each stretch holds from
        the previous cut (the first: from before ``kept_ms``). A stretch where one is
        unknown (deleted or absent then, or older than the history) is dropped with
        all before it: they go by the stretch after it. Empty: nothing to splice."""
        by_name = self._by_name
        cuts = sorted(
            {since for n in names for _, since, _ in by_name.get(n, ()) if since > kept_ms}
        )
        parts: list[Stretch] = []
        for i, end_ms in enumerate(cuts):
            at_ms = kept_ms if i == 0 else cuts[i - 1]
            versions: list[int] = []
            days: dict[str, CalendarDays] = {}
            for n in names:
                found = self._in_effect(n, at_ms)
                if found is None:
                    break
                versions.append(found[0])
                days[n] = found[1]
            else:
                parts.append((end_ms, tuple(versions), days))
                continue
            parts.clear()  # unknown then: what came before goes by the next stretch
        return parts

    def _in_effect(self, name: str, at_ms: int) -> tuple[int, CalendarDays] | None:
        found = None
        for version, since, days in self._by_name.get(name, ()):
            if since > at_ms:
                break
            found = (version, days)
        if found is None or found[1] is None:
            return None
        return found[0], found[1]
