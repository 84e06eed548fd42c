"""The chaos run: a kill -9, a 15 s SIGSTOP and a broker restart, and the audit after it.

Runs on a broker of its own (another port, another data directory) so that the
shared local broker of the other tests stays up. Three `kafkron scheduler`
processes fire 300 schedules every second. One is killed with SIGKILL; later
another is frozen with SIGSTOP for 15 s (longer than its session: its shards move
while it believes it owns them) and resumed; later still the broker is stopped for a
few seconds and started again on the same data. Every (schedule, second) of the
window must then be in ``{ns}.runs`` exactly once (fired late, within the misfire
grace, for the seconds nobody could fire), none early.

Then the proof after the fact: a recorder reads the namespace into a history
database and `kafkron audit --all` over the window accounts for every expected
instant (exit 0, no gap). A run made to vanish from the history on purpose (its
row deleted) is then the one gap the audit names, at exactly its instant (exit 1).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from actors.history.recorder import caught_up as recorded_to_end
from actors.history.recorder import run_recorder
from actors.history.store import HistoryStore
from tests.kit.cli import cli
from tests.kit.own_broker import broker as _broker
from tests.kit.own_broker import own_broker
from tests.kit.scheduler import SchedulerProcesses, acker, check_runs, now_ms, produce, upsert
from topics.admin import create_topics
from topics.names import Settings
from topics.timefmt import format_ms

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SCHEDULES = 300
SHARDS = 3
__all__ = ["own_broker"]  # the fixture, used by name


async def _sleep_until(start_s: float, offset_s: float) -> None:
    await asyncio.sleep(max(0.0, start_s + offset_s - time.monotonic()))


@pytest.mark.timeout(1200)
async def test_chaos_fires_every_second_once_and_the_audit_accounts_for_every_instant(
    own_broker: tuple[int, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port, data_dir = own_broker
    settings = Settings(namespace=f"t-{uuid.uuid4().hex[:8]}", bootstrap=f"127.0.0.1:{port}")
    await create_topics(settings, partitions=SHARDS)
    procs = SchedulerProcesses(settings, tmp_path)
    procs.start(3)
    try:
        await procs.wait_stable(SHARDS)
        ids = [f"chaos-{i:03d}" for i in range(SCHEDULES)]
        async with acker(settings) as progress:
            await produce(settings, [(i.encode(), upsert(i)) for i in ids])
            start_s, start_ms = time.monotonic(), now_ms()
            await _sleep_until(start_s, 15)
            procs.signal(0, signal.SIGKILL)
            await _sleep_until(start_s, 30)
            procs.signal(1, signal.SIGSTOP)
            await _sleep_until(start_s, 45)
            procs.signal(1, signal.SIGCONT)
            await _sleep_until(start_s, 60)
            await asyncio.to_thread(_broker, "stop", port, data_dir)
            stopped_at = time.monotonic()
            await asyncio.sleep(5)
            await asyncio.to_thread(_broker, "start", port, data_dir)
            down_s = time.monotonic() - stopped_at
            await asyncio.sleep(15)
            window_end_ms = now_ms()
            caught_up = await progress.wait_caught_up(ids, window_end_ms, timeout_s=300)
    finally:
        codes = procs.stop_all()
    report = await check_runs(settings, ids, window_end_ms=window_end_ms)
    with capsys.disabled():  # the figures, though the audit's output below is captured
        print(report.summary(), f"broker_down_s={down_s:.1f} caught_up={caught_up}")
    assert caught_up, report.summary() + "\n" + procs.logs()
    assert report.occurrences_checked >= SCHEDULES * 60
    assert not report.duplicates, report.summary()
    assert not report.early, report.summary()
    assert not report.gaps, report.summary() + "\n" + procs.logs()
    assert codes[1:] == [0, 0], f"survivors did not shut down cleanly: {codes}\n{procs.logs()}"

    # The audit, by the command line, from a few seconds after the upserts (each
    # schedule's definition is known from its changelog record on) to the window's end.
    db = tmp_path / "history.db"
    await _record(settings, db)
    window = ("--from", format_ms(start_ms + 5_000), "--to", format_ms(window_end_ms - 5_000))
    code, clean = _audit(capsys, db, "--all", *window)
    with capsys.disabled():
        print(
            f"audit: {clean['expected']} instants, {clean['accounted']}, gaps {clean['gaps'][:5]}"
        )
    assert code == 0 and clean["gap_count"] == 0, clean["gaps"][:10]
    assert clean["schedules"] == SCHEDULES and clean["expected"] >= SCHEDULES * 60
    # One run made to vanish from the history: the audit names exactly that instant.
    with sqlite3.connect(db) as conn:
        run_id, at_ms = conn.execute(
            "SELECT run_id, scheduled_ms FROM runs WHERE schedule_id = ? AND scheduled_ms > ? "
            "ORDER BY scheduled_ms LIMIT 1",
            (ids[123], start_ms + 40_000),
        ).fetchone()
        assert conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,)).rowcount == 1
    code, broken = _audit(capsys, db, "--all", *window)
    assert code == 1
    assert broken["gaps"] == [{"schedule_id": ids[123], "at": format_ms(at_ms)}]
    assert broken["gap_count"] == 1


async def _record(settings: Settings, db: Path) -> None:
    """Record the namespace into ``db`` until the recorder has read it to its end."""
    stop = asyncio.Event()
    recording = asyncio.create_task(run_recorder(settings, db, stop))
    try:
        for _ in range(600):
            await asyncio.sleep(1)
            assert not recording.done(), recording.exception()
            if db.exists():
                async with await HistoryStore.open(db, readonly=True) as store:
                    if await recorded_to_end(settings, store):
                        return
        raise AssertionError("the recorder never read the namespace to its end")
    finally:
        stop.set()
        await recording


def _audit(capsys: pytest.CaptureFixture[str], db: Path, *argv: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code, out, err = cli(capsys, "audit", *argv, "--settle-s", "0", "--json", "--db", str(db))
    assert out, err
    return code, json.loads(out)
