"""`kafkron schedule add --max-runs`; `kafkron schedule pause --note --until --after-current --by`
(--print: the command the flags make, decoded by the shard's own decoder)."""

from __future__ import annotations

import json
import time

import pytest

from tests.kit.cli import cli
from topics.commands import SchedulePause, ScheduleUpsert, decode_command
from topics.timefmt import parse_instant


def printed(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    code, out, err = cli(capsys, *argv, "--print")
    assert code == 0, err
    body: dict[str, object] = json.loads(out)
    return body


def test_max_runs_reaches_the_upsert(capsys: pytest.CaptureFixture[str]) -> None:
    body = printed(capsys, "schedule", "add", "welcome", "--every", "1d", "--job", "mail.welcome",
                   "--max-runs", "3")  # fmt: skip
    assert body["max_runs"] == 3
    decoded = decode_command(b"welcome", json.dumps(body).encode(), 0)
    assert isinstance(decoded, ScheduleUpsert) and decoded.max_runs == 3
    without = printed(capsys, "schedule", "add", "welcome", "--every", "1d", "--job", "j")
    assert "max_runs" not in without


def test_a_bad_max_runs_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "schedule", "add", "w", "--every", "1d", "--job", "j",
                         "--max-runs", "0", "--print")  # fmt: skip
    assert code == 2 and out == ""
    assert "--max-runs: max_runs: must be between 1 and" in err


def test_pause_with_a_note_a_duration_after_current_and_who(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before_ms = int(time.time() * 1000)
    body = printed(capsys, "schedule", "pause", "nightly", "--note", "db migration",
                   "--until", "2h", "--after-current", "--by", "ops")  # fmt: skip
    after_ms = int(time.time() * 1000)
    until_ms = parse_instant(str(body["until"]))
    assert before_ms + 7_200_000 <= until_ms <= after_ms + 7_200_000  # from the client's clock
    assert {k: v for k, v in body.items() if k != "until"} == {
        "v": 1,
        "type": "schedule.pause",
        "id": "nightly",
        "note": "db migration",
        "after_current": True,
        "by": "ops",
    }
    decoded = decode_command(b"nightly", json.dumps(body).encode(), 0)
    assert decoded == SchedulePause(
        "nightly", note="db migration", until_ms=until_ms, after_current=True, by="ops"
    )


def test_pause_until_an_instant_is_sent_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    body = printed(capsys, "schedule", "pause", "nightly", "--until", "2099-01-01T14:00:00Z",
                   "--by", "ops")  # fmt: skip
    assert body["until"] == "2099-01-01T14:00:00Z"
    assert "after_current" not in body and "note" not in body


def test_by_defaults_to_the_user_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "alice")
    assert printed(capsys, "schedule", "pause", "nightly")["by"] == "alice"

    def nobody() -> str:
        raise OSError("no user name")

    monkeypatch.setattr("getpass.getuser", nobody)
    assert printed(capsys, "schedule", "pause", "nightly") == {
        "v": 1,
        "type": "schedule.pause",
        "id": "nightly",
    }


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ["--until", "2001-01-01T00:00:00Z"],
            "--until: 2001-01-01T00:00:00.000Z is not in the future",
        ),
        (["--until", "soon"], "--until: until: 'soon' is not an RFC 3339 instant"),
        (["--note", "x" * 501], "--note: note:"),
        (["--by", ""], "--by: by:"),
    ],
)
def test_bad_pause_flags_exit_2_naming_the_flag(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "schedule", "pause", "nightly", *flags, "--print")
    assert code == 2 and out == ""
    assert says in err
