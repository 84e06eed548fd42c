"""`kafkron schedule` and `kafkron submit` produce valid commands to the real broker."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from actors.views.tail import Record, read_to_end
from tests.kit.cli import cli
from topics.commands import (
    Rejection,
    ScheduleDelete,
    SchedulePause,
    ScheduleResume,
    ScheduleTrigger,
    ScheduleUpsert,
    decode_command,
)
from topics.names import Settings, TopicKind


def commands_in(settings: Settings) -> list[Record]:
    records = asyncio.run(read_to_end(settings, settings.topic(TopicKind.COMMANDS)))
    return sorted(records, key=lambda r: (r.partition, r.offset))


@pytest.fixture
def namespace(kafka_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("KAFKRON_NAMESPACE", kafka_settings.namespace)
    return kafka_settings


def test_schedule_add_prints_only_the_flags_given(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(
        capsys,
        "schedule", "add", "invoice-nightly",
        "--cron", "0 0 * * *", "--tz", "Europe/London",
        "--job", "billing.invoice_nightly", "--args", '{"region": "eu"}',
        "--misfire", "catch_up", "--grace-s", "600",
        "--max-attempts", "3", "--non-retryable", "AccountDeleted",
        "--spread-s", "60", "--timeout-s", "120", "--overlap", "buffer_one",
        "--print",
    )  # fmt: skip
    assert code == 0
    assert json.loads(out) == {
        "v": 1,
        "type": "schedule.upsert",
        "id": "invoice-nightly",
        "spec": {"cron": "0 0 * * *", "tz": "Europe/London"},
        "job": {"name": "billing.invoice_nightly", "args": {"region": "eu"}},
        "misfire": {"policy": "catch_up", "grace_s": 600},
        "overlap": "buffer_one",
        "spread": {"window_s": 60},
        "retry": {"max_attempts": 3, "non_retryable": ["AccountDeleted"]},
        "timeout_s": 120,
    }


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["schedule", "add", "x", "--job", "j"], "one of the arguments --cron --every --at"),
        (["schedule", "add", "x", "--every", "5s"], "--job"),
        (
            ["schedule", "add", "x", "--every", "5s", "--cron", "* * * * *", "--job", "j"],
            "not allowed",
        ),
        (["schedule", "add", "x", "--cron", "61 * * * *", "--job", "j"], "spec.cron"),
        (
            ["schedule", "add", "x", "--cron", "0 0 * * *", "--tz", "Mars/Olympus", "--job", "j"],
            "spec.tz",
        ),
        (["schedule", "add", "x", "--every", "5s", "--tz", "UTC", "--job", "j"], "--tz"),
        (["schedule", "add", "x", "--every", "soon", "--job", "j"], "spec.every"),
        (["schedule", "add", "x", "--at", "2001-01-01T00:00:00Z", "--job", "j"], "spec.at"),
        (["schedule", "add", "x", "--every", "5s", "--job", "j", "--args", "{nope"], "--args"),
        (
            ["schedule", "add", "x", "--every", "5s", "--job", "j", "--max-attempts", "0"],
            "retry.max_attempts",
        ),
        (["schedule", "frobnicate", "x"], "invalid choice"),
        (["schedule", "pause"], "id"),
    ],
)
def test_bad_schedule_usage_exits_2_and_names_the_problem(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, *argv)
    assert code == 2
    assert says in err
    assert out == ""


def test_schedule_commands_reach_the_topic_keyed_by_id(
    namespace: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        cli(capsys, "schedule", "add", "fx-rates", "--every", "5s", "--job", "billing.fx_rates")[0]
        == 0
    )
    for action in ("pause", "resume", "trigger", "rm"):
        code, out, _ = cli(capsys, "schedule", action, "fx-rates")
        assert code == 0 and f"{namespace.namespace}.commands" in out
    records = commands_in(namespace)
    assert len(records) == 5 and {r.partition for r in records} == {records[0].partition}
    assert {r.key for r in records} == {b"fx-rates"}
    kinds = [type(decode_command(r.key, r.value, 0)) for r in records]
    assert kinds == [ScheduleUpsert, SchedulePause, ScheduleResume, ScheduleTrigger, ScheduleDelete]


def test_submit_sends_every_line_or_nothing(
    namespace: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = [
        {
            "v": 1,
            "type": "schedule.upsert",
            "id": "a",
            "spec": {"every": "1m"},
            "job": {"name": "j"},
        },
        {"v": 1, "type": "schedule.pause", "id": "b"},
    ]
    bad = {
        "v": 1,
        "type": "schedule.upsert",
        "id": "c",
        "spec": {"cron": "nope"},
        "job": {"name": "j"},
    }
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join(json.dumps(c) for c in [*good, bad]) + "\nnot json\n")
    code, _, err = cli(capsys, "submit", str(mixed))
    assert code == 2
    assert "line 3: spec.cron" in err and "line 4: not JSON" in err and "nothing was sent" in err
    assert commands_in(namespace) == []

    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(json.dumps(c) for c in good) + "\n\n"))
    code, out, _ = cli(capsys, "submit", "-")
    assert code == 0 and "sent 2 commands" in out
    records = commands_in(namespace)
    assert sorted(r.key or b"" for r in records) == [b"a", b"b"]
    assert not any(isinstance(decode_command(r.key, r.value, 0), Rejection) for r in records)


def test_submit_bad_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "submit", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "cannot read" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    code, _, err = cli(capsys, "submit", str(empty))
    assert code == 2 and "no commands" in err
    code, _, err = cli(capsys, "submit")
    assert code == 2


def test_producing_without_a_broker_fails_with_advice(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKRON_BOOTSTRAP", "127.0.0.1:1")
    code, _, err = cli(capsys, "schedule", "trigger", "x")
    assert code == 1 and "kafkron broker start" in err
