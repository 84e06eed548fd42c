"""The named calendars the recorder kept, read for an audit (docs/DESIGN.md §9.1).

Every record of ``{ns}.calendars`` is a row of ``calendar_versions`` (the recorder's
`actors.audit.calendars.calendar_row`): `history` gives each calendar's versions for
`actors.audit.calendars.split_by_calendars`, `days` the days of one record, parsed
once. A database of a recorder older than the table has no calendars (an audit then
names every calendar a schedule excludes as unknown).
"""

from __future__ import annotations

import sqlite3

import orjson

from actors.audit.calendars import CalendarRow, History, monotone
from actors.history.store import HistoryError
from topics.calendar_days import CalendarDays, parse_calendar_days


class RecordedCalendars:
    """``calendar_versions`` of an audit's (read-only) database connection."""

    def __init__(self, db: sqlite3.Connection, has_table: bool) -> None:
        self._db = db
        self._has_table = has_table
        self._history: History | None = None  # read at the first schedule naming one
        self._days: dict[int, CalendarDays] = {}  # by the record's offset

    def history(self) -> History:
        """Every calendar's versions (`actors.audit.calendars.monotone`), read once."""
        if self._history is None:
            rows: list[CalendarRow] = []
            if self._has_table:
                rows = [
                    CalendarRow(str(n), int(o), int(e), c)
                    for n, o, e, c in self._db.execute(
                        "SELECT name, offset, effective_ms, calendar FROM calendar_versions"
                    )
                ]
            self._history = monotone(rows)
        return self._history

    def days(self, offset: int) -> CalendarDays:
        """The days of the calendar record at ``offset`` (an upsert's)."""
        days = self._days.get(offset)
        if days is None:
            row = self._db.execute(
                "SELECT name, calendar FROM calendar_versions WHERE offset = ? "
                "AND calendar IS NOT NULL",
                (offset,),
            ).fetchone()
            if row is None:
                raise HistoryError(f"calendar record at offset {offset} is not recorded")
            days = self._days[offset] = parse_calendar_days(
                orjson.loads(row[1]), f"calendar {row[0]!r}"
            )
        return days
