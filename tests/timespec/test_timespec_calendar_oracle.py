"""Differential sweep: RRULEs, several specs, excluded days, adjustment and business
days against the independent oracles of ``oracle_days`` (zoneinfo and datetime
only), over two years in nine zones with DST (docs/DESIGN.md §5.6). 0 mismatches.

The RRULE's wall times come from dateutil's ``rrule`` (the engine expands with it
too); what is checked independently is everything after the expansion: turning
wall times into instants under the DST rule, the walk's window and restarts.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import rrulestr

from actors.timespec import compile_spec
from actors.timespec.composite import MAX_SHIFT_DAYS
from tests.timespec.oracle_days import (
    adjusted,
    business_day_fires,
    local_date,
    utc,
    wall_to_instants,
)

ZONES = (
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Havana",
    "Europe/Berlin",
    "Pacific/Auckland",
    "America/Santiago",
    "Pacific/Chatham",
    "America/St_Johns",
)
FROM_S = utc("2026-01-01T00:00:00")
TO_S = utc("2028-01-01T00:00:00")
ADJUSTMENTS = ("skip", "next_business_day", "previous_business_day", "modified_following")


def chain(spec: object, from_s: int, to_s: int, **kw: object) -> list[int]:
    compiled = compile_spec(spec, schedule_id="oracle", **kw)  # type: ignore[arg-type]
    out, t = [], from_s * 1000
    while True:
        nxt = compiled.next_after(t)
        if nxt is None or nxt > to_s * 1000:
            return out
        assert nxt > t
        assert nxt % 1000 == 0
        out.append(nxt // 1000)
        t = nxt


RRULES = (
    ("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", True),
    ("FREQ=WEEKLY;BYDAY=SU;BYHOUR=0,1,2,3;BYMINUTE=15", True),
    ("FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=0", True),
    ("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=18;BYMINUTE=0", True),
    ("FREQ=YEARLY;BYMONTH=3,4,9,10;BYMONTHDAY=1,2,3,4,5,6,7,8;BYDAY=SU;BYHOUR=2;BYMINUTE=0", True),
    ("FREQ=HOURLY;INTERVAL=5;BYMINUTE=30", False),
    ("FREQ=MINUTELY;INTERVAL=45", False),
)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("gap,fold", [("shift", "once"), ("skip", "twice")])
def test_rrule_in_zones_matches_the_oracle(zone: str, gap: str, fold: str) -> None:
    tz = ZoneInfo(zone)
    for text, fixed in RRULES:
        dtstart = datetime(2025, 12, 1, 0, 0)
        spec = {"rrule": text, "dtstart": dtstart.isoformat(), "tz": zone}
        ours = chain(spec, FROM_S, TO_S, dst={"gap": gap, "fold": fold})
        walls = rrulestr(text, dtstart=dtstart).between(
            datetime(2025, 12, 28), datetime(2028, 1, 4), inc=True
        )
        expected: set[int] = set()
        for wall in walls:
            got = wall_to_instants(
                wall,
                tz,
                gap_shift=fixed and gap == "shift",
                fold_once=fixed and fold == "once",
            )
            expected.update(t for t in got if FROM_S < t <= TO_S)
        assert ours == sorted(expected), (zone, text)


def test_rrule_last_business_day_is_the_hand_walked_one() -> None:
    """The expansion itself, once, against a walk of the days of each month."""
    spec = {
        "rrule": "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
        "dtstart": "2026-01-01T18:00:00",
        "tz": "Europe/London",
    }
    ours = chain(spec, FROM_S, TO_S)
    expected = business_day_fires(
        -1,
        (18, 0),
        ZoneInfo("Europe/London"),
        lambda _d: False,
        date(2026, 1, 1),
        date(2027, 12, 31),
    )
    assert ours == expected
    assert len(ours) == 24


def test_rrule_asked_backwards_restarts_its_walk() -> None:
    """A shard asks ever later; a new owner may ask earlier: same answers."""
    spec = {"rrule": "FREQ=MINUTELY;INTERVAL=7", "dtstart": "2026-01-01T00:00:00"}
    compiled = compile_spec(spec, schedule_id="x")
    late = compiled.next_after(utc("2026-03-01T00:00:00") * 1000)
    early = compiled.next_after(utc("2026-01-01T00:00:00") * 1000)
    assert early == utc("2026-01-01T00:07:00") * 1000
    assert late == compile_spec(spec, schedule_id="x").next_after(utc("2026-03-01T00:00:00") * 1000)


HOLIDAYS = {
    "dates": ["2026-01-01", "2026-04-03", "2026-04-06", "2026-05-04", "2026-12-25", "2027-01-01"],
    "ranges": [["2026-08-03", "2026-08-14"], ["2027-12-24", "2027-12-31"]],
    "weekdays": ["SAT", "SUN"],
}
MEMBERS = (
    ({"cron": "30 2 * * *"}, True),  # inside the gap in many zones
    ({"cron": "0 9 1,15,31 * *"}, True),
    ({"every": "7h"}, False),
    ({"cron": "*/30 1 * * MON"}, False),  # wildcard: never moved
    (
        {
            "rrule": "FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=23;BYMINUTE=45",
            "dtstart": "2025-11-01T00:00:00",
        },
        True,
    ),
)


def _member_fires(zone: str, member: dict[str, object]) -> list[int]:
    spec = dict(member)
    if "cron" in spec or "rrule" in spec:
        spec["tz"] = zone
    margin = (MAX_SHIFT_DAYS + 2) * 86_400
    return chain(spec, FROM_S - margin, TO_S + margin)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("adjust", ADJUSTMENTS)
def test_several_specs_minus_excluded_days_match_the_oracle(zone: str, adjust: str) -> None:
    tz = ZoneInfo(zone)
    # The calendar's zone differs from the schedule's half of the time: its days
    # are its own zone's days.
    cal_zone = (
        "Asia/Tokyo" if zone in ("Europe/London", "America/Santiago", "Pacific/Chatham") else zone
    )
    calendar = {"tz": cal_zone, **HOLIDAYS}
    spec_exclusion = {"cron": "0 12 * * WED"}  # every Wednesday of the schedule's zone
    spec = {
        "any": [m for m, _ in MEMBERS],
        "tz": zone,
        "exclude": [{"calendar": calendar}, spec_exclusion],
        "adjust": adjust,
    }
    ours = chain(spec, FROM_S, TO_S)

    cal_tz = ZoneInfo(cal_zone)
    held = {date.fromisoformat(d) for d in HOLIDAYS["dates"]}
    for first, last in HOLIDAYS["ranges"]:
        d = date.fromisoformat(first)
        while d <= date.fromisoformat(last):
            held.add(d)
            d += timedelta(days=1)

    def excluded(t: int) -> bool:
        cal_day = local_date(t, cal_tz)
        return cal_day in held or cal_day.weekday() >= 5 or local_date(t, tz).weekday() == 2

    fires: set[int] = set()
    fixed_fires: set[int] = set()
    for member, fixed in MEMBERS:
        got = _member_fires(zone, member)
        fires.update(got)
        if fixed:
            fixed_fires.update(got)
    expected = adjusted(
        sorted(fires),
        excluded=excluded,
        fixed=lambda t: t in fixed_fires,
        adjust=adjust,
        zone=tz,
        max_shift_days=MAX_SHIFT_DAYS,
    )
    assert ours == [t for t in expected if FROM_S < t <= TO_S], (zone, adjust)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("nth", [1, 3, -1, -2])
def test_nth_business_day_of_the_month_matches_the_oracle(zone: str, nth: int) -> None:
    tz = ZoneInfo(zone)
    calendar = {"tz": zone, **HOLIDAYS}
    spec = {
        "any": [{"business_day": nth, "time": "02:30"}],
        "tz": zone,
        "exclude": [{"calendar": calendar}],
    }
    ours = chain(spec, FROM_S, TO_S)
    held = {date.fromisoformat(d) for d in HOLIDAYS["dates"]}
    for first, last in HOLIDAYS["ranges"]:
        d = date.fromisoformat(first)
        while d <= date.fromisoformat(last):
            held.add(d)
            d += timedelta(days=1)
    expected = business_day_fires(
        nth, (2, 30), tz, lambda d: d in held, date(2025, 12, 1), date(2028, 1, 31)
    )
    assert ours == [t for t in expected if FROM_S < t <= TO_S]
    assert len(ours) == 24
