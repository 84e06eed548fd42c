"""Kafka targets through kill -9, a zombie and a broker restart: each record seen once.

Three `kafkron scheduler` processes, allowed to write one target topic
(``--target-topic``), fire ``SCHEDULES`` every-second schedules whose Kafka target
writes a record there (half keyed by schedule id, half keyless). On a broker of the
test's own (it is restarted): at about 10 s one scheduler is killed with SIGKILL; at
about 20 s another is frozen with SIGSTOP for 14 s (past its 10-second session, so
its shards move while it believes it still owns them, then it thaws as a zombie);
at about 40 s the broker is stopped for 5 s and started again on its data. A
read_committed reader of the target topic must then see every occurrence of the
window exactly once (0 duplicates, 0 gaps, none reported missed), none before its
``kafkron-scheduled-at`` by the broker's LogAppendTime, each with kafkron's headers:
judged by the simulation's own checker (`simulation.checkers.target_once`).
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from pathlib import Path

import pytest

from tests.kit.own_broker import broker, own_broker
from tests.kit.scheduler import SchedulerProcesses, now_ms, produce
from tests.kit.targets import check_targets, create_target_topic, target_progress, target_upsert
from topics.admin import create_topics
from topics.names import Settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SCHEDULES = 1_000
SHARDS = 3
PARTITIONS = 3
MAX_FIRES_PER_TURN = 200
__all__ = ["own_broker"]  # the fixture, used by name


async def _sleep_until(start_s: float, offset_s: float) -> None:
    await asyncio.sleep(max(0.0, start_s + offset_s - time.monotonic()))


@pytest.mark.timeout(600)
async def test_every_target_record_is_seen_once_through_kill_zombie_and_broker_restart(
    own_broker: tuple[int, Path], tmp_path: Path
) -> None:
    port, data_dir = own_broker
    settings = Settings(namespace=f"t-{uuid.uuid4().hex[:8]}", bootstrap=f"127.0.0.1:{port}")
    topic = f"{settings.namespace}-orders-due"  # never under "{ns}.": no own topic is a target
    await create_topics(settings, partitions=SHARDS)
    await create_target_topic(settings, topic, PARTITIONS)
    procs = SchedulerProcesses(
        settings,
        tmp_path,
        session_timeout_ms=10_000,
        extra_args=("--target-topic", topic, "--max-fires-per-turn", str(MAX_FIRES_PER_TURN)),
    )
    procs.start(3)
    try:
        await procs.wait_stable(SHARDS)
        ids = [f"order-{i:04d}" for i in range(SCHEDULES)]
        commands = [
            (i.encode(), target_upsert(i, topic, keyed=n % 2 == 0)) for n, i in enumerate(ids)
        ]
        async with target_progress(settings, topic) as progress:
            await produce(settings, commands)
            start_s = time.monotonic()
            await _sleep_until(start_s, 10)
            procs.signal(0, signal.SIGKILL)
            await _sleep_until(start_s, 20)
            procs.signal(1, signal.SIGSTOP)
            await _sleep_until(start_s, 34)
            procs.signal(1, signal.SIGCONT)
            await _sleep_until(start_s, 40)
            await asyncio.to_thread(broker, "stop", port, data_dir)
            await asyncio.sleep(5)
            await asyncio.to_thread(broker, "start", port, data_dir)
            await _sleep_until(start_s, 60)
            window_end_ms = now_ms()
            caught_up = await progress.wait_caught_up(ids, window_end_ms, timeout_s=180)
    finally:
        codes = procs.stop_all()
    report = await check_targets(settings, topic, PARTITIONS, ids, window_end_ms=window_end_ms)
    print(report.summary(), f"caught_up={caught_up}")
    print("\n".join(procs.grep("ZOMBIE") + procs.grep("fenced") + procs.grep("taken on")))
    assert caught_up, report.summary() + "\n" + procs.logs()
    assert report.checked >= SCHEDULES * 55
    assert report.records >= report.checked
    assert report.without_headers == 0, report.summary()
    assert report.missed_reported == 0, report.summary()
    assert all(v.ok for v in report.verdicts), report.summary() + "\n" + procs.logs()
    assert codes[1:] == [0, 0], f"survivors did not shut down cleanly: {codes}\n{procs.logs()}"
