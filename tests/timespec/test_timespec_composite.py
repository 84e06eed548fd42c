"""Several specs, excluded days, adjustment, RRULEs and business days: worked cases,
the refusals, and the same spec through the command decoder (docs/DESIGN.md §5.6)."""

from __future__ import annotations

import pytest

from actors.timespec import SpecError, compile_spec
from topics.codec import dumps, loads
from topics.command_builders import InvalidCommand, schedule_upsert
from topics.command_parts import AnyOf, BusinessDay, Cron, Days, Every, RRule, SpecJson
from topics.commands import Rejection, decode_command
from topics.timefmt import format_ms, parse_instant

UK = {
    "tz": "Europe/London",
    "dates": ["2026-12-25", "2026-12-28", "2027-01-01"],
    "weekdays": ["SAT", "SUN"],
}


def fires(spec: dict[str, object], start: str, n: int) -> list[str]:
    compiled = compile_spec(spec, schedule_id="s")
    out, t = [], parse_instant(start)
    for _ in range(n):
        nxt = compiled.next_after(t)
        if nxt is None:
            break
        out.append(format_ms(nxt))
        t = nxt
    return out


def test_two_specs_merge_and_an_instant_of_both_fires_once() -> None:
    spec = {"any": [{"cron": "0 */6 * * *"}, {"every": "4h"}]}
    assert fires(spec, "2026-06-01T00:00:00Z", 6) == [
        "2026-06-01T04:00:00.000Z",
        "2026-06-01T06:00:00.000Z",
        "2026-06-01T08:00:00.000Z",
        "2026-06-01T12:00:00.000Z",  # both: once
        "2026-06-01T16:00:00.000Z",
        "2026-06-01T18:00:00.000Z",
    ]


@pytest.mark.parametrize(
    ("adjust", "expected"),
    [
        # 25 Oct 2026 is a Sunday, 31 Oct a Saturday, 25 Dec a holiday (Friday).
        ("skip", ["2026-11-25T06:00:00.000Z", "2026-12-31T06:00:00.000Z"]),
        (
            "next_business_day",
            ["2026-10-26T06:00:00.000Z", "2026-11-02T06:00:00.000Z", "2026-11-25T06:00:00.000Z"],
        ),
        (
            "previous_business_day",
            ["2026-10-23T05:00:00.000Z", "2026-10-30T06:00:00.000Z", "2026-11-25T06:00:00.000Z"],
        ),
        (
            "modified_following",
            ["2026-10-26T06:00:00.000Z", "2026-10-30T06:00:00.000Z", "2026-11-25T06:00:00.000Z"],
        ),
    ],
)
def test_a_fixed_time_fire_on_an_excluded_day_is_adjusted(adjust: str, expected: list[str]) -> None:
    spec = {
        "any": [{"cron": "0 6 25,31 * *"}],
        "tz": "Europe/London",
        "exclude": [{"calendar": UK}],
        "adjust": adjust,
    }
    got = fires(spec, "2026-10-01T00:00:00Z", len(expected))
    assert got == expected


def test_the_25th_falls_back_to_christmas_eve() -> None:
    spec = {
        "any": [{"cron": "0 6 25 * *"}],
        "tz": "Europe/London",
        "exclude": [{"calendar": UK}],
        "adjust": "previous_business_day",
    }
    assert fires(spec, "2026-12-01T00:00:00Z", 1) == ["2026-12-24T06:00:00.000Z"]


def test_an_interval_on_an_excluded_day_is_skipped_not_moved() -> None:
    spec = {
        "any": [{"every": "1m"}],
        "exclude": [{"calendar": {"weekdays": ["SAT", "SUN"]}}],
        "adjust": "next_business_day",
    }
    # Friday 2026-06-05 23:59 UTC, then Monday 00:00: the weekend's minutes are gone.
    assert fires(spec, "2026-06-05T23:58:00Z", 2) == [
        "2026-06-05T23:59:00.000Z",
        "2026-06-08T00:00:00.000Z",
    ]


def test_the_last_business_day_follows_the_holidays() -> None:
    spec = {
        "any": [{"business_day": -1, "time": "18:00"}],
        "tz": "Europe/London",
        "exclude": [{"calendar": {**UK, "dates": ["2026-12-31"]}}],
    }
    assert fires(spec, "2026-11-01T00:00:00Z", 3) == [
        "2026-11-30T18:00:00.000Z",
        "2026-12-30T18:00:00.000Z",  # the 31st is excluded
        "2027-01-29T18:00:00.000Z",
    ]


def test_the_rrule_of_the_last_weekday_is_in_its_zone() -> None:
    spec = {
        "rrule": "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
        "dtstart": "2026-01-01T18:00:00",
        "tz": "Europe/London",
    }
    assert fires(spec, "2027-02-01T00:00:00Z", 2) == [
        "2027-02-26T18:00:00.000Z",
        "2027-03-31T17:00:00.000Z",  # BST
    ]


def test_an_exhausted_rrule_is_exhausted() -> None:
    spec = {"rrule": "FREQ=DAILY;COUNT=2", "dtstart": "2026-01-01T09:00:00"}
    assert fires(spec, "2025-12-31T00:00:00Z", 5) == [
        "2026-01-01T09:00:00.000Z",
        "2026-01-02T09:00:00.000Z",
    ]


def test_everything_excluded_is_exhausted_not_a_hang() -> None:
    spec = {"any": [{"cron": "0 9 * * *"}], "exclude": [{"cron": "0 0 * * *"}]}
    assert fires(spec, "2026-01-01T00:00:00Z", 1) == []


