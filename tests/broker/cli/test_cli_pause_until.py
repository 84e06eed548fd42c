"""`kafkron schedule pause --until 3s` against a scheduler and a worker: it resumes by itself.

Nothing of the schedule fires while it is paused; at the end of the pause what came
due meanwhile is fired late (within the misfire grace, overlap allow) and it goes
on; `kafkron ls` says who paused it, why and until when, then that it is active.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from actors.views.tail import read_to_end
from tests.kit.cli import cli
from tests.kit.worker import SchedulerProcess, WorkerProcess, now_ms, wait_for_results
from topics.messages import parse_run
from topics.names import Settings, TopicKind
from topics.timefmt import parse_instant

ID = "pause-tick"


def _ls(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, out, err = cli(capsys, "ls", "--json")
    assert code == 0, err
    row: dict[str, object] = next(r for r in json.loads(out) if r["id"] == ID)
    return row


def _wait_ls(capsys: pytest.CaptureFixture[str], check: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        state = str(_ls(capsys).get("state"))
        if state.startswith(check) or time.monotonic() > deadline:
            return state
        time.sleep(0.3)


def test_a_pause_until_resumes_by_itself_and_fires_what_came_due(
    kafka_settings: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKRON_NAMESPACE", kafka_settings.namespace)
    monkeypatch.setenv("KAFKRON_BOOTSTRAP", kafka_settings.bootstrap)
    children = [
        SchedulerProcess(kafka_settings, tmp_path),
        WorkerProcess(kafka_settings, tmp_path, "w1"),
    ]
    try:
        add = ("schedule", "add", ID, "--every", "1s", "--job", "test.noop", "--overlap", "allow")
        assert cli(capsys, *add)[0] == 0
        asyncio.run(wait_for_results(kafka_settings, lambda rs: len(rs) >= 3, workers=children))
        code, _, err = cli(
            capsys, "schedule", "pause", ID, "--until", "3s", "--note", "db migration",
            "--by", "tester",
        )  # fmt: skip
        assert code == 0, err
        paused = _wait_ls(capsys, "paused", 30)
        assert paused.startswith("paused until ") and paused.endswith(" by tester: db migration")
        pause = _ls(capsys)["pause"]
        assert isinstance(pause, dict)
        at_ms, until_ms = parse_instant(pause["at"]), parse_instant(pause["until"])
        assert _wait_ls(capsys, "active", 30) == "active"
        resumed_ms = now_ms()
        later = wait_for_results(
            kafka_settings,
            lambda rs: any(r.scheduled_ms > resumed_ms + 2_000 for r in rs),
            workers=children,
        )
        asyncio.run(later)
    finally:
        for child in children:
            child.stop()
    records = asyncio.run(read_to_end(kafka_settings, kafka_settings.topic(TopicKind.RUNS)))
    runs = [(parse_run(r.value), r.timestamp_ms) for r in records if r.value is not None]
    firsts = {run.scheduled_ms: appended for run, appended in runs if run.attempt == 1}
    # Nothing fired while paused (the broker's LogAppendTime; 200 ms for the pause's
    # own transaction, which may still commit a fire begun before it was applied).
    assert not [s for s, appended in firsts.items() if at_ms + 200 < appended < until_ms]
    # What came due while paused fired once, late, at the end of the pause (run_once
    # within its 300 s grace, overlap allow: each of them), then every second again.
    due = [s for s in firsts if at_ms < s <= until_ms]
    assert len(due) >= 2 and all(firsts[s] >= until_ms for s in due)
    assert sorted(firsts) == list(range(min(firsts), max(firsts) + 1, 1000))
