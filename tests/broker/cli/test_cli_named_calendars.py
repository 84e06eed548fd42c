"""Named calendars on a real broker (docs/DESIGN.md §5.7).

`kafkron calendar add` makes a calendar holding today and tomorrow (UTC); a schedule
that excludes it by name fires nothing while its neighbour fires, and `kafkron ls`
and `kafkron calendar show` say who names it. The scheduler is killed (SIGKILL) and,
while no scheduler runs, the calendar is edited to hold neither day: the next
scheduler applies the edit, every shard learns it from ``{ns}.calendars`` and
re-arms the schedule, which fires. Every ``(run_id, attempt)`` is on the runs topic
once, and nothing of the schedule is appended before the edit was sent.
"""

from __future__ import annotations

import asyncio
import json
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

ID = "named-holiday-tick"


def test_a_calendar_edited_while_the_scheduler_is_killed_takes_effect_on_the_next_owner(
    kafka_settings: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKRON_NAMESPACE", kafka_settings.namespace)
    monkeypatch.setenv("KAFKRON_BOOTSTRAP", kafka_settings.bootstrap)
    today = datetime.now(UTC).date()
    days = (today.isoformat(), (today + timedelta(days=1)).isoformat())  # may cross midnight
    scheduler = SchedulerProcess(kafka_settings, tmp_path)
    worker = WorkerProcess(kafka_settings, tmp_path, "w1")
    children = [scheduler, worker]
    try:
        code, _, err = cli(capsys, "calendar", "add", "hol", "--date", days[0], "--date", days[1])
        assert code == 0, err
        add = ("schedule", "add", ID, "--every", "1s", "--exclude", "hol", "--job", "test.noop")
        assert cli(capsys, *add)[0] == 0
        neighbour = ("schedule", "add", "neighbour", "--every", "1s", "--job", "test.noop")
        assert cli(capsys, *neighbour)[0] == 0
        asyncio.run(
            wait_for_results(
                kafka_settings,
                lambda rs: sum(r.schedule_id == "neighbour" for r in rs) >= 4,
                workers=children,
            )
        )
        code, out, err = cli(capsys, "calendar", "show", "hol")
        assert code == 0, err
        assert json.loads(out)["used_by"] == [ID]
        code, _, err = cli(capsys, "calendar", "rm", "hol")
        assert code != 0 and ID in err  # named by a schedule: refused, naming it
        scheduler.signal(signal.SIGKILL)
        scheduler.proc.wait(timeout=30)
        edited_ms = now_ms()
        code, _, err = cli(capsys, "calendar", "add", "hol", "--date", "2099-01-01")
        assert code == 0, err
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
        code, out, err = cli(capsys, "calendar", "ls", "--json")
        assert code == 0, err
        listed = json.loads(out)["calendars"]
        assert [(c["name"], c["calendar"]["dates"]) for c in listed] == [("hol", ["2099-01-01"])]
    finally:
        for child in children:
            child.stop()
    records = asyncio.run(read_to_end(kafka_settings, kafka_settings.topic(TopicKind.RUNS)))
    runs = [(parse_run(r.value), r.timestamp_ms) for r in records if r.value is not None]
    ours = [(run, appended) for run, appended in runs if run.schedule_id == ID]
    assert ours, "the schedule never fired after its calendar was edited"
    assert all(appended >= edited_ms for _, appended in ours)
    counts = Counter((run.run_id, run.attempt) for run, _ in runs)
    assert [key for key, n in counts.items() if n > 1] == []
