"""`kafkron schedule add --start-within-s --finish-within-s` and `kafkron next` of a
command with a deadline; the console's open alerts (`actors.views.alerts`)."""

from __future__ import annotations

import json

import pytest

from actors.views.alerts import open_alerts
from tests.kit.cli import cli
from topics.alerts import Alert, AlertType, DeadlineKind
from topics.commands import ScheduleUpsert, decode_command
from topics.timefmt import parse_instant

T0 = parse_instant("2026-10-10T00:00:00Z")


def test_the_flags_reach_the_upsert_and_a_bad_one_names_itself(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = cli(capsys, "schedule", "add", "etl", "--every", "1h", "--job", "etl.load",
                         "--start-within-s", "5", "--finish-within-s", "600",
                         "--print")  # fmt: skip
    assert code == 0, err
    body = json.loads(out)
    assert body["deadline"] == {"start_within_s": 5, "finish_within_s": 600}
    decoded = decode_command(b"etl", out.encode(), 0)
    assert isinstance(decoded, ScheduleUpsert) and decoded.deadline is not None
    code, out, err = cli(capsys, "schedule", "add", "etl", "--every", "1h", "--job", "j",
                         "--start-within-s", "0", "--print")  # fmt: skip
    assert code == 2 and out == ""
    assert "--start-within-s: deadline.start_within_s: must be between 1" in err


def test_next_prints_each_fires_start_and_end_deadlines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = json.dumps(
        {
            "v": 1,
            "type": "schedule.upsert",
            "id": "etl",
            "spec": {"every": "1h", "anchor": "2026-10-10T00:00:00Z"},
            "job": {"name": "etl.load"},
            "deadline": {"start_within_s": 5, "finish_within_s": 600},
        }
    )
    code, out, err = cli(capsys, "next", command, "--from", "2026-10-10T00:30:00Z", "-n", "2")
    assert code == 0, err
    by = "  start by 2026-10-10T0{0}:00:05.000Z  end by 2026-10-10T0{0}:10:00.000Z"
    assert out.splitlines() == [
        "2026-10-10T01:00:00.000Z" + by.format(1),
        "2026-10-10T02:00:00.000Z" + by.format(2),
    ]


def _alert(run: str, kind: AlertType, deadline: DeadlineKind, at_ms: int) -> Alert:
    return Alert(kind, deadline, f"etl@{run}", "etl", None, T0, T0 + 5_000, 1, 0, at_ms, None)


def test_an_alert_is_open_until_its_recovered_record() -> None:
    alerts = [
        _alert("a", AlertType.MISSED, DeadlineKind.START, T0 + 10_000),
        _alert("b", AlertType.MISSED, DeadlineKind.START, T0 + 11_000),
        _alert("b", AlertType.MISSED, DeadlineKind.FINISH, T0 + 12_000),
        _alert("a", AlertType.RECOVERED, DeadlineKind.START, T0 + 20_000),
    ]
    shown = open_alerts(alerts, T0 + 65_000)
    assert [(o.alert.run_id, o.alert.deadline) for o in shown] == [
        ("etl@b", DeadlineKind.FINISH),
        ("etl@b", DeadlineKind.START),
    ]
    assert shown[0].late_now_ms == 60_000