def test_spread_and_bounds_apply_to_the_merged_fires() -> None:
    spec = {"any": [{"cron": "0 9 * * *"}], "exclude": [{"calendar": {"weekdays": ["SUN"]}}]}
    compiled = compile_spec(
        spec,
        schedule_id="s",
        start_ms=parse_instant("2026-06-06T00:00:00Z"),
        end_ms=parse_instant("2026-06-08T09:00:00Z"),
    )
    first = compiled.next_after(0)
    assert first == parse_instant("2026-06-06T09:00:00Z")
    second = compiled.next_after(first)
    assert second == parse_instant("2026-06-08T09:00:00Z")  # Sunday the 7th excluded
    assert compiled.next_after(second) is None


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"any": []}, "spec.any: expected a list of specs"),
        ({"any": [{"cron": "0 25 * * *"}]}, "spec.any[0].cron:"),
        ({"any": [{"any": [{"cron": "* * * * *"}]}]}, "spec.any[0]: an any spec cannot hold"),
        ({"any": [{"every": "1h"}], "adjust": "following"}, "spec.adjust: 'following' is not one"),
        ({"any": [{"every": "1h"}], "exclude": ["a/b"]}, "spec.exclude[0]: 'a/b': a calendar name"),
        (
            {"any": [{"every": "1h"}], "exclude": [{"calendar": {"dates": ["2026-02-30"]}}]},
            "spec.exclude[0].calendar.dates[0]: '2026-02-30' is not a date",
        ),
        (
            {"any": [{"every": "1h"}], "exclude": [{"calendar": {"tz": "Mars/Base"}}]},
            "spec.exclude[0].calendar.tz: unknown time zone",
        ),
        ({"any": [{"every": "1h"}], "exclude": [{"calendar": {}}]}, "holds no day"),
        ({"rrule": "FREQ=DAILY"}, "spec.dtstart: required"),
        ({"rrule": "FREQ=SOMETIMES", "dtstart": "2026-01-01T00:00:00"}, "spec.rrule:"),
        ({"rrule": "FREQ=DAILY", "dtstart": "2026-01-01T00:00:00Z"}, "has an offset"),
        (
            {"rrule": "DTSTART:20260101T000000\nRRULE:FREQ=DAILY", "dtstart": "2026-01-01T00:00"},
            "one RRULE",
        ),
        ({"business_day": 0, "time": "09:00"}, "spec.business_day: expected 1 to 23"),
        ({"business_day": 1, "time": "25:00"}, "spec.time:"),
    ],
)
def test_refusals_name_the_field(spec: dict[str, object], reason: str) -> None:
    with pytest.raises(SpecError) as caught:
        compile_spec(spec, schedule_id="s")
    assert reason in str(caught.value)


def _upsert(spec: object) -> bytes:
    return dumps(
        {"v": 1, "type": "schedule.upsert", "id": "payroll", "spec": spec, "job": {"name": "p.r"}}
    )


def test_the_decoder_takes_the_new_forms_and_rejects_with_the_member_path() -> None:
    spec = {
        "any": [{"cron": "0 6 25 * *"}],
        "tz": "Europe/London",
        "exclude": [{"calendar": UK}],
        "adjust": "previous_business_day",
    }
    command = decode_command(b"payroll", _upsert(spec), parse_instant("2026-12-01T00:00:00Z"))
    assert not isinstance(command, Rejection)
    assert command.compiled.next_after(parse_instant("2026-12-01T00:00:00Z")) == parse_instant(
        "2026-12-24T06:00:00Z"
    )
    bad = decode_command(b"payroll", _upsert({"any": [{"cron": "0 6 32 * *"}]}), 0)
    assert isinstance(bad, Rejection)
    assert bad.reason.startswith("spec.any[0].cron:")
    typo = decode_command(b"payroll", _upsert({"any": [{"cron": "0 6 * * *"}], "exlcude": []}), 0)
    assert isinstance(typo, Rejection)
    assert "did you mean 'exclude'" in typo.reason


def test_the_client_parts_write_the_wire_spec() -> None:
    spec = AnyOf(
        [
            Cron("0 6 25 * *"),
            RRule("FREQ=WEEKLY;BYDAY=MO", "2026-01-05T08:00:00"),
            BusinessDay(-1, "18:00"),
        ],
        exclude=[
            Days(tz="Europe/London", dates=("2026-12-25",), weekdays=("SAT", "SUN")),
            Every("1h"),
        ],
        adjust="next_business_day",
        tz="Europe/London",
    )
    record = schedule_upsert("payroll", spec, "p.r")
    assert loads(record.value)["spec"] == {
        "any": [
            {"cron": "0 6 25 * *"},
            {"rrule": "FREQ=WEEKLY;BYDAY=MO", "dtstart": "2026-01-05T08:00:00"},
            {"business_day": -1, "time": "18:00"},
        ],
        "exclude": [
            {
                "calendar": {
                    "tz": "Europe/London",
                    "dates": ["2026-12-25"],
                    "weekdays": ["SAT", "SUN"],
                }
            },
            {"every": "1h"},
        ],
        "adjust": "next_business_day",
        "tz": "Europe/London",
    }
    with pytest.raises(InvalidCommand) as caught:
        schedule_upsert("payroll", SpecJson({"any": [{"cron": "0 6 * * *"}], "adjust": "x"}), "p.r")
    assert caught.value.field == "spec.adjust"
