"""``kafkron next --why``: what an any spec's exclusions took away, and why
(docs/DESIGN.md §5.6)."""

from __future__ import annotations

import pytest

from tests.timespec.test_timespec_cli import run

PAYROLL = (
    '{"any": [{"cron": "0 6 25,31 * *"}], "tz": "Europe/London", '
    '"exclude": [{"calendar": {"weekdays": ["SAT", "SUN"]}}, {"cron": "0 0 25 12 *"}], '
    '"adjust": "previous_business_day"}'
)


def test_why_names_the_exclusion_and_the_move(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run([PAYROLL, "--from", "2026-10-01T00:00:00Z", "-n", "3", "--why"], capsys)
    assert code == 0, err
    # A move back comes after the fire it moved to: the walk explains each gap it
    # crosses, and Sunday the 25th is crossed after Friday the 23rd fired.
    assert lines == [
        "2026-10-23T05:00:00.000Z",
        "  not 2026-10-25T06:00:00.000Z: its day is excluded by exclude[0];"
        " moved to 2026-10-23T05:00:00.000Z (previous_business_day)",
        "2026-10-30T06:00:00.000Z",
        "  not 2026-10-31T06:00:00.000Z: its day is excluded by exclude[0];"
        " moved to 2026-10-30T06:00:00.000Z (previous_business_day)",
        "2026-11-25T06:00:00.000Z",
    ]


def test_why_counts_what_it_does_not_list(capsys: pytest.CaptureFixture[str]) -> None:
    spec = '{"any": [{"every": "1h"}], "exclude": [{"calendar": {"weekdays": ["SAT", "SUN"]}}]}'
    code, lines, err = run([spec, "--from", "2026-06-05T22:30:00Z", "-n", "2", "--why"], capsys)
    assert code == 0, err
    assert lines[0] == "2026-06-05T23:00:00.000Z"
    assert lines[1] == "  not 2026-06-06T00:00:00.000Z: its day is excluded by exclude[0]"
    assert len(lines) == 1 + 10 + 1 + 1
    assert lines[-2] == "  ... and 38 more excluded instants"
    assert lines[-1] == "2026-06-08T00:00:00.000Z"


def test_why_says_nothing_for_a_plain_spec(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(
        ["0 9 * * *", "--from", "2026-06-05T00:00:00Z", "-n", "2", "--why"], capsys
    )
    assert code == 0
    assert lines == ["2026-06-05T09:00:00.000Z", "2026-06-06T09:00:00.000Z"]
