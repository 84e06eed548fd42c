"""A run limit and a timed pause across a scheduler killed with SIGKILL (real broker).

- ``max_runs`` 6, every second: the scheduler is killed after the first runs; the
  next owner goes on from the count in the changelog and stops at the limit. Exactly
  six occurrences ever fire, each ``(run_id, attempt)`` once, and `kafkron ls` says
  ``completed (max_runs 6/6)``.
- ``pause --until``: the scheduler is killed while the schedule is paused; the next
  owner restores the pause, arms its end and resumes it there by itself, once: nothing
  fires while paused, what came due meanwhile fires once (misfire ``run_once`` within
  its grace, overlap ``allow``), then it goes on every second.
docs/DESIGN.md §6.8.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from actors.views.tail import read_to_end
from tests.kit.cli import cli
from tests.kit.worker import SchedulerProcess, WorkerProcess, now_ms, wait_for_results
from topics.messages import Run, parse_run
from topics.names import Settings, TopicKind
from topics.timefmt import parse_instant


def _env(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    monkeypatch.setenv("KAFKRON_NAMESPACE", settings.namespace)
    monkeypatch.setenv("KAFKRON_BOOTSTRAP", settings.bootstrap)


def _row(capsys: pytest.CaptureFixture[str], schedule_id: str) -> dict[str, object]:
    code, out, err = cli(capsys, "ls", "--json")
    assert code == 0, err
    row: dict[str, object] = next(r for r in json.loads(out) if r["id"] == schedule_id)
    return row


def _wait_state(
    capsys: pytest.CaptureFixture[str], schedule_id: str, prefix: str, timeout_s: float
) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        state = str(_row(capsys, schedule_id).get("state"))
        if state.startswith(prefix) or time.monotonic() > deadline:
            return state
        time.sleep(0.3)


def _runs(settings: Settings) -> list[tuple[Run, int]]:
    records = asyncio.run(read_to_end(settings, settings.topic(TopicKind.RUNS)))
    return [(parse_run(r.value), r.timestamp_ms) for r in records if r.value is not None]


def _kill(scheduler: SchedulerProcess) -> None:
    scheduler.signal(signal.SIGKILL)
    scheduler.proc.wait(timeout=30)


def test_max_runs_fires_exactly_that_many_across_a_takeover(
    kafka_settings: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _env(monkeypatch, kafka_settings)
    scheduler = SchedulerProcess(kafka_settings, tmp_path)
    worker = WorkerProcess(kafka_settings, tmp_path, "w1")
    children = [scheduler, worker]
    try:
        add = ("schedule", "add", "limited", "--every", "1s", "--max-runs", "6")
        assert cli(capsys, *add, "--job", "test.noop", "--overlap", "allow")[0] == 0
        asyncio.run(wait_for_results(kafka_settings, lambda rs: len(rs) >= 2, workers=children))
        _kill(scheduler)
        successor = SchedulerProcess(kafka_settings, tmp_path, "scheduler-2")
        children.append(successor)
        state = _wait_state(capsys, "limited", "completed", 120)
        assert state == "completed (max_runs 6/6)"
        asyncio.run(
            wait_for_results(kafka_settings, lambda rs: len(rs) >= 6, workers=[worker, successor])
        )
        time.sleep(3)  # a seventh would have fired by now
    finally:
        for child in children:
            child.stop()
    runs = _runs(kafka_settings)
    assert len({run.run_id for run, _ in runs if run.attempt == 1}) == 6
    counts = Counter((run.run_id, run.attempt) for run, _ in runs)
    assert [key for key, n in counts.items() if n > 1] == []


def test_a_pause_until_resumes_once_on_the_next_owner_after_a_kill(
    kafka_settings: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _env(monkeypatch, kafka_settings)
    scheduler = SchedulerProcess(kafka_settings, tmp_path)
    worker = WorkerProcess(kafka_settings, tmp_path, "w1")
    children = [scheduler, worker]
    try:
        add = ("schedule", "add", "paused-tick", "--every", "1s", "--job", "test.noop")
        assert cli(capsys, *add, "--overlap", "allow")[0] == 0
        asyncio.run(wait_for_results(kafka_settings, lambda rs: len(rs) >= 3, workers=children))
        pause = ("schedule", "pause", "paused-tick", "--until", "12s", "--note", "failover")
        assert cli(capsys, *pause)[0] == 0
        assert _wait_state(capsys, "paused-tick", "paused", 30).startswith("paused until ")
        _kill(scheduler)
        successor = SchedulerProcess(kafka_settings, tmp_path, "scheduler-2")
        children.append(successor)
        pause_doc = _row(capsys, "paused-tick")["pause"]
        assert isinstance(pause_doc, dict)
        at_ms, until_ms = parse_instant(pause_doc["at"]), parse_instant(pause_doc["until"])
        assert _wait_state(capsys, "paused-tick", "active", 120) == "active"
        resumed_ms = now_ms()
        later = wait_for_results(
            kafka_settings,
            lambda rs: any(r.scheduled_ms > resumed_ms + 2_000 for r in rs),
            workers=[worker, successor],
        )
        asyncio.run(later)
    finally:
        for child in children:
            child.stop()
    runs = _runs(kafka_settings)
    firsts = {run.scheduled_ms: appended for run, appended in runs if run.attempt == 1}
    # Nothing while paused (200 ms for a fire begun before the pause was applied).
    assert not [s for s, appended in firsts.items() if at_ms + 200 < appended < until_ms]
    due = [s for s in firsts if at_ms < s <= until_ms]
    assert len(due) >= 2 and all(firsts[s] >= until_ms for s in due)
    # Resumed once: every instant once, none missing from the first to the last.
    assert sorted(firsts) == list(range(min(firsts), max(firsts) + 1, 1000))
    counts = Counter((run.run_id, run.attempt) for run, _ in runs)
    assert [key for key, n in counts.items() if n > 1] == []
