"""Cron syntax, every/at, bounds, validation messages and shared tables."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.timespec import CompiledSpec, SpecError, compile_spec, parse_duration_s
from actors.timespec.base import BoundedSpec
from actors.timespec.cronspec import CronSpec
from actors.timespec.simple import EverySpec
from topics.timefmt import format_ms, parse_instant

T0 = "2026-01-01T00:00:00Z"  # a Thursday


def take(spec: CompiledSpec, after: str, n: int) -> list[str]:
    t, out = parse_instant(after), []
    for _ in range(n):
        nxt = spec.next_after(t)
        if nxt is None:
            break
        out.append(format_ms(nxt))
        t = nxt
    return out


def cron(expr: str, after: str = T0, n: int = 4, **kw: Any) -> list[str]:
    return take(compile_spec({"cron": expr}, schedule_id="s", **kw), after, n)


def days(fires: list[str]) -> list[str]:
    return [f[:10] for f in fires]


# --- cron syntax ----------------------------------------------------------------------


def test_lists_ranges_and_steps() -> None:
    assert cron("5,10-12,50-59/5 3 * * *") == [
        "2026-01-01T03:05:00.000Z",
        "2026-01-01T03:10:00.000Z",
        "2026-01-01T03:11:00.000Z",
        "2026-01-01T03:12:00.000Z",
    ]
    assert cron("50-59/5 3 * * *", n=3)[1:] == [
        "2026-01-01T03:55:00.000Z",
        "2026-01-02T03:50:00.000Z",
    ]
    assert cron("40/7 0 * * *", n=3) == [  # A/S runs from A to the end of the field
        "2026-01-01T00:40:00.000Z",
        "2026-01-01T00:47:00.000Z",
        "2026-01-01T00:54:00.000Z",
    ]


def test_names_are_case_insensitive_and_equal_their_numbers() -> None:
    assert cron("0 9 * jan-mar Mon-FRI", n=20) == cron("0 9 * 1-3 1-5", n=20)
    assert cron("0 0 * * SUN", n=3) == cron("0 0 * * 7", n=3) == cron("0 0 * * 0", n=3)
    assert days(cron("0 0 * * 5-7", n=3)) == ["2026-01-02", "2026-01-03", "2026-01-04"]


def test_day_of_month_or_day_of_week_when_both_are_restricted() -> None:
    # The 13th OR any Friday (Vixie/cronie): Jan 2 and 9 are Fridays, Jan 13 a Tuesday.
    assert days(cron("0 0 13 * FRI", n=4)) == [
        "2026-01-02",
        "2026-01-09",
        "2026-01-13",
        "2026-01-16",
    ]
    # A day-of-month starting with "*" is unrestricted: then both must match.
    # Odd days that are Mondays: Jan 5, 19; Jan 12, 26 and Feb 2 are even; Feb 9.
    assert days(cron("0 0 */2 * MON", n=3)) == ["2026-01-05", "2026-01-19", "2026-02-09"]
    assert days(cron("0 0 * * MON", n=2)) == ["2026-01-05", "2026-01-12"]
    assert days(cron("0 0 1 * *", n=2)) == ["2026-02-01", "2026-03-01"]


def test_last_day_of_month() -> None:
    assert days(cron("0 12 L * *", n=3)) == ["2026-01-31", "2026-02-28", "2026-03-31"]
    assert days(cron("0 12 L 2 *", n=3)) == ["2026-02-28", "2027-02-28", "2028-02-29"]
    assert days(cron("0 12 15,L * *", n=3)) == ["2026-01-15", "2026-01-31", "2026-02-15"]


def test_six_fields_lead_with_seconds() -> None:
    assert cron("*/20 * * * * *", n=3) == [
        "2026-01-01T00:00:20.000Z",
        "2026-01-01T00:00:40.000Z",
        "2026-01-01T00:01:00.000Z",
    ]
    assert cron("30 0 12 * * *", n=1) == ["2026-01-01T12:00:30.000Z"]


@pytest.mark.parametrize(
    ("alias", "expansion"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ],
)
def test_aliases(alias: str, expansion: str) -> None:
    assert cron(alias, n=3) == cron(expansion, n=3)
    assert cron(alias.upper(), n=3) == cron(expansion, n=3)


def test_strictly_after_and_millisecond_inputs() -> None:
    spec = compile_spec({"cron": "* * * * *"}, schedule_id="s")
    at = parse_instant("2026-01-01T00:01:00Z")
    assert spec.next_after(at - 1) == at
    assert spec.next_after(at) == at + 60_000
    assert spec.next_after(at + 999) == at + 60_000


def test_the_end_of_the_calendar_is_exhaustion_not_a_crash() -> None:
    spec = compile_spec({"cron": "0 0 29 2 *"}, schedule_id="s")
    assert spec.next_after(parse_instant("9996-03-01T00:00:00Z")) is None
    zoned = compile_spec({"cron": "0 0 29 2 *", "tz": "Europe/Paris"}, schedule_id="s")
    assert zoned.next_after(parse_instant("9996-03-01T00:00:00Z")) is None


def test_schedules_with_the_same_expression_share_one_compiled_table() -> None:
    a = compile_spec({"cron": "*/5 9-17 * * 1-5"}, schedule_id="a")
    b = compile_spec({"cron": "*/5 9-17 * * 1-5", "tz": "Europe/Rome"}, schedule_id="b")
    assert isinstance(a, CronSpec) and isinstance(b, CronSpec)
    assert a.table is b.table
    h1 = compile_spec({"cron": "H * * * *"}, schedule_id="x")
    h2 = compile_spec({"cron": "H * * * *"}, schedule_id="x")
    assert isinstance(h1, CronSpec) and isinstance(h2, CronSpec) and h1.table is h2.table


# --- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"cron": "0 25 * * *"}, "spec.cron: field 2 (hour) '25' out of range 0-23"),
        ({"cron": "61 0 0 * * *"}, "spec.cron: field 1 (second) '61' out of range 0-59"),
        ({"cron": "0 0 0 * *"}, "spec.cron: field 3 (day-of-month) '0' out of range 1-31"),
        ({"cron": "0 0 * 13 *"}, "spec.cron: field 4 (month) '13' out of range 1-12"),
        ({"cron": "0 0 * * 8"}, "spec.cron: field 5 (day-of-week) '8' out of range 0-7"),
        ({"cron": "0 0 * * MOX"}, "spec.cron: field 5 (day-of-week) 'MOX' is not a number"),
        ({"cron": "*/0 * * * *"}, "spec.cron: field 1 (minute) '*/0': step must be"),
        ({"cron": "0 5-2 * * *"}, "spec.cron: field 2 (hour) '5-2': range start after its end"),
        ({"cron": "0 L * * *"}, "spec.cron: field 2 (hour) 'L' is only allowed in day-of-month"),
        ({"cron": "1,,2 * * * *"}, "spec.cron: field 1 (minute) '1,,2' has an empty item"),
        ({"cron": "0 0 * *"}, "spec.cron: '0 0 * *' has 4 fields"),
        ({"cron": "@reboot"}, "spec.cron: unknown alias '@reboot'"),
        ({"cron": "0 0 31 2 *"}, "spec.cron: field 3 (day-of-month) '31' never occurs"),
        ({"cron": 5}, "spec.cron: expected a string"),
        ({"cron": "0 0 * * *", "tz": "Nowhere/Town"}, "spec.tz: unknown time zone 'Nowhere/Town'"),
        ({"cron": "0 0 * * *", "tz": 3}, "spec.tz: expected an IANA zone name"),
        ({"cron": "0 0 * * *", "tzz": "UTC"}, "spec.tzz: not a field of a cron spec"),
        ({"every": "5x"}, "spec.every: '5x' is not a duration"),
        ({"every": "0s"}, "spec.every: '0s': the shortest interval is 1s"),
        ({"every": "1m", "anchor": "yesterday"}, "spec.anchor: 'yesterday' is not an RFC 3339"),
        ({"at": "2026-12-04T14:05:00"}, "spec.at: '2026-12-04T14:05:00' has no UTC offset"),
        ({"at": 1234}, "spec.at: expected an RFC 3339 instant"),
        ({"cron": "* * * * *", "every": "1m"}, "spec: needs exactly one of cron, every, at"),
        ({}, "spec: needs exactly one of cron, every, at, rrule, business_day, any (found none)"),
    ],
)
def test_bad_specs_name_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as caught:
        compile_spec(spec, schedule_id="s")
    assert str(caught.value).startswith(message)


def test_zero_day_of_month_with_weekdays_is_still_satisfiable() -> None:
    # 30 February never exists, but day-of-week widens it (either may match).
    assert days(cron("0 0 30 2 MON", n=2)) == ["2026-02-02", "2026-02-09"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dst": {"gap": "jump"}}, "dst.gap: 'jump' is not one of shift, skip"),
        ({"dst": {"fold": 2}}, "dst.fold: 2 is not one of once, twice"),
        ({"dst": {"gaps": "skip"}}, "dst.gaps: unknown field"),
        ({"dst": "shift"}, "dst: expected an object"),
        ({"spread_window_s": -1}, "spread.window_s: -1 is outside"),
        ({"spread_window_s": "900"}, "spread.window_s: expected whole seconds"),
        ({"spread_window_s": True}, "spread.window_s: expected whole seconds"),
        ({"start_ms": 10, "end_ms": 5}, "end: is before start"),
        ({"start_ms": "2026"}, "start: expected epoch milliseconds"),
        ({"schedule_id": 7}, "id: expected a string"),
    ],
)
def test_bad_options_name_the_field(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"schedule_id": "s", **kwargs}
    with pytest.raises(SpecError) as caught:
        compile_spec({"cron": "0 0 * * *"}, **args)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize("spec", [None, [1, 2], "0 0 * * *", 3.5])
def test_a_spec_that_is_not_an_object_is_a_spec_error(spec: Any) -> None:
    with pytest.raises(SpecError, match=r"^spec: expected an object"):
        compile_spec(spec, schedule_id="s")


# --- every, at, bounds -----------------------------------------------------------------


def test_every_without_anchor_is_anchored_at_the_epoch() -> None:
    spec = compile_spec({"every": "90s"}, schedule_id="s")
    assert spec.kind == "every"
    t = parse_instant("2026-01-01T00:00:10Z")
    first = spec.next_after(t)
    assert first is not None and first % 90_000 == 0 and 0 < first - t <= 90_000
    # Asking from anywhere (a restart) lands on the same grid.
    assert spec.next_after(first - 1) == first
    assert spec.next_after(first) == first + 90_000


def test_every_with_an_anchor_starts_at_the_anchor() -> None:
    spec = compile_spec({"every": "1h30m", "anchor": "2026-01-01T09:00:00Z"}, schedule_id="s")
    assert take(spec, "2025-12-01T00:00:00Z", 3) == [
        "2026-01-01T09:00:00.000Z",
        "2026-01-01T10:30:00.000Z",
        "2026-01-01T12:00:00.000Z",
    ]
    assert take(spec, "2026-01-01T10:30:00Z", 1) == ["2026-01-01T12:00:00.000Z"]


@given(
    period_s=st.integers(1, 10**6),
    anchor_ms=st.integers(-(10**12), 10**13),
    offset_ms=st.integers(0, 10**7),
    start_ms=st.none() | st.integers(-(10**12), 10**13),
    end_ms=st.none() | st.integers(-(10**12), 10**13),
    after_ms=st.integers(-(10**12), 10**13),
)
def test_every_s_own_next_after_is_the_bounded_spec_s(
    period_s: int,
    anchor_ms: int,
    offset_ms: int,
    start_ms: int | None,
    end_ms: int | None,
    after_ms: int,
) -> None:
    # EverySpec spells BoundedSpec.next_after out for speed: the same answers.
    spec = EverySpec(period_s, anchor_ms, offset_ms, start_ms, end_ms)
    assert spec.next_after(after_ms) == BoundedSpec.next_after(spec, after_ms)


def test_at_fires_once() -> None:
    spec = compile_spec({"at": "2026-12-04T14:05:00+01:00"}, schedule_id="s")
    assert spec.kind == "at"
    assert take(spec, T0, 5) == ["2026-12-04T13:05:00.000Z"]
    assert spec.next_after(parse_instant("2026-12-04T13:05:00Z")) is None


def test_start_and_end_are_inclusive_bounds_on_fires() -> None:
    start = parse_instant("2026-01-01T00:10:00Z")
    end = parse_instant("2026-01-01T00:30:00Z")
    spec = compile_spec({"cron": "*/10 * * * *"}, schedule_id="s", start_ms=start, end_ms=end)
    assert take(spec, T0, 9) == [
        "2026-01-01T00:10:00.000Z",
        "2026-01-01T00:20:00.000Z",
        "2026-01-01T00:30:00.000Z",
    ]


def test_bounds_apply_to_the_spread_fires() -> None:
    from actors.timespec import spread_offset_ms

    offset = spread_offset_ms("s", 600)
    assert offset > 0
    nominal = parse_instant("2026-01-01T01:00:00Z")
    spec = compile_spec(
        {"cron": "0 * * * *"}, schedule_id="s", spread_window_s=600, end_ms=nominal + offset
    )
    assert spec.next_after(nominal - 1) == nominal + offset  # end is inclusive
    assert spec.next_after(nominal + offset) is None
    late_start = compile_spec(
        {"cron": "0 * * * *"}, schedule_id="s", spread_window_s=600, start_ms=nominal + 1
    )
    assert late_start.next_after(0) == nominal + offset  # the shifted fire is >= start


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("5m", 300), ("1h30m", 5400), ("1d", 86_400), ("2w", 1_209_600), ("1H", 3600)],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "90", "1.5h", "30m1h", "1h1h", "-5s", "0s", "5 minutes"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(SpecError):
        parse_duration_s(text)


def test_every_day_keeps_time_of_day_in_utc_not_wall_time() -> None:
    """``every 1d`` is an interval: 24 h of real time, whatever the zones do."""
    spec = compile_spec({"every": "1d", "anchor": "2026-03-07T12:00:00Z"}, schedule_id="s")
    got = take(spec, "2026-03-07T00:00:00Z", 3)
    hours = {datetime.fromisoformat(g).astimezone(UTC).hour for g in got}
    assert hours == {12}
