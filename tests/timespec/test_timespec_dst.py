"""DST table tests: gaps and folds in five zones, fixed-time and wildcard, each policy.

Every expected instant below was worked out by hand from the zone's published
rules (dates in the comments), not by running the code. Notation: the cron
expression, the policy, the instant we ask from, and the next fires in UTC.

Transitions used (tzdata):
- America/New_York 2026: Mar 8 02:00 EST -> 03:00 EDT (07:00Z);
  Nov 1 02:00 EDT -> 01:00 EST (06:00Z)
- Europe/London 2026: Mar 29 01:00 GMT -> 02:00 BST (01:00Z); Oct 25 02:00 BST -> 01:00 GMT (01:00Z)
- Australia/Lord_Howe (+10:30 / +11:00, a 30-minute shift) 2026: Apr 5 02:00 -> 01:30
  (15:00Z Apr 4); Oct 4 02:00 -> 02:30 (15:30Z Oct 3)
- America/Havana (the shift is at midnight) 2026: Mar 8 00:00 CST -> 01:00 CDT (05:00Z);
  Nov 1 01:00 CDT -> 00:00 CST (05:00Z)
- Asia/Kolkata: +05:30 all year, no transitions
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from actors.timespec import compile_spec
from topics.timefmt import format_ms, parse_instant

SHIFT_ONCE = {"gap": "shift", "fold": "once"}
SKIP_ONCE = {"gap": "skip", "fold": "once"}
SHIFT_TWICE = {"gap": "shift", "fold": "twice"}
SKIP_TWICE = {"gap": "skip", "fold": "twice"}
ALL_POLICIES = (SHIFT_ONCE, SKIP_ONCE, SHIFT_TWICE, SKIP_TWICE)

NY = "America/New_York"
LON = "Europe/London"
LHI = "Australia/Lord_Howe"
HAV = "America/Havana"
KOL = "Asia/Kolkata"


def fires(expr: str, zone: str, dst: dict[str, str] | None, after: str, n: int) -> list[str]:
    spec = compile_spec({"cron": expr, "tz": zone}, schedule_id="dst-table", dst=dst)
    out, t = [], parse_instant(after)
    for _ in range(n):
        nxt = spec.next_after(t)
        assert nxt is not None
        out.append(format_ms(nxt))
        t = nxt
    return out


def z(*times: str) -> list[str]:
    return [f"{t}.000Z" if len(t) == 19 else t for t in times]


def test_the_transitions_are_where_the_tables_assume() -> None:
    """Guard: if tzdata moved a transition, the tables below would be testing nothing."""
    cases = [
        (NY, "2026-03-08T07:00:00", -5, -4),
        (NY, "2026-11-01T06:00:00", -4, -5),
        (LON, "2026-03-29T01:00:00", 0, 1),
        (LON, "2026-10-25T01:00:00", 1, 0),
        (LHI, "2026-04-04T15:00:00", 11, 10.5),
        (LHI, "2026-10-03T15:30:00", 10.5, 11),
        (HAV, "2026-03-08T05:00:00", -5, -4),
        (HAV, "2026-11-01T05:00:00", -4, -5),
    ]
    for zone, at, before_h, after_h in cases:
        t = datetime.fromisoformat(at).replace(tzinfo=UTC)
        info = ZoneInfo(zone)
        off_before = (t - timedelta(seconds=1)).astimezone(info).utcoffset()
        off_after = t.astimezone(info).utcoffset()
        assert off_before == timedelta(hours=before_h), (zone, at)
        assert off_after == timedelta(hours=after_h), (zone, at)


# --- fixed-time schedules (neither minute nor hour starts with "*") ---------------

FIXED_CASES = [
    # New York spring: 02:30 does not exist on Mar 8.
    (
        "30 2 * * *",
        NY,
        SHIFT_ONCE,
        "2026-03-07T12:00:00Z",
        z("2026-03-08T07:00:00", "2026-03-09T06:30:00"),
    ),
    (
        "30 2 * * *",
        NY,
        SKIP_ONCE,
        "2026-03-07T12:00:00Z",
        z("2026-03-09T06:30:00", "2026-03-10T06:30:00"),
    ),
    # Several matches inside the gap shift onto the same instant: one fire.
    (
        "0,15,30,45 2 * * *",
        NY,
        SHIFT_ONCE,
        "2026-03-08T06:50:00Z",
        z("2026-03-08T07:00:00", "2026-03-09T06:00:00"),
    ),
    # A gap match and the first real time both land on 03:00 EDT: one fire.
    (
        "0 2,3 * * *",
        NY,
        SHIFT_ONCE,
        "2026-03-08T06:00:00Z",
        z("2026-03-08T07:00:00", "2026-03-09T06:00:00"),
    ),
    # New York fall: 01:30 happens at 05:30Z (EDT) and 06:30Z (EST).
    (
        "30 1 * * *",
        NY,
        SHIFT_ONCE,
        "2026-10-31T12:00:00Z",
        z("2026-11-01T05:30:00", "2026-11-02T06:30:00"),
    ),
    (
        "30 1 * * *",
        NY,
        SHIFT_TWICE,
        "2026-10-31T12:00:00Z",
        z("2026-11-01T05:30:00", "2026-11-01T06:30:00", "2026-11-02T06:30:00"),
    ),
    # Asked from inside the second pass: once means the 01:30 of today is done.
    ("30 1 * * *", NY, SHIFT_ONCE, "2026-11-01T06:10:00Z", z("2026-11-02T06:30:00")),
    (
        "30 1 * * *",
        NY,
        SHIFT_TWICE,
        "2026-11-01T06:10:00Z",
        z("2026-11-01T06:30:00", "2026-11-02T06:30:00"),
    ),
    # London spring: 01:00-02:00 does not exist on Mar 29.
    (
        "30 1 * * *",
        LON,
        SHIFT_ONCE,
        "2026-03-28T12:00:00Z",
        z("2026-03-29T01:00:00", "2026-03-30T00:30:00"),
    ),
    ("30 1 * * *", LON, SKIP_TWICE, "2026-03-28T12:00:00Z", z("2026-03-30T00:30:00")),
    # Six fields: seconds follow the same rule.
    (
        "15 30 1 * * *",
        LON,
        SHIFT_ONCE,
        "2026-03-28T12:00:00Z",
        z("2026-03-29T01:00:00", "2026-03-30T00:30:15"),
    ),
    # London fall: 01:30 happens at 00:30Z (BST) and 01:30Z (GMT).
    (
        "30 1 * * *",
        LON,
        SHIFT_ONCE,
        "2026-10-24T12:00:00Z",
        z("2026-10-25T00:30:00", "2026-10-26T01:30:00"),
    ),
    (
        "30 1 * * *",
        LON,
        SKIP_TWICE,
        "2026-10-24T12:00:00Z",
        z("2026-10-25T00:30:00", "2026-10-25T01:30:00", "2026-10-26T01:30:00"),
    ),
    # Lord Howe spring: 02:00-02:30 does not exist on Oct 4; the first real instant
    # after it is 02:30 +11:00 = 15:30Z.
    (
        "15 2 * * *",
        LHI,
        SHIFT_ONCE,
        "2026-10-03T12:00:00Z",
        z("2026-10-03T15:30:00", "2026-10-04T15:15:00"),
    ),
    ("15 2 * * *", LHI, SKIP_ONCE, "2026-10-03T12:00:00Z", z("2026-10-04T15:15:00")),
    # 02:45 is after the half-hour gap: it exists, nothing to shift.
    (
        "45 2 * * *",
        LHI,
        SKIP_ONCE,
        "2026-10-03T12:00:00Z",
        z("2026-10-03T15:45:00", "2026-10-04T15:45:00"),
    ),
    # Lord Howe fall: 01:30-02:00 happens twice on Apr 5 (+11:00 then +10:30).
    (
        "45 1 * * *",
        LHI,
        SHIFT_ONCE,
        "2026-04-04T12:00:00Z",
        z("2026-04-04T14:45:00", "2026-04-05T15:15:00"),
    ),
    (
        "45 1 * * *",
        LHI,
        SHIFT_TWICE,
        "2026-04-04T12:00:00Z",
        z("2026-04-04T14:45:00", "2026-04-04T15:15:00", "2026-04-05T15:15:00"),
    ),
    # Havana spring: midnight does not exist on Mar 8 (00:00 CST -> 01:00 CDT).
    (
        "0 0 * * *",
        HAV,
        SHIFT_ONCE,
        "2026-03-07T12:00:00Z",
        z("2026-03-08T05:00:00", "2026-03-09T04:00:00"),
    ),
    (
        "0 0 * * *",
        HAV,
        SKIP_ONCE,
        "2026-03-07T12:00:00Z",
        z("2026-03-09T04:00:00", "2026-03-10T04:00:00"),
    ),
    # Havana fall: midnight happens twice on Nov 1 (04:00Z CDT, 05:00Z CST).
    (
        "0 0 * * *",
        HAV,
        SHIFT_ONCE,
        "2026-10-31T12:00:00Z",
        z("2026-11-01T04:00:00", "2026-11-02T05:00:00"),
    ),
    (
        "0 0 * * *",
        HAV,
        SKIP_TWICE,
        "2026-10-31T12:00:00Z",
        z("2026-11-01T04:00:00", "2026-11-01T05:00:00", "2026-11-02T05:00:00"),
    ),
]


@pytest.mark.parametrize(("expr", "zone", "dst", "after", "expected"), FIXED_CASES)
def test_fixed_time_schedules_follow_the_policy(
    expr: str, zone: str, dst: dict[str, str], after: str, expected: list[str]
) -> None:
    assert fires(expr, zone, dst, after, len(expected)) == expected


# --- wildcard schedules (minute or hour starts with "*"): the policy does not apply --

WILDCARD_CASES = [
    # New York spring: 02:xx does not exist on Mar 8, so "*/30 2" skips that day.
    ("*/30 2 * * *", NY, "2026-03-07T12:00:00Z", z("2026-03-09T06:00:00", "2026-03-09T06:30:00")),
    # Hourly across spring-forward: 01:00 EST, then 03:00 EDT.
    (
        "0 * * * *",
        NY,
        "2026-03-08T05:30:00Z",
        z("2026-03-08T06:00:00", "2026-03-08T07:00:00", "2026-03-08T08:00:00"),
    ),
    # New York fall: 01:00 and 01:30 each happen twice.
    (
        "*/30 1 * * *",
        NY,
        "2026-11-01T04:00:00Z",
        z(
            "2026-11-01T05:00:00",
            "2026-11-01T05:30:00",
            "2026-11-01T06:00:00",
            "2026-11-01T06:30:00",
            "2026-11-02T06:00:00",
        ),
    ),
    (
        "0 * * * *",
        NY,
        "2026-11-01T04:30:00Z",
        z("2026-11-01T05:00:00", "2026-11-01T06:00:00", "2026-11-01T07:00:00"),
    ),
    # London: hour 1 missing on Mar 29, doubled on Oct 25.
    (
        "15 * * * *",
        LON,
        "2026-03-29T00:00:00Z",
        z("2026-03-29T00:15:00", "2026-03-29T01:15:00", "2026-03-29T02:15:00"),
    ),
    (
        "*/20 1 * * *",
        LON,
        "2026-10-25T00:00:00Z",
        z(
            "2026-10-25T00:20:00",
            "2026-10-25T00:40:00",
            "2026-10-25T01:00:00",
            "2026-10-25T01:20:00",
            "2026-10-25T01:40:00",
            "2026-10-26T01:00:00",
        ),
    ),
    # Lord Howe spring: 02:00 and 02:20 are in the gap; 02:40 +11:00 is real.
    ("*/20 2 * * *", LHI, "2026-10-03T15:00:00Z", z("2026-10-03T15:40:00", "2026-10-04T15:00:00")),
    # Lord Howe fall: 01:40 happens at 14:40Z (+11:00) and 15:10Z (+10:30).
    (
        "*/20 1 * * *",
        LHI,
        "2026-04-04T14:30:00Z",
        z("2026-04-04T14:40:00", "2026-04-04T15:10:00", "2026-04-05T14:30:00"),
    ),
    # Havana: hour 0 does not exist on Mar 8 and happens twice on Nov 1.
    ("*/30 0 * * *", HAV, "2026-03-07T12:00:00Z", z("2026-03-09T04:00:00", "2026-03-09T04:30:00")),
    (
        "*/30 0 * * *",
        HAV,
        "2026-10-31T12:00:00Z",
        z(
            "2026-11-01T04:00:00",
            "2026-11-01T04:30:00",
            "2026-11-01T05:00:00",
            "2026-11-01T05:30:00",
            "2026-11-02T05:00:00",
        ),
    ),
    # Six fields with a wildcard minute: every real second that matches.
    (
        "0 * 1 * * *",
        NY,
        "2026-11-01T05:58:30Z",
        z("2026-11-01T05:59:00", "2026-11-01T06:00:00", "2026-11-01T06:01:00"),
    ),
]


@pytest.mark.parametrize(("expr", "zone", "after", "expected"), WILDCARD_CASES)
@pytest.mark.parametrize("dst", ALL_POLICIES, ids=lambda d: f"{d['gap']}-{d['fold']}")
def test_wildcard_schedules_fire_at_each_real_matching_instant(
    expr: str, zone: str, after: str, expected: list[str], dst: dict[str, str]
) -> None:
    assert fires(expr, zone, dst, after, len(expected)) == expected


# --- a zone without DST: every policy gives the same answer -----------------------


@pytest.mark.parametrize("dst", ALL_POLICIES, ids=lambda d: f"{d['gap']}-{d['fold']}")
def test_kolkata_has_no_transitions_so_no_policy_matters(dst: dict[str, str]) -> None:
    # 02:30 +05:30 is 21:00Z the day before, every day of the year.
    for day in ("2026-03-08", "2026-11-01", "2026-06-30"):
        after = f"{day}T00:00:00Z"
        got = fires("30 2 * * *", KOL, dst, after, 2)
        first = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(hours=21)
        assert got == [format_ms(int(first.timestamp() * 1000) + k * 86_400_000) for k in (0, 1)]
    assert fires("*/30 * * * *", KOL, dst, "2026-03-08T00:10:00Z", 2) == z(
        "2026-03-08T00:30:00", "2026-03-08T01:00:00"
    )


def test_default_policy_is_shift_and_once() -> None:
    assert fires("30 2 * * *", NY, None, "2026-03-07T12:00:00Z", 1) == z("2026-03-08T07:00:00")
    assert fires("30 1 * * *", NY, None, "2026-10-31T12:00:00Z", 2) == z(
        "2026-11-01T05:30:00", "2026-11-02T06:30:00"
    )


def test_a_daily_job_never_fires_twice_on_a_fall_back_day_by_default() -> None:
    """What docs/DESIGN.md §5.3 says croniter does: a daily 01:30 job firing twice."""
    for zone in (NY, LON, "Europe/Berlin", "America/Chicago", "America/Los_Angeles"):
        got = fires("30 1 * * *", zone, None, "2026-01-01T00:00:00Z", 365)
        days = [datetime.fromisoformat(g).astimezone(ZoneInfo(zone)).date() for g in got]
        assert len(set(days)) == 365, zone
