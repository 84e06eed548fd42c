"""`kafkron calendar add`'s options, `--exclude NAME`, the builders and `next --why`'s
labels for named calendars (docs/DESIGN.md §5.7); no broker."""

from __future__ import annotations

import argparse

import pytest

from actors.cli.calendar_cmd import calendar_of
from actors.cli.next_cmd import exclusion_labels, why_lines
from actors.cli.schedule_cmd import exclusions
from actors.timespec import compile_spec
from topics.calendar_builders import calendar_delete, calendar_upsert
from topics.calendar_days import parse_calendar_days
from topics.command_builders import InvalidCommand
from topics.command_parts import AnyOf, Cron, Days
from topics.timefmt import parse_instant


def _args(**given: object) -> argparse.Namespace:
    fields: dict[str, object] = {
        "json_days": None,
        "tz": None,
        "date": [],
        "range": [],
        "weekday": [],
    }
    fields.update(given)
    return argparse.Namespace(**fields)


def test_calendar_add_options_make_the_calendar_object() -> None:
    args = _args(
        tz="Europe/London", date=["2026-12-25"], range=["2026-12-24:2027-01-01"], weekday=["SAT"]
    )
    assert calendar_of(args) == {
        "tz": "Europe/London",
        "dates": ["2026-12-25"],
        "ranges": [["2026-12-24", "2027-01-01"]],
        "weekdays": ["SAT"],
    }
    assert calendar_of(_args(json_days='{"dates": ["2026-01-01"]}')) == {"dates": ["2026-01-01"]}
    with pytest.raises(ValueError, match="FIRST:LAST"):
        calendar_of(_args(range=["2026-12-24"]))


def test_the_builders_check_the_calendar_with_the_shards_decoder() -> None:
    record = calendar_upsert("uk", {"dates": ["2026-12-25"]})
    assert record.key == b"uk" and record.body["type"] == "calendar.upsert"
    assert calendar_delete("uk").body == {"v": 1, "type": "calendar.delete", "id": "uk"}
    with pytest.raises(InvalidCommand, match=r"calendar\.dates\[0\]"):
        calendar_upsert("uk", {"dates": ["25/12/2026"]})
    with pytest.raises(InvalidCommand, match="holds no day"):
        calendar_upsert("uk", {})


def test_exclude_words_that_are_not_days_name_calendars() -> None:
    found = exclusions(["weekends", "2026-12-25", "uk-holidays", "2026-12-24..2026-12-31"], "UTC")
    assert found[0] == Days(
        tz="UTC",
        dates=("2026-12-25",),
        ranges=(("2026-12-24", "2026-12-31"),),
        weekdays=("SAT", "SUN"),
    )
    assert found[1:] == ["uk-holidays"]
    spec = AnyOf([Cron("0 9 * * *")], exclude=["uk-holidays", *found[:1]]).json()
    assert spec["exclude"][0] == "uk-holidays"


def test_next_why_names_the_calendar_that_took_an_instant_away() -> None:
    spec = {"any": [{"cron": "0 9 * * *"}], "exclude": ["uk", {"cron": "0 0 * * SUN"}]}
    days = parse_calendar_days({"dates": ["2026-12-25"]}, "calendar")
    compiled = compile_spec(spec, schedule_id="", calendars={"uk": days})
    after = parse_instant("2026-12-24T10:00:00Z")
    fire = compiled.next_after(after)
    assert fire == parse_instant("2026-12-26T09:00:00Z")
    lines = why_lines(compiled, after, fire, exclusion_labels(spec))
    assert lines == [
        "  not 2026-12-25T09:00:00.000Z: its day is excluded by exclude[0] (calendar 'uk')"
    ]
