"""`kafkron calendar add --holidays`: a country's public holidays as a calendar's dates,
read from the `holidays` package once, when the command is made (DESIGN §5.7)."""

from __future__ import annotations

import argparse

import pytest

from actors.cli.calendar_cmd import calendar_of
from actors.views.holiday_source import (
    HolidaysUnavailable,
    holiday_days,
    parse_region,
    parse_years,
)
from topics.calendar_builders import calendar_upsert

# England and Wales' bank holidays of 2026 as GOV.UK publishes them.
ENGLAND_2026 = [
    "2026-01-01",
    "2026-04-03",
    "2026-04-06",
    "2026-05-04",
    "2026-05-25",
    "2026-08-31",
    "2026-12-25",
    "2026-12-28",
]


def test_a_countrys_holidays_become_the_dates_of_a_calendar() -> None:
    days = holiday_days("GB", range(2026, 2027), subdiv="ENG", tz="Europe/London")
    assert days["tz"] == "Europe/London"
    assert set(ENGLAND_2026) <= set(days["dates"])
    assert all(d.startswith("2026-") for d in days["dates"])
    assert calendar_upsert("uk-holidays", days).body["calendar"] == days  # a valid calendar


def test_calendar_add_merges_holidays_with_the_dates_given() -> None:
    args = argparse.Namespace(
        json_days=None,
        tz="Europe/London",
        date=["2026-07-01"],
        range=[],
        weekday=["SAT", "SUN"],
        holidays="GB:ENG",
        years="2026",
    )
    calendar = calendar_of(args)
    assert "2026-07-01" in calendar["dates"] and set(ENGLAND_2026) <= set(calendar["dates"])
    assert calendar["dates"] == sorted(calendar["dates"])
    assert calendar["weekdays"] == ["SAT", "SUN"]


def test_regions_and_years_are_checked() -> None:
    assert parse_region("gb:eng") == ("GB", "ENG") and parse_region("FR") == ("FR", None)
    assert parse_years("2026-2028") == range(2026, 2029)
    with pytest.raises(ValueError, match="between 1 and 30"):
        parse_years("2026-2099")
    with pytest.raises(ValueError, match="FIRST-LAST"):
        parse_years("soon")
    with pytest.raises(HolidaysUnavailable, match="does not know"):
        holiday_days("XX", range(2026, 2027))
