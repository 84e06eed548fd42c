"""`simulation.checkers.calendar_owed`: each instant of a calendar-naming spec owed by
the calendars in effect at it (DESIGN §5.7), against a brute-force walk by days."""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from actors.timespec import CompiledSpec, compile_spec
from simulation.checkers.calendar_owed import CalendarTimeline
from topics.calendar_days import CalendarDays
from topics.timefmt import parse_instant

SPEC = {"any": [{"every": "1h"}], "exclude": ["hol"]}
HOUR = 3_600_000
DAY = 24 * HOUR
MON = parse_instant("2026-03-02T00:00:00Z")


def _record(at_ms: int, days: list[str] | None) -> tuple[int, str, bytes | None]:
    if days is None:
        return at_ms, "hol", None
    return at_ms, "hol", orjson.dumps({"v": 1, "calendar": {"dates": days}})


def _compile(calendars: Mapping[str, CalendarDays]) -> CompiledSpec:
    return compile_spec(SPEC, schedule_id="s", calendars=calendars)


def test_each_instant_by_the_version_in_effect_at_it() -> None:
    records = [
        _record(MON + 6 * HOUR, ["2026-03-03"]),  # waits until then: Monday owed by it
        _record(MON + DAY + 12 * HOUR, ["2026-03-04"]),  # Tuesday noon: gives Tuesday back
        _record(MON + 3 * DAY + 12 * HOUR, None),  # Thursday noon: deleted for good
    ]
    owed = list(CalendarTimeline(records).owed(("hol",), _compile, MON, MON + 5 * DAY))
    hours = [(o - MON) // HOUR for o in owed]
    monday = list(range(24))  # waited for: owed by the version that ended the wait
    tuesday = list(range(36, 48))  # excluded until the edit at noon, allowed after
    thursday = list(range(72, 84))  # Wednesday excluded; deleted at Thursday noon
    assert hours == monday + tuesday + thursday


def test_a_calendar_never_created_owes_nothing() -> None:
    assert not list(CalendarTimeline([]).owed(("hol",), _compile, MON, MON + DAY))
