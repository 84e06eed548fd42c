"""`kafkron audit` on the real broker: a scheduler, a worker and a recorder as processes.

Two every-second schedules (one redefined to every two seconds midway) run for a
while, and a third that excludes the named calendar "flip", which is edited twice
mid-window: first to hold today and tomorrow (UTC: the schedule stops), then back to
a far date (it fires again). Once the recorder has read every topic to its end, the
audit of the window accounts for every instant (exit 0), owing the calendar-naming
schedule nothing while "flip" held today. Then one run is made to vanish from the
history database, and the audit names exactly that instant as a gap (exit 1).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from actors.history.recorder import caught_up
from actors.history.store import HistoryStore
from tests.kit.cli import cli
from tests.kit.scheduler import now_ms, produce, upsert
from tests.kit.worker import ChildProcess, SchedulerProcess, WorkerProcess
from topics.names import Settings
from topics.timefmt import format_ms, parse_instant


async def wait_recorded(settings: Settings, db: Path, recorder: ChildProcess) -> None:
    for _ in range(600):
        recorder.check_alive()
        if db.exists():
            async with await HistoryStore.open(db, readonly=True) as store:
                if await caught_up(settings, store):
                    return
        await asyncio.sleep(0.2)
    raise AssertionError(f"the recorder never caught up:\n{recorder.log()}")


async def first_run(db: Path, schedule_id: str, recorder: ChildProcess) -> None:
    """Wait until the history holds a run of ``schedule_id`` (the processes are up)."""
    for _ in range(900):
        recorder.check_alive()
        if db.exists():
            with sqlite3.connect(db) as conn:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
                if (
                    "runs" in tables
                    and conn.execute(
                        "SELECT 1 FROM runs WHERE schedule_id = ?", (schedule_id,)
                    ).fetchone()
                ):
                    return
        await asyncio.sleep(0.2)
    raise AssertionError(f"no run of {schedule_id} was recorded:\n{recorder.log()}")


def flip(*dates: str) -> tuple[bytes, bytes]:
    """A ``calendar.upsert`` of "flip" holding ``dates`` (UTC)."""
    body = {"v": 1, "type": "calendar.upsert", "id": "flip", "calendar": {"dates": list(dates)}}
    return b"flip", orjson.dumps(body)


def audit(capsys: pytest.CaptureFixture[str], db: Path, *argv: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code, out, err = cli(capsys, "audit", *argv, "--settle-s", "0", "--json", "--db", str(db))
    assert out, err
    return code, json.loads(out)


async def test_audit_proves_a_window_and_names_a_vanished_run(
    kafka_settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "h.db"
    scheduler = SchedulerProcess(kafka_settings, tmp_path)
    worker = WorkerProcess(kafka_settings, tmp_path, "w1")
    recorder = ChildProcess(kafka_settings, tmp_path, "recorder", ["recorder", "--db", str(db)])
    try:
        created_ms = now_ms()
        today = datetime.now(UTC).date()
        days = (today.isoformat(), (today + timedelta(days=1)).isoformat())  # may cross midnight
        await produce(kafka_settings, [flip("2099-01-01")])
        spec = {"any": [{"every": "1s"}], "exclude": ["flip"]}
        await produce(
            kafka_settings,
            [
                (b"tick", upsert("tick")),
                (b"tock", upsert("tock")),
                (b"cal", upsert("cal", spec=spec)),
            ],
        )
        await first_run(db, "tock", recorder)
        await first_run(db, "cal", recorder)
        await asyncio.sleep(6)
        held_ms = now_ms()
        await produce(kafka_settings, [(b"tock", upsert("tock", every="2s")), flip(*days)])
        await asyncio.sleep(4)
        freed_ms = now_ms()
        await produce(kafka_settings, [flip("2099-01-01")])
        await asyncio.sleep(5)
        # The window: from after the creation to a few seconds ago (every run fired
        # by then has its result: the no-op job takes milliseconds).
        from_ms, to_ms = created_ms + 3000, now_ms() - 3000
        await asyncio.sleep(2)
        await wait_recorded(kafka_settings, db, recorder)
        window = ("--from", format_ms(from_ms), "--to", format_ms(to_ms))
        code, clean = audit(capsys, db, "--all", *window)
        assert code == 0, (clean["gaps"], held_ms, freed_ms)
        assert clean["gap_count"] == 0 and clean["schedules"] == 3
        assert clean["unknown_calendars"] == []
        assert clean["expected"] >= 15 and clean["accounted"].get("succeeded", 0) >= 15
        code, tock = audit(capsys, db, "tock", *window)
        assert code == 0
        instants = [i["at"] for i in tock["instants"]]
        assert len(instants) >= 6 and all(i["verdict"] == "accounted" for i in tock["instants"])
        seconds = [int(i[17:19]) for i in instants]
        assert any(s % 2 == 1 for s in seconds[:3])  # every second before the upsert
        assert all(s % 2 == 0 for s in seconds[-3:])  # every two seconds after it
        # The calendar-naming schedule: owed every second until "flip" held today,
        # nothing while it did, every second again once it was given back; each owed
        # instant accounted (its run), by the calendar in effect at it.
        code, cal = audit(capsys, db, "cal", *window)
        assert code == 0, cal
        owed = [parse_instant(i["at"]) for i in cal["instants"]]
        assert all(i["verdict"] == "accounted" for i in cal["instants"])
        assert any(at < held_ms for at in owed) and any(at > freed_ms + 1000 for at in owed)
        # The edits took effect when the shard wrote them, a moment after they were sent.
        assert not [at for at in owed if held_ms + 1500 < at < freed_ms]
    finally:
        recorder.stop()
        scheduler.stop()
        worker.stop()
    # A run made to vanish (its rows deleted from the history) is a gap, alone.
    vanished = tock["instants"][len(instants) // 2]["at"]
    with sqlite3.connect(db) as conn:
        deleted = conn.execute(
            "DELETE FROM runs WHERE run_id = ?", (tock["instants"][len(instants) // 2]["run_id"],)
        ).rowcount
    assert deleted == 1
    code, broken = audit(capsys, db, "--all", *window)
    assert code == 1
    assert broken["gaps"] == [{"schedule_id": "tock", "at": vanished}]
    code, out, _ = cli(capsys, "audit", "--all", *window, "--settle-s", "0", "--db", str(db))
    assert code == 1 and f"GAP  tock  {vanished}" in out
    code, out, _ = cli(capsys, "audit", "--slo", *window, "--settle-s", "0", "--db", str(db))
    assert code == 0 and "of runs started within 5 s" in out
