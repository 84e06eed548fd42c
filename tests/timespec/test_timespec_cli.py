"""``kafkron next``: the user's "when will it run?" tool."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from actors.cli import EXIT_OK, EXIT_USAGE, next_cmd
from tests.kit.paths import REPO


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    parser = argparse.ArgumentParser(prog="kafkron")
    next_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["next", *argv])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_cron_across_spring_forward_with_local_times(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(
        [
            "30 2 * * *",
            "--tz",
            "America/New_York",
            "--from",
            "2026-03-07T00:00:00Z",
            "-n",
            "3",
            "--local",
        ],
        capsys,
    )
    assert code == EXIT_OK
    assert lines == [
        "2026-03-07T07:30:00.000Z  2026-03-07T02:30:00.000-05:00 EST",
        "2026-03-08T07:00:00.000Z  2026-03-08T03:00:00.000-04:00 EDT",
        "2026-03-09T06:30:00.000Z  2026-03-09T02:30:00.000-04:00 EDT",
    ]


def test_json_spec_with_a_fold_policy(capsys: pytest.CaptureFixture[str]) -> None:
    spec = '{"cron": "30 1 * * *", "tz": "America/New_York", "dst": {"fold": "twice"}}'
    code, lines, _ = run([spec, "--from", "2026-10-31T12:00:00Z", "-n", "3"], capsys)
    assert code == EXIT_OK
    assert lines == [
        "2026-11-01T05:30:00.000Z",
        "2026-11-01T06:30:00.000Z",
        "2026-11-02T06:30:00.000Z",
    ]


def test_a_whole_upsert_command_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    command = (
        '{"v": 1, "type": "schedule.upsert", "id": "invoice-nightly", '
        '"spec": {"cron": "0 0 * * *"}, "spread": {"window_s": 900}, '
        '"end": "2026-01-03T00:00:00Z"}'
    )
    code, lines, err = run([command, "--from", "2025-12-31T12:00:00Z", "-n", "5"], capsys)
    assert code == EXIT_OK
    assert len(lines) == 2  # Jan 1 and Jan 2, each moved by the same offset; end stops Jan 3
    assert lines[0][11:] == lines[1][11:] and lines[0] > "2026-01-01T00:00:00.000Z"
    assert "exhausted" in err


def test_every_and_at_forms(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(["every 90s", "--from", "2026-01-01T00:00:00Z", "-n", "2"], capsys)
    assert (code, lines) == (EXIT_OK, ["2026-01-01T00:01:30.000Z", "2026-01-01T00:03:00.000Z"])
    code, lines, _ = run(["1h30m", "--from", "2026-01-01T00:00:00Z", "-n", "1"], capsys)
    assert (code, lines) == (EXIT_OK, ["2026-01-01T01:30:00.000Z"])
    code, lines, err = run(["2026-12-04T14:05:00Z", "--from", "2026-01-01T00:00:00Z"], capsys)
    assert (code, lines) == (EXIT_OK, ["2026-12-04T14:05:00.000Z"])
    assert "exhausted" in err


def test_h_needs_an_id_and_is_stable_with_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run(["H H * * *"], capsys)
    assert code == EXIT_USAGE and lines == [] and "--id" in err
    argv = ["H H * * *", "--id", "invoice-nightly", "--from", "2026-01-01T00:00:00Z", "-n", "2"]
    first = run(argv, capsys)
    assert first[0] == EXIT_OK and len(first[1]) == 2
    assert run(argv, capsys)[1] == first[1]


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["0 25 * * *"], "spec.cron: field 2 (hour) '25' out of range 0-23"),
        (["0 0 * * *", "--tz", "Mars/Olympus"], "spec.tz: unknown time zone"),
        (["every 90s", "--tz", "Mars/Olympus"], "spec.tz: unknown time zone"),
        (["0 0 * * *", "--from", "tomorrow"], "'tomorrow' is not an RFC 3339 instant"),
        (["{not json"], "SPEC looks like JSON"),
        (['{"cron": "0 0 * * *", "dst": {"gap": "jump"}}'], "dst.gap"),
        (["0 0 * * *", "-n", "0"], "-n must be at least 1"),
    ],
)
def test_bad_input_exits_2_with_the_reason(
    argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, err = run(argv, capsys)
    assert code == EXIT_USAGE
    assert lines == []
    assert reason in err


def test_default_from_is_now(capsys: pytest.CaptureFixture[str]) -> None:
    import time

    before_ms = time.time_ns() // 1_000_000
    code, lines, _ = run(["* * * * * *", "-n", "1"], capsys)
    assert code == EXIT_OK
    from topics.timefmt import parse_instant

    fire_ms = parse_instant(lines[0])
    assert before_ms < fire_ms <= before_ms + 60_000


def test_the_installed_command_line() -> None:
    root = REPO
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "actors.cli",
            "next",
            "@daily",
            "--from",
            "2026-01-01T00:00:00Z",
            "-n",
            "2",
        ],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )
    assert done.returncode == EXIT_OK, done.stderr
    assert done.stdout.splitlines() == ["2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"]
    help_text = subprocess.run(
        [sys.executable, "-m", "actors.cli", "next", "--help"],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    ).stdout
    assert "examples:" in help_text and "--tz America/New_York" in help_text
