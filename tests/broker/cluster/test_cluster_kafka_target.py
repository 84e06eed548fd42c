"""Kafka targets on the three-node cluster: each record seen once while schedulers and a broker die.

The cluster's variant of `tests/broker/scheduler/test_kafka_target_chaos.py`, judged
by the same checker (`tests.kit.targets.check_targets`, the simulation's
``target-once``): three schedulers allowed to write a target topic of replication
factor 3 (``min.insync.replicas`` 2) fire ``SCHEDULES`` every-second Kafka targets; a
scheduler is killed with SIGKILL, another frozen with SIGSTOP past its session (a
zombie once thawed), and the broker leading the most partitions of the target topic
is killed with SIGKILL and started again 20 s later. A read_committed reader of the
target topic must see every occurrence of the window once, never early, with
kafkron's headers.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from tests.kit.cluster import SHARDS, Cluster
from tests.kit.scheduler import SchedulerProcesses, now_ms, produce
from tests.kit.targets import check_targets, create_target_topic, target_progress, target_upsert
from topics.admin import create_topics

pytestmark = [pytest.mark.broker, pytest.mark.cluster, pytest.mark.slow]

SCHEDULES = 1_000
PARTITIONS = 3
MAX_FIRES_PER_TURN = 200


async def _sleep_until(start_s: float, offset_s: float) -> None:
    await asyncio.sleep(max(0.0, start_s + offset_s - time.monotonic()))


@pytest.mark.timeout(720)
async def test_target_records_once_through_scheduler_and_broker_kills(
    cluster: Cluster, tmp_path: Path
) -> None:
    settings = await cluster.healthy_namespace()
    topic = f"{settings.namespace}-orders-due"
    await create_topics(settings, partitions=SHARDS)
    await create_target_topic(settings, topic, PARTITIONS, replication_factor=3)
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
            leaders = (await cluster.view()).leaders(topic)
            ((node, _),) = leaders.most_common(1)
            await asyncio.to_thread(cluster.kill_node, node)
            await asyncio.sleep(20)
            await asyncio.to_thread(cluster.start_node, node)
            await _sleep_until(start_s, 75)
            window_end_ms = now_ms()
            caught_up = await progress.wait_caught_up(ids, window_end_ms, timeout_s=240)
    finally:
        codes = procs.stop_all()
    report = await check_targets(settings, topic, PARTITIONS, ids, window_end_ms=window_end_ms)
    print(f"cluster kafka targets: {report.summary()} caught_up={caught_up}")
    assert caught_up, report.summary() + "\n" + procs.logs()
    assert report.checked >= SCHEDULES * 70
    assert report.without_headers == 0, report.summary()
    assert report.missed_reported == 0, report.summary()
    assert all(v.ok for v in report.verdicts), report.summary() + "\n" + procs.logs()
    assert codes[1:] == [0, 0], f"survivors did not shut down cleanly: {codes}\n{procs.logs()}"
