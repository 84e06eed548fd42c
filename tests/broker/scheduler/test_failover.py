"""Failover on the real broker: kill -9 and SIGSTOP schedulers, every second fires once.

1,000 schedules fire every second for a minute while three `kafkron scheduler`
processes share six shards. At about 20 s one is killed with SIGKILL; at about
35 s another is frozen with SIGSTOP for 15 s (longer than the session timeout,
so its shards move while it still believes it owns them: the zombie) and then
resumed. A read_committed reader of ``{ns}.runs`` must then find every
(schedule, second) of the window exactly once, none early, and no gap that the
misfire policy did not report. The history's audit of the window (a recorder's
database, `kafkron audit --all`'s code) must account for every one of them too.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from actors.history.audit import AuditSource
from actors.history.recorder import caught_up as recorded_to_end
from actors.history.recorder import run_recorder
from actors.history.store import HistoryStore
from tests.kit.scheduler import SchedulerProcesses, acker, check_runs, now_ms, produce, upsert
from topics.names import Settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SCHEDULES = 1_000
SHARDS = 6
MAX_FIRES_PER_TURN = 200


async def _sleep_until(start_s: float, offset_s: float) -> None:
    await asyncio.sleep(max(0.0, start_s + offset_s - time.monotonic()))


@pytest.mark.kafka_partitions(SHARDS)
@pytest.mark.timeout(600)
async def test_kill_and_pause_schedulers_every_second_fires_exactly_once(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    # A small bound per turn: a takeover's backlog (a session timeout of every
    # second of ~170 schedules per shard) goes out over many bounded transactions.
    procs = SchedulerProcesses(
        kafka_settings,
        tmp_path,
        session_timeout_ms=10_000,
        extra_args=("--max-fires-per-turn", str(MAX_FIRES_PER_TURN)),
    )
    procs.start(3)
    try:
        await procs.wait_stable(SHARDS)
        ids = [f"every-second-{i:04d}" for i in range(SCHEDULES)]
        async with acker(kafka_settings) as progress:
            await produce(kafka_settings, [(i.encode(), upsert(i)) for i in ids])
            start_s, start_ms = time.monotonic(), now_ms()
            await _sleep_until(start_s, 20)
            procs.signal(0, signal.SIGKILL)
            await _sleep_until(start_s, 35)
            procs.signal(1, signal.SIGSTOP)
            await _sleep_until(start_s, 50)
            procs.signal(1, signal.SIGCONT)
            await _sleep_until(start_s, 60)
            window_end_ms = now_ms()
            # The survivors settle and fire what the window still owes (late, within
            # the misfire grace); on this shared machine that can take a while.
            caught_up = await progress.wait_caught_up(ids, window_end_ms, timeout_s=180)
    finally:
        codes = procs.stop_all()
    report = await check_runs(
        kafka_settings,
        ids,
        window_end_ms=window_end_ms,
    )
    print(report.summary(), f"caught_up={caught_up}")
    print("\n".join(procs.grep("ZOMBIE") + procs.grep("dropped") + procs.grep("taken on")))
    assert report.occurrences_checked >= SCHEDULES * 50
    assert not report.duplicates, report.summary()
    assert not report.early, report.summary()
    assert not report.gaps, report.summary() + "\n" + procs.logs()
    assert codes[1:] == [0, 0], f"survivors did not shut down cleanly: {codes}\n{procs.logs()}"
    # The audit: from a few seconds after the upserts (each schedule's definition is
    # known from its changelog record on) to the window's end.
    gaps, expected = await _audit(kafka_settings, tmp_path, start_ms + 5_000, window_end_ms)
    assert expected >= SCHEDULES * 40 and gaps == 0, (gaps, expected)


async def _audit(settings: Settings, tmp: Path, from_ms: int, to_ms: int) -> tuple[int, int]:
    """Record the namespace to its end, then audit every schedule over the window."""
    db, stop = tmp / "history.db", asyncio.Event()
    recording = asyncio.create_task(run_recorder(settings, db, stop))
    for _ in range(600):
        await asyncio.sleep(1)
        assert not recording.done(), recording.exception()
        if db.exists():
            async with await HistoryStore.open(db, readonly=True) as store:
                if await recorded_to_end(settings, store):
                    break
    stop.set()
    await recording
    with AuditSource(db) as source:
        report = source.audit(from_ms, to_ms)
    print(f"audit: {report.expected} instants, {dict(report.counts)}, gaps {report.gaps[:5]}")
    return report.gap_count, report.expected
