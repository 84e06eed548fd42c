"""Compiled cron tables: the next matching *wall time* by jumps, never by scanning.

A table answers one question, ``next_wall_s(after_s)``: the first wall-clock time
(seconds since 1970-01-01T00:00 of a calendar without zones) strictly after
``after_s`` that the expression matches. Zones and DST live a layer above
(``cronspec``); here every day has 86,400 seconds.

Representation (built once per distinct resolved expression, shared by every
schedule that uses it through ``compile_table``'s cache):

- the time of day is a sorted tuple of matching minutes-of-day (at most 1,440)
  plus, per second 0-59, the next allowed second (or -1). The next time of day at
  or after ``sod`` is one set lookup, or one ``bisect`` in C;
- the days are a sorted tuple of matching day numbers per calendar year, built on
  first use (at most 366 entries, about 100 µs) and kept, so the next matching day
  is one ``bisect`` too. Expressions that match every day skip that entirely.

So ``next_wall_s`` costs a handful of integer operations and at most two
bisections whatever the expression, where an iterating matcher steps field by
field through datetimes.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left, bisect_right
from datetime import date
from functools import lru_cache

from actors.timespec.cronparse import DOM, DOW, FIELDS, MONTH, parse_field, position_of
from actors.timespec.errors import SpecError

SECONDS_PER_DAY = 86_400
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MAX_DAY = date(9999, 12, 31).toordinal() - _EPOCH_ORDINAL
_MIN_DAY = date(1, 1, 1).toordinal() - _EPOCH_ORDINAL
# Every satisfiable day rule matches at least once in 400 years (the Gregorian
# cycle: every date falls on every weekday in it), so a longer search means "never".
_SEARCH_YEARS = 401
_ALL_DOM = frozenset(range(1, 32))
_ALL_MONTHS = frozenset(range(1, 13))
_ALL_DOW = frozenset(range(7))
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_LONGEST_MONTH = {
    1: 31,
    2: 29,
    3: 31,
    4: 30,
    5: 31,
    6: 30,
    7: 31,
    8: 31,
    9: 30,
    10: 31,
    11: 30,
    12: 31,
}


class TimeOfDay:
    """Matching seconds-of-day as sorted minutes plus a next-second lookup."""

    __slots__ = ("_first_sec", "_minute_set", "_minutes", "_sec_next", "first_s")

    def __init__(self, seconds: frozenset[int], minutes: frozenset[int], hours: frozenset[int]):
        self._minutes = tuple(sorted(h * 60 + m for h in hours for m in minutes))
        self._minute_set = frozenset(self._minutes)
        secs = sorted(seconds)
        self._first_sec = secs[0]
        self._sec_next = _sec_next_table(tuple(secs))
        self.first_s = self._minutes[0] * 60 + self._first_sec

    def at_or_after(self, sod: int) -> int:
        """First matching second-of-day >= ``sod``, or -1 when none is left today."""
        minute, second = divmod(sod, 60)
        if minute in self._minute_set:
            nxt = self._sec_next[second]
            if nxt >= 0:
                return minute * 60 + nxt
        i = bisect_right(self._minutes, minute)
        if i < len(self._minutes):
            return self._minutes[i] * 60 + self._first_sec
        return -1


@lru_cache(maxsize=4096)
def _sec_next_table(seconds: tuple[int, ...]) -> tuple[int, ...]:
    table = []
    for s in range(60):
        later = [x for x in seconds if x >= s]
        table.append(later[0] if later else -1)
    return tuple(table)


class DayRule:
    """Which calendar days match: day-of-month, month and day-of-week combined.

    Vixie/cronie rule: when both day-of-month and day-of-week are restricted
    (neither field starts with ``*``), a day matches if EITHER matches; otherwise
    both must (an unrestricted field matches everything, so that is the other one).
    """

    __slots__ = (
        "_dom",
        "_dom_or_dow",
        "_dow",
        "_last_day",
        "_months",
        "_recent",
        "_years",
        "every_day",
    )

    def __init__(
        self,
        dom: frozenset[int],
        last_day: bool,
        months: frozenset[int],
        dow: frozenset[int],
        dom_or_dow: bool,
    ):
        self._dom, self._last_day, self._months, self._dow = dom, last_day, months, dow
        self._dom_or_dow = dom_or_dow
        self.every_day = (
            not dom_or_dow and dom == _ALL_DOM and months == _ALL_MONTHS and dow == _ALL_DOW
        )
        self._years: dict[int, tuple[int, int, tuple[int, ...]]] = {}
        self._recent: tuple[int, int, tuple[int, ...]] = (0, 0, ())

    def satisfiable(self) -> bool:
        if self._dom_or_dow or self._last_day:
            return True
        return any(d <= _LONGEST_MONTH[m] for m in self._months for d in self._dom)

    def first_at_or_after(self, day: int) -> int | None:
        """First matching day number (days since 1970-01-01) >= ``day``; None if none."""
        if day < _MIN_DAY:  # before year 1: the calendar starts there
            day = _MIN_DAY
        if self.every_day:
            return day if day <= _MAX_DAY else None
        lo, hi, days = self._recent
        if lo <= day < hi:
            i = bisect_left(days, day)
            if i < len(days):
                return days[i]
            day = hi
        for _ in range(_SEARCH_YEARS):
            if not _MIN_DAY <= day <= _MAX_DAY:
                return None
            year = date.fromordinal(day + _EPOCH_ORDINAL).year
            entry = self._years.get(year)
            if entry is None:
                entry = self._build_year(year)
            self._recent = entry
            lo, hi, days = entry
            i = bisect_left(days, day)
            if i < len(days):
                return days[i]
            day = hi
        return None

    def _choose_days(self, first: int, length: int, any_dom: bool) -> set[int]:
        """Days (1-based) of the month starting on day number ``first`` that match."""
        by_dow: set[int] = set()
        for weekday in self._dow:
            # 1970-01-01 (day 0) was a Thursday, weekday 4 in cron's numbering.
            by_dow.update(range(1 + (weekday - first - 4) % 7, length + 1, 7))
        if any_dom and not self._dom_or_dow:
            return by_dow
        by_dom = {d for d in self._dom if d <= length}
        if self._last_day:
            by_dom.add(length)
        return (by_dom | by_dow) if self._dom_or_dow else (by_dom & by_dow)

    def _build_year(self, year: int) -> tuple[int, int, tuple[int, ...]]:
        lo = date(year, 1, 1).toordinal() - _EPOCH_ORDINAL
        leap = calendar.isleap(year)
        hi = lo + (366 if leap else 365)
        any_dom = self._dom == _ALL_DOM
        any_dow = self._dow == _ALL_DOW
        matches: list[int] = []
        first = lo
        for month in range(1, 13):
            length = 29 if month == 2 and leap else _MONTH_DAYS[month - 1]
            if month in self._months:
                if any_dow and not self._dom_or_dow:  # the common case: days of month only
                    chosen = sorted(d for d in self._dom if d <= length)
                    if self._last_day and length not in self._dom:
                        chosen.append(length)
                else:
                    chosen = sorted(self._choose_days(first, length, any_dom))
                matches.extend(first + d - 1 for d in chosen)
            first += length
        entry = (lo, hi, tuple(matches))
        if len(self._years) > 64:  # schedules move forward; old years are not asked again
            self._years.clear()
        self._years[year] = entry
        return entry


class CronTable:
    """A compiled cron expression over wall-clock seconds (see the module docstring)."""

    __slots__ = ("days", "resolved", "time_of_day", "wildcard")

    def __init__(self, resolved: tuple[str, ...], time_of_day: TimeOfDay, days: DayRule):
        self.resolved = resolved
        self.time_of_day = time_of_day
        self.days = days
        # cronie's notion: a minute or hour field starting with "*" makes the job
        # "wildcard" for DST purposes (see the package docstring).
        self.wildcard = resolved[1].startswith("*") or resolved[2].startswith("*")

    def next_wall_s(self, after_s: int) -> int | None:
        """First matching wall time strictly after ``after_s``; None past year 9999."""
        t = after_s + 1
        day, sod = divmod(t, SECONDS_PER_DAY)
        found = self.days.first_at_or_after(day)
        if found is None:
            return None
        if found == day:
            x = self.time_of_day.at_or_after(sod)
            if x >= 0:
                return t - sod + x
            found = self.days.first_at_or_after(day + 1)
            if found is None:
                return None
        return found * SECONDS_PER_DAY + self.time_of_day.first_s


@lru_cache(maxsize=65_536)
def compile_table(resolved: tuple[str, ...], written: int) -> CronTable:
    """The shared table of a resolved six-field expression (``written``: 5 or 6, for messages).

    Raises ``SpecError`` naming the field at fault.
    """
    values = [
        parse_field(text, field, position_of(i, written))
        for i, (text, field) in enumerate(zip(resolved, FIELDS, strict=True))
    ]
    second, minute, hour, dom, month, dow = values
    tod = _time_of_day(second.values, minute.values, hour.values)
    dom_or_dow = not resolved[3].startswith("*") and not resolved[5].startswith("*")
    days = _day_rule(dom.values, dom.last_day, month.values, dow.values, dom_or_dow)
    if not days.satisfiable():
        raise SpecError(
            f"spec.cron: field {position_of(3, written)} ({DOM.name}) {resolved[3]!r} never occurs "
            f"in the {MONTH.name}(s) {resolved[4]!r}, and the {DOW.name} does not widen it"
        )
    return CronTable(resolved, tod, days)


@lru_cache(maxsize=65_536)
def _time_of_day(
    seconds: frozenset[int], minutes: frozenset[int], hours: frozenset[int]
) -> TimeOfDay:
    return TimeOfDay(seconds, minutes, hours)


@lru_cache(maxsize=4096)
def _day_rule(
    dom: frozenset[int],
    last_day: bool,
    months: frozenset[int],
    dow: frozenset[int],
    dom_or_dow: bool,
) -> DayRule:
    return DayRule(dom, last_day, months, dow, dom_or_dow)
