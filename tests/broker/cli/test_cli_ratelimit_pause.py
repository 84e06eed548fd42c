"""A rate-limit pause on a real broker (docs/DESIGN.md §8.5): `kafkron ratelimit pause`
goes through a scheduler to ``{ns}.ratelimits``; the worker holds the key's runs
(their timeout still ends them, by the worker, saying the key is paused), `kafkron
ratelimit ls` and `kafkron ls` say so, and `kafkron ratelimit resume` lets the runs
start again."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from tests.kit.cli import cli
from tests.kit.worker import SchedulerProcess, WorkerProcess, marks, wait_for_results
from topics.names import Settings


def test_a_paused_key_waits_times_out_visibly_and_runs_once_resumed(
    kafka_settings: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKRON_NAMESPACE", kafka_settings.namespace)
    monkeypatch.setenv("KAFKRON_BOOTSTRAP", kafka_settings.bootstrap)
    scheduler = SchedulerProcess(kafka_settings, tmp_path)
    worker = WorkerProcess(kafka_settings, tmp_path, "w1")
    children = [scheduler, worker]
    try:
        code, _, err = cli(capsys, "ratelimit", "pause", "payments", "--note", "quota")
        assert code == 0, err
        add = ("schedule", "add", "pay", "--every", "2s", "--job", "test.sleep")
        rate = ("--rate-key", "payments", "--rate-per-s", "5", "--timeout-s", "3")
        assert cli(capsys, *add, *rate, "--args", '{"seconds": 0.05}')[0] == 0
        found = asyncio.run(
            wait_for_results(
                kafka_settings,
                lambda rs: any(r.status == "timed_out" for r in rs),
                workers=children,
            )
        )
        timed_out = next(r for r in found if r.status == "timed_out")
        assert timed_out.worker == "w1" and timed_out.error is not None  # the worker's verdict
        assert "paused until resumed (quota)" in timed_out.error["message"]
        assert not [m for m in marks(tmp_path) if m[0] == "start"]  # nothing ran
        shown = ""
        for _ in range(60):  # a run of the key in flight (not between retries) is shown
            code, out, _ = cli(capsys, "ls", "--json")
            shown = next(row for row in json.loads(out) if row["id"] == "pay")["last_outcome"]
            if "rate-limit key payments paused" in shown:
                break
            time.sleep(0.5)
        assert shown.startswith("waiting (attempt "), shown
        assert "rate-limit key payments paused until resumed (quota" in shown
        code, out, _ = cli(capsys, "ratelimit", "ls", "--json")
        paused = json.loads(out)["paused"]["payments"]
        assert (paused["note"], paused["until"], paused["holds"]) == ("quota", None, True)
        code, _, err = cli(capsys, "ratelimit", "resume", "payments")
        assert code == 0, err
        asyncio.run(
            wait_for_results(
                kafka_settings,
                lambda rs: sum(r.status == "succeeded" for r in rs) >= 2,
                workers=children,
            )
        )
        code, out, _ = cli(capsys, "ratelimit", "ls", "--json")
        assert json.loads(out) == {"paused": {}}
    finally:
        for child in children:
            child.stop()
