"""A broker restart in the middle: firing resumes and nothing is duplicated.

Runs on a broker of its own (another port, another data directory) so that the
shared local broker of the other tests stays up. Two `kafkron scheduler`
processes fire 200 schedules every second; the broker is stopped for a few
seconds and started again on the same data. Every (schedule, second) of the
window must then be in ``{ns}.runs`` exactly once (fired late, within the misfire
grace, for the seconds the broker was away), none early.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from tests.kit.own_broker import broker as _broker
from tests.kit.own_broker import own_broker
from tests.kit.scheduler import SchedulerProcesses, acker, check_runs, now_ms, produce, upsert
from topics.admin import create_topics
from topics.names import Settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SCHEDULES = 200
SHARDS = 3
__all__ = ["own_broker"]  # the fixture, used by name


@pytest.mark.timeout(900)
async def test_broker_restart_resumes_firing_without_duplicates(
    own_broker: tuple[int, Path], tmp_path: Path
) -> None:
    port, data_dir = own_broker
    settings = Settings(namespace=f"t-{uuid.uuid4().hex[:8]}", bootstrap=f"127.0.0.1:{port}")
    await create_topics(settings, partitions=SHARDS)
    procs = SchedulerProcesses(settings, tmp_path)
    procs.start(2)
    try:
        await procs.wait_stable(SHARDS)
        ids = [f"restart-{i:03d}" for i in range(SCHEDULES)]
        async with acker(settings) as progress:
            await produce(settings, [(i.encode(), upsert(i)) for i in ids])
            await asyncio.sleep(15)
            await asyncio.to_thread(_broker, "stop", port, data_dir)
            stopped_at = time.monotonic()
            await asyncio.sleep(5)
            await asyncio.to_thread(_broker, "start", port, data_dir)
            down_s = time.monotonic() - stopped_at
            await asyncio.sleep(15)
            window_end_ms = now_ms()
            caught_up = await progress.wait_caught_up(ids, window_end_ms, timeout_s=240)
    finally:
        codes = procs.stop_all()
    report = await check_runs(
        settings,
        ids,
        window_end_ms=window_end_ms,
    )
    print(report.summary(), f"broker_down_s={down_s:.1f} caught_up={caught_up}")
    assert caught_up, report.summary() + "\n" + procs.logs()
    assert report.occurrences_checked >= SCHEDULES * 25
    assert not report.duplicates, report.summary()
    assert not report.early, report.summary()
    assert not report.gaps, report.summary() + "\n" + procs.logs()
    assert codes == [0, 0], f"schedulers did not shut down cleanly: {codes}\n{procs.logs()}"
