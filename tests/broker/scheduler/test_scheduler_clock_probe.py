"""The clock probe a shard takes before its first fire: a broker time, no visible record.

A scheduler that takes a shard over has not written to ``{ns}.runs`` yet, so its
skew estimator has no sample; `ShardRunner.sample_clock` gets one from an aborted
transaction. On a clock running a minute fast, the hold-back must apply at once,
and a read_committed reader of ``{ns}.runs`` (what workers are) must see nothing.
"""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from actors.scheduler.clock import SystemClock
from actors.scheduler.lifecycle import Fence, Probe, Restore, SchedulerMachine
from actors.scheduler.shard_runner import ShardRunner
from actors.scheduler.writer import Partitioner
from topics.admin import admin_client
from topics.names import Settings, TopicKind

pytestmark = pytest.mark.broker

AHEAD_MS = 60_000
BOUND_MS = 1_000


class FastClock:
    """The machine's clock plus a minute: what a badly synced host reads."""

    def __init__(self) -> None:
        self._system = SystemClock()

    def now_ms(self) -> int:
        return self._system.now_ms() + AHEAD_MS


async def _committed_runs(settings: Settings) -> list[bytes | None]:
    topic = settings.topic(TopicKind.RUNS)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        async with admin_client(settings) as admin:
            (described,) = await admin.describe_topics([topic])
        tps = [TopicPartition(topic, p["partition"]) for p in described["partitions"]]
        assert tps
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        values: list[bytes | None] = []
        for tp in tps:
            await consumer.seek_to_beginning(tp)
            while await consumer.position(tp) < ends[tp]:
                batch = await consumer.getmany(tp, timeout_ms=1_000)
                values.extend(r.value for r in batch.get(tp, ()))
        return values
    finally:
        await consumer.stop()


async def test_the_probe_holds_a_fast_clock_back_before_any_fire_and_writes_nothing_visible(
    kafka_settings: Settings,
) -> None:
    machine = SchedulerMachine(session_timeout_ms=10_000, skew_bound_ms=BOUND_MS)
    (fence,) = [a for a in machine.assign([0], mono_ms=0) if isinstance(a, Fence)]
    runner = ShardRunner(
        partition=0,
        token=fence.token,
        settings=kafka_settings,
        clock=FastClock(),
        partitioner=Partitioner({kind: 3 for kind in TopicKind}),
        commit_timeout_s=15.0,
    )
    await runner.fence()
    try:
        skew = machine.skew
        assert skew.holdback_ms() == 0  # nothing known yet: this is the gap the probe closes
        assert machine.fence_done(0, fence.token) == [Probe(0, fence.token)]
        sample = await runner.sample_clock()
        assert sample is not None
        assert machine.probe_done(0, fence.token, sample, sample.acked_mono_ms) == [
            Restore(0, fence.token)
        ]
        skew = machine.skew
        assert skew.samples_seen == 1
        assert skew.ahead_ms is not None and skew.ahead_ms >= AHEAD_MS - 1_000
        assert skew.holdback_ms() >= AHEAD_MS - BOUND_MS - 1_000
        assert await _committed_runs(kafka_settings) == []
        # The producer goes on with ordinary transactions after the aborted probe.
        assert await runner.write([], {}) == []
    finally:
        await runner.close()
