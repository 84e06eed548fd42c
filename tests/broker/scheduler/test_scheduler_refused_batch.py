"""A run record larger than `{ns}.runs` accepts, on the real broker: nothing partial commits.

Before, aiokafka committed the shard's transaction although the broker had refused
the runs batch holding the large record, and with it every small run that shared
the batch: those occurrences were silently held until their deadline. Now the
shard never writes a run the topic cannot take: it writes that attempt's
``failed`` result (non-retryable, naming the sizes and what to change) and its
dead letter in the same transaction, and every other occurrence fires.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from actors.views.tail import Record, read_to_end
from tests.kit.scheduler import SchedulerProcesses, now_ms, produce
from topics.admin import admin_client
from topics.messages import parse_dlq, parse_result, parse_run
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms

pytestmark = pytest.mark.broker

RUNS_MAX_BYTES = 4_096
SMALL = 30
BIG_ARG_BYTES = 20_000


def _one_off(schedule_id: str, at_ms: int, args: dict[str, str]) -> bytes:
    return orjson.dumps(
        {
            "v": 1,
            "type": "schedule.upsert",
            "id": schedule_id,
            "spec": {"at": format_ms(at_ms)},
            "job": {"name": "test.noop", "args": args},
        }
    )


async def test_a_run_too_large_for_the_runs_topic_ends_visibly_and_its_batch_neighbours_fire(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    runs = kafka_settings.topic(TopicKind.RUNS)
    async with admin_client(kafka_settings) as admin:
        # AlterConfigs replaces the topic's whole config: restate the timestamp type.
        configs = {"max.message.bytes": RUNS_MAX_BYTES, "message.timestamp.type": "LogAppendTime"}
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, runs, configs)])
    schedulers = SchedulerProcesses(kafka_settings, tmp_path)
    schedulers.start(1)
    try:
        await schedulers.wait_stable(shards=3)
        at_ms = (now_ms() // 1000 + 4) * 1000
        commands = [(b"big", _one_off("big", at_ms, {"blob": "x" * BIG_ARG_BYTES}))]
        commands += [
            (f"small-{i}".encode(), _one_off(f"small-{i}", at_ms, {})) for i in range(SMALL)
        ]
        await produce(kafka_settings, commands)
        deadline = time.monotonic() + 60
        fired: set[str] = set()
        big_results = []
        while time.monotonic() < deadline:
            await asyncio.sleep(1)
            fired = {
                parse_run(r.value or b"").schedule_id
                for r in await _committed(kafka_settings, runs)
            }
            big_results = [
                parse_result(r.value or b"")
                for r in await _committed(kafka_settings, kafka_settings.topic(TopicKind.RESULTS))
                if r.key == b"big"
            ]
            if len(fired) >= SMALL and big_results:
                break
        assert fired == {f"small-{i}" for i in range(SMALL)}, schedulers.logs()
        (result,) = big_results
        assert result.status == "failed" and result.error is not None
        assert result.error["type"] == "NonRetryable"
        assert "larger than the runs topic accepts" in result.error["message"]
        dead = [
            parse_dlq(r.value or b"")
            for r in await _committed(kafka_settings, kafka_settings.topic(TopicKind.DLQ))
        ]
        assert [d.run_id for d in dead] == [result.run_id]
        assert schedulers.grep("max.message.bytes"), schedulers.logs()
        assert not schedulers.grep("transaction failed"), schedulers.logs()
    finally:
        schedulers.stop_all()


async def _committed(settings: Settings, topic: str) -> list[Record]:
    return [r for r in await read_to_end(settings, topic) if r.value is not None]
