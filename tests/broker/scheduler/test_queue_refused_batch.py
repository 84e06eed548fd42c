"""A queue topic that refuses the shard's batch inside the transaction, on a real broker.

The scheduler read the queue topic's ``max.message.bytes`` at start; the topic is then
made smaller, so the broker itself refuses the batch of a large run. The transaction
aborts whole (nothing of the turn is visible), the queue topic is marked refused
(`actors.scheduler.target_table`), the shard is rebuilt, and its re-fire fails the
queue's attempts visibly (``QueueRefused``) while every other run fires once.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from actors.shard.runs import QUEUE_REFUSED_ERROR
from actors.views.tail import read_to_end
from tests.kit.scheduler import SchedulerProcesses, now_ms, produce
from topics.admin import admin_client
from topics.messages import is_cancel, parse_result, parse_run
from topics.names import Settings, TopicKind
from topics.queue_topics import create_queue_topics
from topics.timefmt import format_ms

pytestmark = pytest.mark.broker

QUEUE_MAX_BYTES = 4_096
SMALL = 10


def _one_off(schedule_id: str, at_ms: int, job: dict[str, object]) -> bytes:
    return orjson.dumps(
        {
            "v": 1,
            "type": "schedule.upsert",
            "id": schedule_id,
            "spec": {"at": format_ms(at_ms)},
            "job": job,
            "retry": {"max_attempts": 1},
        }
    )


async def test_a_queue_topic_refusing_the_batch_fails_its_runs_and_the_rest_fires_once(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    await create_queue_topics(settings, ["gpu"], 3)
    gpu = settings.for_queue("gpu").topic(TopicKind.RUNS)
    schedulers = SchedulerProcesses(settings, tmp_path)
    schedulers.start(1)
    try:
        await schedulers.wait_stable(shards=3)
        async with admin_client(settings) as admin:  # smaller than the scheduler knows
            configs = {
                "max.message.bytes": QUEUE_MAX_BYTES,
                "message.timestamp.type": "LogAppendTime",
            }
            await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, gpu, configs)])
        at_ms = (now_ms() // 1000 + 3) * 1000
        big = {"name": "test.noop", "args": {"blob": "x" * 20_000}, "queue": "gpu"}
        commands = [(b"big", _one_off("big", at_ms, big))]
        commands += [
            (f"small-{i}".encode(), _one_off(f"small-{i}", at_ms, {"name": "test.noop"}))
            for i in range(SMALL)
        ]
        await produce(settings, commands)
        deadline = time.monotonic() + 90
        fired: list[str] = []
        big_results = []
        while time.monotonic() < deadline:
            await asyncio.sleep(1)
            fired = [
                parse_run(r.value).schedule_id
                for r in await read_to_end(settings, settings.topic(TopicKind.RUNS))
                if r.value is not None and not is_cancel(r.value)
            ]
            big_results = [
                parse_result(r.value)
                for r in await read_to_end(settings, settings.topic(TopicKind.RESULTS))
                if r.key == b"big" and r.value is not None
            ]
            if len(fired) >= SMALL and big_results:
                break
        assert sorted(fired) == sorted(f"small-{i}" for i in range(SMALL)), schedulers.logs()
        (result,) = big_results
        assert result.status == "failed" and result.error is not None
        assert result.error["type"] == QUEUE_REFUSED_ERROR, result.error
        assert await read_to_end(settings, gpu) == []  # the refused batch never committed
        assert schedulers.grep(f"target topic {gpu} refused a record"), schedulers.logs()
    finally:
        schedulers.stop_all()
