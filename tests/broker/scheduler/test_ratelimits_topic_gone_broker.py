"""A rate-limit pause for a ``{ns}.ratelimits`` deleted under a running shard: the
shard's producer still has the topic in its metadata cache, yet the pause is kept out
of the transaction and the topic marked at once, instead of a transaction that waits
for the topic until its commit timeout, marks nothing and is applied again on every
rebuild (docs/DESIGN.md §8.5)."""

from __future__ import annotations

import asyncio
import time

import pytest

from actors.scheduler.clock import SystemClock
from actors.scheduler.shard_runner import ShardRunner, ShardWriteFailed
from actors.scheduler.target_table import refused_target
from actors.scheduler.writer import shard_partitioner
from topics.admin import admin_client
from topics.names import Settings, TopicKind
from topics.records import OutRecord

pytestmark = pytest.mark.broker

COMMIT_TIMEOUT_S = 15.0


def _pause(key: bytes) -> OutRecord:
    return OutRecord(
        TopicKind.RATELIMITS, key, b'{"v":1,"paused":true,"at":"2026-01-01T00:00:00Z"}', 0
    )


async def test_a_pause_for_a_deleted_pauses_topic_is_marked_before_any_transaction(
    kafka_settings: Settings,
) -> None:
    counts = dict.fromkeys(TopicKind, 3) | {TopicKind.RATELIMITS: 1}
    runner = ShardRunner(
        partition=0,
        token=1,
        settings=kafka_settings,
        clock=SystemClock(),
        partitioner=shard_partitioner(kafka_settings, counts),
        commit_timeout_s=COMMIT_TIMEOUT_S,
    )
    pauses = kafka_settings.topic(TopicKind.RATELIMITS)
    await runner.fence()
    try:
        await runner.write([_pause(b"payments")], {})  # the topic is there: written
        assert pauses in runner.last_targets
        async with admin_client(kafka_settings) as admin:
            await admin.delete_topics([pauses])
            for _ in range(100):
                if pauses not in await admin.list_topics():
                    break
                await asyncio.sleep(0.1)
        began_s = time.monotonic()
        with pytest.raises(ShardWriteFailed) as failed:
            await runner.write([_pause(b"sms")], {})
        assert time.monotonic() - began_s < COMMIT_TIMEOUT_S / 2
        marked = refused_target(failed.value, kafka_settings.namespace)
        assert marked is not None and marked[0] == pauses
    finally:
        await runner.close()
