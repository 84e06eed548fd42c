"""Excluded days on a real broker: a schedule whose calendar excludes today fires
nothing while a neighbour fires; its calendar is edited (a re-upsert without the
day) while its scheduler is killed (kill -9), and the next scheduler restores the
edited definition and fires it every second (docs/DESIGN.md §5.6).

A calendar is inline in the spec, so an edit is a re-upsert; run ids are
``{id}@{instant}``, so the edit can only add or remove instants: every
``(run_id, attempt)`` is on the runs topic once, and nothing of the schedule is
appended before the edit.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actors.views.tail import read_to_end
from tests.kit.cli import cli
from tests.kit.worker import SchedulerProcess, WorkerProcess, now_ms, wait_for_results
from topics.messages import parse_run
from topics.names import Settings, TopicKind

ID = "holiday-tick"


def test_an_excluded_day_fires_nothing_and_an_edit_across_a_kill_rearms_it(
    kafka_settings: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKRON_NAMESPACE", kafka_settings.namespace)
    monkeypatch.setenv("KAFKRON_BOOTSTRAP", kafka_settings.bootstrap)
    today = datetime.now(UTC).date()
    # Today and tomorrow (UTC): the test may cross midnight.
    days = (today.isoformat(), (today + timedelta(days=1)).isoformat())
    scheduler = SchedulerProcess(kafka_settings, tmp_path)
    worker = WorkerProcess(kafka_settings, tmp_path, "w1")
    children = [scheduler, worker]
    try:
        excluded = ["--exclude", days[0], "--exclude", days[1]]
        add = ("schedule", "add", ID, "--every", "1s", *excluded, "--job", "test.noop")
        assert cli(capsys, *add)[0] == 0
        neighbour = ("schedule", "add", "neighbour", "--every", "1s", "--job", "test.noop")
        assert cli(capsys, *neighbour)[0] == 0
        # The neighbour fires: the shards are live and the excluded schedule is not.
        asyncio.run(
            wait_for_results(
                kafka_settings,
                lambda rs: sum(r.schedule_id == "neighbour" for r in rs) >= 4,
                workers=children,
            )
        )
        scheduler.signal(signal.SIGKILL)
        scheduler.proc.wait(timeout=30)
        edited_ms = now_ms()
        edit = ("schedule", "add", ID, "--every", "1s", "--job", "test.noop")
        assert cli(capsys, *edit)[0] == 0
        time.sleep(1)
        successor = SchedulerProcess(kafka_settings, tmp_path, "scheduler-2")
        children.append(successor)
        asyncio.run(
            wait_for_results(
                kafka_settings,
                lambda rs: sum(r.schedule_id == ID for r in rs) >= 3,
                workers=[worker, successor],
            )
        )
    finally:
        for child in children:
            child.stop()
    records = asyncio.run(read_to_end(kafka_settings, kafka_settings.topic(TopicKind.RUNS)))
    runs = [(parse_run(r.value), r.timestamp_ms) for r in records if r.value is not None]
    ours = [(run, appended) for run, appended in runs if run.schedule_id == ID]
    assert ours, "the edited schedule never fired"
    # Nothing of it before the edit: the excluded day held while the calendar did.
    assert all(appended >= edited_ms for _, appended in ours)
    # Every (run_id, attempt) once, across the kill and the edit.
    counts = Counter((run.run_id, run.attempt) for run, _ in runs)
    assert [key for key, n in counts.items() if n > 1] == []
