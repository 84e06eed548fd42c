"""A warm takeover on the real broker: kill -9 the owner, its standby fires on.

Two `kafkron scheduler` processes share two shards with ``--standbys 1``: each
owns one and keeps the other warm. 200 schedules fire every second; once both
standbys have caught up, one process is killed with SIGKILL. The survivor must
take the dead process's shard over from its standby (fence, probe, catch-up; no
full restore), and a read_committed reader of ``{ns}.runs`` must find every
(schedule, second) of the window exactly once, none early, no unreported gap.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from tests.kit.scheduler import SchedulerProcesses, acker, check_runs, now_ms, produce, upsert
from topics.names import Settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SCHEDULES = 200
SHARDS = 2


async def _wait_for(procs: SchedulerProcesses, text: str, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while len(procs.grep(text)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {count} x {text!r}:\n{procs.logs()}")
        await asyncio.sleep(0.5)


@pytest.mark.kafka_partitions(SHARDS)
@pytest.mark.timeout(420)
async def test_a_killed_owners_shard_is_taken_over_from_its_standby_exactly_once(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    procs = SchedulerProcesses(
        kafka_settings, tmp_path, session_timeout_ms=10_000, extra_args=("--standbys", "1")
    )
    procs.start(2)
    try:
        await procs.wait_stable(SHARDS)
        ids = [f"every-second-{i:04d}" for i in range(SCHEDULES)]
        async with acker(kafka_settings) as progress:
            await produce(kafka_settings, [(i.encode(), upsert(i)) for i in ids])
            await asyncio.sleep(8)
            await _wait_for(procs, "standby of shard", 2, timeout_s=60)
            owned_by_victim = procs.assigned(0)
            procs.signal(0, signal.SIGKILL)
            await asyncio.sleep(25)
            window_end_ms = now_ms()
            caught_up = await progress.wait_caught_up(ids, window_end_ms, timeout_s=120)
    finally:
        codes = procs.stop_all()
    report = await check_runs(
        kafka_settings,
        ids,
        window_end_ms=window_end_ms,
    )
    print(report.summary(), f"caught_up={caught_up}")
    print("\n".join(procs.grep("standby") + procs.grep("taken on")))
    assert owned_by_victim, f"the killed process owned nothing:\n{procs.logs()}"
    (taken,) = owned_by_victim
    survivor = procs.grep(f"shard {taken} taken over from its standby")
    assert survivor, f"shard {taken} was not taken over from a standby:\n{procs.logs()}"
    assert report.occurrences_checked >= SCHEDULES * 25
    assert not report.duplicates, report.summary()
    assert not report.early, report.summary()
    assert not report.gaps, report.summary() + "\n" + procs.logs()
    assert codes[1:] == [0], f"the survivor did not shut down cleanly: {codes}\n{procs.logs()}"
