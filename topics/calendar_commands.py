"""``calendar.upsert`` and ``calendar.delete``: named calendars shared by a namespace.

A named calendar is a calendar's days (`topics.calendar_days`) under a name that any
schedule of the namespace may exclude (``"exclude": ["uk-holidays"]``)::

    {"v": 1, "type": "calendar.upsert", "id": "uk-holidays",
     "calendar": {"tz": "Europe/London", "dates": ["2026-12-25", "2026-12-28"]}}
    {"v": 1, "type": "calendar.delete", "id": "uk-holidays"}

They are commands like every other (produced to ``{ns}.commands``, keyed by the
name, validated by the shard that reads them and refused to ``{ns}.rejected`` with a
reason), and the shard that applies one writes the calendar, in its transaction, to
the compacted ``{ns}.calendars`` topic (key: the name; value: the calendar; null:
deleted), which every scheduler reads whole (docs/DESIGN.md §5.7). A calendar is
not owned by a shard: the command's partition only says which shard validates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topics import codec
from topics.calendar_days import CalendarDays, parse_calendar_days
from topics.command_fields import FieldError, check_keys
from topics.spec_compiler import SpecError

CALENDAR_UPSERT_TYPE = "calendar.upsert"
CALENDAR_DELETE_TYPE = "calendar.delete"

_ENVELOPE = ("v", "type", "id")


@dataclass(frozen=True, slots=True)
class CalendarUpsert:
    """``calendar.upsert``: create or replace the calendar named ``id``."""

    id: str
    """The calendar's name (1-200 characters, as an id)."""
    calendar: dict[str, Any]
    """The calendar object as given (``tz``, ``dates``, ``ranges``, ``weekdays``)."""
    days: CalendarDays
    """Its days, checked."""

    def value(self) -> bytes:
        """The record the shard writes to ``{ns}.calendars``."""
        return calendar_value(self.calendar)


@dataclass(frozen=True, slots=True)
class CalendarDelete:
    """``calendar.delete``: forget the calendar named ``id`` (a tombstone)."""

    id: str


def calendar_value(calendar: dict[str, Any]) -> bytes:
    return codec.dumps({"v": 1, "calendar": calendar})


def decode_calendar_value(value: bytes, name: str) -> CalendarDays:
    """The days of a ``{ns}.calendars`` record; `ValueError` naming the field otherwise."""
    body = codec.loads(value)
    if not isinstance(body, dict) or "calendar" not in body:
        raise ValueError(f'calendar {name!r}: expected {{"v": 1, "calendar": {{...}}}}')
    version = body.get("v")
    if type(version) is not int or version != 1:  # True == 1, but is no version
        raise ValueError(f"calendar {name!r}.v: expected 1, got {version!r}")
    return parse_calendar_days(body["calendar"], f"calendar {name!r}")


def decode_calendar_upsert(body: dict[str, Any], name: str) -> CalendarUpsert:
    check_keys(body, "", (*_ENVELOPE, "calendar"))
    if "calendar" not in body:
        raise FieldError(
            'calendar: missing; give the days, such as "calendar": {"tz": "Europe/London",'
            ' "dates": ["2026-12-25"], "weekdays": ["SAT", "SUN"]}'
        )
    try:
        days = parse_calendar_days(body["calendar"], "calendar")
    except SpecError as error:
        raise FieldError(str(error)) from None
    return CalendarUpsert(name, dict(body["calendar"]), days)


def decode_calendar_delete(body: dict[str, Any], name: str) -> CalendarDelete:
    check_keys(body, "", _ENVELOPE)
    return CalendarDelete(name)
