"""A calendar's days: a zone and a set of dates, the wire format and its checks.

A calendar names days, never instants: ``{"tz": "Europe/London", "dates":
["2026-12-25"], "ranges": [["2026-12-24", "2027-01-01"]], "weekdays": ["SAT",
"SUN"]}`` holds 25 December 2026, 24 December to 1 January (inclusive) and every
Saturday and Sunday, each a whole local day of London. A schedule's ``spec.exclude``
gives one inline (``{"calendar": {...}}``, docs/DESIGN.md §5.6). Dates are proleptic
Gregorian ``YYYY-MM-DD``; the zone is an IANA name (default UTC).

Pure and small: `CalendarDays.holds(day)` is a set lookup and a weekday test, with
``day`` counted in days since 1970-01-01 (a Thursday).
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from topics.spec_compiler import SpecError

WEEKDAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_KEYS = frozenset(("tz", "dates", "ranges", "weekdays"))
# A calendar travels inside commands (256 KiB) and changelog records: bounded.
MAX_DATES = 5000
MAX_RANGES = 1000
# A range longer than this is almost surely a typo in a year.
MAX_RANGE_DAYS = 3660
EXAMPLE = '{"tz": "Europe/London", "dates": ["2026-12-25"], "weekdays": ["SAT", "SUN"]}'


@dataclass(frozen=True, slots=True)
class CalendarDays:
    """Days of ``tz`` held by a calendar (days since 1970-01-01, weekday 0 = Monday)."""

    tz: str
    days: frozenset[int]
    weekdays: frozenset[int]

    def holds(self, day: int) -> bool:
        # 1970-01-01 was a Thursday (weekday 3).
        return day in self.days or (day + 3) % 7 in self.weekdays


def day_number(text: str) -> int:
    return date.fromisoformat(text).toordinal() - _EPOCH_ORDINAL


def parse_calendar_days(value: Any, path: str) -> CalendarDays:
    """The days of a calendar object; `SpecError` naming ``path.field`` otherwise."""
    if not isinstance(value, Mapping):
        raise SpecError(f"{path}: expected an object like {EXAMPLE}")
    unknown = sorted(str(k) for k in value if k not in _KEYS)
    if unknown:
        raise SpecError(f"{path}.{unknown[0]}: unknown field (allowed: {', '.join(sorted(_KEYS))})")
    tz = value.get("tz", "UTC")
    if not isinstance(tz, str):
        raise SpecError(f"{path}.tz: expected an IANA zone name, got {type(tz).__name__}")
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise SpecError(
            f"{path}.tz: unknown time zone {tz!r}; use an IANA name like 'Europe/London'"
        ) from None
    days: set[int] = set()
    dates = _list(value, "dates", path, MAX_DATES)
    for i, text in enumerate(dates):
        days.add(_date(text, f"{path}.dates[{i}]"))
    for i, pair in enumerate(_list(value, "ranges", path, MAX_RANGES)):
        where = f"{path}.ranges[{i}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise SpecError(f'{where}: expected ["FIRST", "LAST"], two dates, both included')
        first, last = _date(pair[0], f"{where}[0]"), _date(pair[1], f"{where}[1]")
        if last < first:
            raise SpecError(f"{where}: {pair[1]} is before {pair[0]}")
        if last - first >= MAX_RANGE_DAYS:
            raise SpecError(f"{where}: longer than {MAX_RANGE_DAYS} days; check the years")
        days.update(range(first, last + 1))
    weekdays: set[int] = set()
    for i, name in enumerate(_list(value, "weekdays", path, 7)):
        if not isinstance(name, str) or name.upper()[:3] not in WEEKDAYS:
            raise SpecError(f"{path}.weekdays[{i}]: {name!r} is not one of {', '.join(WEEKDAYS)}")
        weekdays.add(WEEKDAYS.index(name.upper()[:3]))
    if not days and not weekdays:
        raise SpecError(f"{path}: holds no day; give dates, ranges or weekdays")
    return CalendarDays(tz, frozenset(days), frozenset(weekdays))


def _list(value: Mapping[str, Any], key: str, path: str, limit: int) -> list[Any]:
    found = value.get(key, [])
    if not isinstance(found, list):
        raise SpecError(f"{path}.{key}: expected a list, got {type(found).__name__}")
    if len(found) > limit:
        raise SpecError(f"{path}.{key}: at most {limit} entries, got {len(found)}")
    return found


def _date(text: Any, path: str) -> int:
    if not isinstance(text, str) or len(text) != 10:
        raise SpecError(f"{path}: expected a date YYYY-MM-DD, got {text!r}")
    try:
        return day_number(text)
    except ValueError:
        raise SpecError(f"{path}: {text!r} is not a date (YYYY-MM-DD)") from None


MAX_NAME_CHARS = 200


def check_calendar_name(name: str, path: str) -> str:
    """A named calendar's name (`topics.calendar_commands`): as a schedule id, 1-200
    characters, no ``@``, ``/`` or control characters; `SpecError` naming ``path``."""
    if not 1 <= len(name) <= MAX_NAME_CHARS or not name.strip():
        raise SpecError(f"{path}: a calendar name has 1-{MAX_NAME_CHARS} characters")
    if any(c in "@/" or not c.isprintable() for c in name):
        raise SpecError(f"{path}: {name!r}: a calendar name has no '@', '/' or control characters")
    return name


def calendar_names(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The named calendars a spec excludes (its ``exclude`` entries that are names),
    each once, in order; () for every spec that names none (the common case: one dict
    lookup)."""
    if "any" not in spec:
        return ()
    exclude = spec.get("exclude")
    if not exclude or not isinstance(exclude, list):
        return ()
    return tuple(dict.fromkeys(entry for entry in exclude if isinstance(entry, str)))
