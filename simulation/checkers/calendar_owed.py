"""The instants a calendar-naming schedule owes, each by the calendars in effect at it.

A schedule whose spec names calendars (``"exclude": ["hol"]``) owes each instant its
spec allows under the version of each calendar *in effect at that instant*: an edit
takes effect at its record's timestamp (the shard re-arms from it, docs/DESIGN.md
§5.7), exactly as the history's audit judges it (§9.1). The simulation knows every
record of ``{ns}.calendars`` and when it was appended (`Evidence.calendars`), so it
is stricter than the audit: while a named calendar is unknown (not created yet, or
deleted) the schedule waits, and when it comes the shard re-arms it from what it had
handled (an upsert keeps its floor as handled), so what came due meanwhile is owed
by the version that ended the wait (fired or reported through the misfire policy).
Only a calendar that never comes back owes nothing: waiting for it is the rule.

`nothing_missed` walks these instants (`CalendarTimeline.owed`); `audit_view` hands
the same records to the history's own `split_by_calendars` (`audit_history`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence

import orjson

from actors.audit.calendars import CalendarRow, CalendarVersion, History, monotone
from actors.timespec import CompiledSpec
from topics.calendar_commands import decode_calendar_value
from topics.calendar_days import CalendarDays

Records = Sequence[tuple[int, str, bytes | None]]
"""``{ns}.calendars`` as committed: (append ms, name, value; None: deleted), in order."""

Compile = Callable[[Mapping[str, CalendarDays]], CompiledSpec]
"""A spec compiled with the given calendars' days."""


def audit_history(records: Records) -> tuple[History, dict[int, CalendarDays]]:
    """The records as the history's recorder keeps them (the offset is the record's
    place in the topic) and each upsert's days by that offset."""
    rows = []
    days: dict[int, CalendarDays] = {}
    for offset, (append_ms, name, value) in enumerate(records):
        calendar_json = None
        if value is not None:
            days[offset] = decode_calendar_value(value, name)
            calendar_json = orjson.dumps(orjson.loads(value)["calendar"]).decode()
        rows.append(CalendarRow(name, offset, append_ms, calendar_json))
    return monotone(rows), days


class CalendarTimeline:
    """Every calendar's versions over time (see the module docstring)."""

    def __init__(self, records: Records) -> None:
        self._history, self._days = audit_history(records)

    def _judge_by(self, name: str, at_ms: int) -> int | None:
        """The offset of the version an instant at ``at_ms`` is owed by: the one in
        effect then, else (unknown then) the one that ended the wait; None: the
        calendar never came (back), the schedule rightly waits."""
        in_effect: CalendarVersion | None = None
        versions = self._history.get(name, ())
        for v in versions:
            if v.effective_ms > at_ms:
                break
            in_effect = v
        if in_effect is not None and in_effect.known:
            return in_effect.offset
        return next(
            (v.offset for v in versions if v.effective_ms > at_ms and v.known),
            None,
        )

    def owed(
        self, names: Sequence[str], compile_: Compile, from_ms: int, until_ms: int
    ) -> Iterator[int]:
        """The instants in ``[from_ms, until_ms]`` owed, ascending."""
        cuts = sorted(
            {
                v.effective_ms
                for name in names
                for v in self._history.get(name, ())
                if from_ms < v.effective_ms <= until_ms
            }
        )
        bounds = [from_ms, *cuts, until_ms + 1]
        compiled: dict[tuple[int, ...], CompiledSpec] = {}
        for start_ms, stop_ms in itertools.pairwise(bounds):
            offsets = [self._judge_by(name, start_ms) for name in names]
            if any(o is None for o in offsets):
                continue
            key = tuple(o for o in offsets if o is not None)
            spec = compiled.get(key)
            if spec is None:
                calendars = {n: self._days[o] for n, o in zip(names, key, strict=True)}
                spec = compiled[key] = compile_(calendars)
            at = spec.next_after(start_ms - 1)
            while at is not None and at < stop_ms:
                yield at
                at = spec.next_after(at)

    def days(self, offset: int) -> CalendarDays:
        return self._days[offset]

    @property
    def history(self) -> History:
        return self._history
