"""`kafkron next --max-runs N` (or a command's max_runs): the list stops after N fires."""

from __future__ import annotations

import json

import pytest

from tests.kit.cli import cli

FROM = ("--from", "2026-12-01T00:00:00Z")


def test_max_runs_stops_the_list_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "next", "0 9 * * MON", "--max-runs", "3", "-n", "10", *FROM)
    assert code == 0
    assert out.split() == [
        "2026-12-07T09:00:00.000Z",
        "2026-12-14T09:00:00.000Z",
        "2026-12-21T09:00:00.000Z",
    ]
    assert "no further fires (max_runs 3 reached)" in err
    code, out, err = cli(capsys, "next", "0 9 * * MON", "--max-runs", "3", "-n", "2", *FROM)
    assert len(out.split()) == 2 and err == ""


def test_a_commands_max_runs_counts_and_must_agree_with_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = {"spec": {"every": "1h"}, "job": {"name": "j"}, "max_runs": 2}
    code, out, _ = cli(capsys, "next", json.dumps(command), *FROM)
    assert code == 0
    assert out.split() == ["2026-12-01T01:00:00.000Z", "2026-12-01T02:00:00.000Z"]
    code, _, err = cli(capsys, "next", json.dumps(command), "--max-runs", "3", *FROM)
    assert code == 2 and "--max-runs 3 contradicts max_runs 2" in err
    code, _, err = cli(capsys, "next", "every 5m", "--max-runs", "0")
    assert code == 2 and "max_runs: must be at least 1" in err
