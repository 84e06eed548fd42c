"""A rate-limit pause or resume its topic cannot take never holds the shard
(docs/DESIGN.md §8.5): ``{ns}.ratelimits`` is written as a target is, so a partition
without a leader, or a topic deleted since the last read of the topics, is kept out of
the transaction and marked; the rebuilt shard rejects the command with the reason."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from aiokafka import TopicPartition

from actors.scheduler.shard_runner import ShardRunner, ShardWriteFailed
from actors.scheduler.target_table import TargetTable, refused_target
from actors.scheduler.writer import (
    TargetDest,
    TargetUnacknowledged,
    leaderless,
    shard_partitioner,
)
from tests.kit.shard import T0, Shard, command
from topics.names import Settings, TopicKind
from topics.records import OutRecord
from topics.targets import TargetTopic

SETTINGS = Settings(namespace="kafkron")
PAUSES = "kafkron.ratelimits"
COUNTS = dict.fromkeys(TopicKind, 3) | {TopicKind.RATELIMITS: 1}
PAUSE = OutRecord(TopicKind.RATELIMITS, b"payments", b'{"v":1,"paused":true}', 0)
RUN = OutRecord(TopicKind.RUNS, b"s", b"{}", 1)


class _Cluster:
    def __init__(self, leaders: dict[str, int], unauthorized: frozenset[str]) -> None:
        self.leaders = leaders
        self.unauthorized_topics = unauthorized

    def leader_for_partition(self, tp: TopicPartition) -> int | None:
        return self.leaders.get(tp.topic)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return {0} if topic in self.leaders else None


class _Producer:
    """What the runner asks of aiokafka before a transaction: the metadata."""

    def __init__(
        self,
        leaders: dict[str, int],
        unauthorized: frozenset[str] = frozenset(),
        fresh: dict[str, int] | None = None,
    ) -> None:
        self.fresh = fresh  # the broker's answer to a metadata update (None: ``leaders``)
        self.begun = 0
        self.updates = 0
        self.asked: list[str] = []
        cluster = _Cluster(leaders, unauthorized)
        self.client = SimpleNamespace(
            cluster=cluster, force_metadata_update=self._update, add_topic=self.asked.append
        )

    async def _update(self) -> bool:
        self.updates += 1
        if self.fresh is not None:
            self.client.cluster.leaders = self.fresh
        return True

    async def begin_transaction(self) -> None:
        self.begun += 1
        raise RuntimeError("the transaction began")


def _runner(producer: _Producer) -> ShardRunner:
    runner = ShardRunner(
        partition=0,
        token=1,
        settings=SETTINGS,
        clock=SimpleNamespace(now_ms=lambda: T0),
        partitioner=shard_partitioner(SETTINGS, COUNTS),
        commit_timeout_s=15.0,  # no target deadline: the default
    )
    runner._producer = producer  # type: ignore[assignment]
    return runner


def test_the_pause_is_planned_as_a_target_and_a_leaderless_partition_is_found() -> None:
    plan = shard_partitioner(SETTINGS, COUNTS).plan([RUN, PAUSE])
    assert (TargetDest(PAUSES), 0) in plan.groups and plan.count(TopicKind.RUNS) == 1
    assert leaderless(plan, lambda topic, p: -1 if topic == PAUSES else 1) == (PAUSES, 0)


async def test_a_pause_to_a_leaderless_partition_never_joins_the_transaction() -> None:
    producer = _Producer({PAUSES: -1})
    with pytest.raises(ShardWriteFailed) as failed:
        await _runner(producer).write([RUN, PAUSE], {})
    assert producer.begun == 0
    marked = refused_target(failed.value, "kafkron")
    assert marked is not None and marked[0] == PAUSES and "no leader" in marked[1]


async def test_a_pauses_topic_deleted_since_the_last_read_is_marked_at_once() -> None:
    producer = _Producer({})
    with pytest.raises(ShardWriteFailed) as failed:
        await _runner(producer).write([RUN, PAUSE], {})
    assert producer.begun == 0 and producer.asked == [PAUSES]
    marked = refused_target(failed.value, "kafkron")
    assert marked is not None and marked[0] == PAUSES and "deleted" in marked[1]


async def test_a_cached_pauses_topic_the_broker_no_longer_lists_is_marked() -> None:
    producer = _Producer({PAUSES: 1}, fresh={})  # the cache predates the deletion
    with pytest.raises(ShardWriteFailed) as failed:
        await _runner(producer).write([RUN, PAUSE], {})
    assert producer.begun == 0 and producer.updates == 1
    marked = refused_target(failed.value, "kafkron")
    assert marked is not None and marked[0] == PAUSES


async def test_a_pauses_topic_this_principal_may_not_see_is_marked_too() -> None:
    producer = _Producer({}, unauthorized=frozenset({PAUSES}))
    with pytest.raises(ShardWriteFailed) as failed:
        await _runner(producer).write([PAUSE], {})
    marked = refused_target(failed.value, "kafkron")
    assert marked is not None and marked[0] == PAUSES


async def test_a_pause_to_a_partition_with_a_leader_is_written() -> None:
    producer = _Producer({PAUSES: 2})
    with pytest.raises(RuntimeError, match="the transaction began"):
        await _runner(producer).write([RUN, PAUSE], {})
    assert producer.begun == 1


async def test_a_turn_without_a_pause_asks_nothing_of_the_metadata() -> None:
    producer = _Producer({})  # the pauses topic gone: no matter, nothing goes to it
    with pytest.raises(RuntimeError, match="the transaction began"):
        await _runner(producer).write([RUN], {})
    assert producer.asked == [] and producer.updates == 0


def test_the_rebuilt_shard_rejects_the_pause_with_the_reason() -> None:
    table = TargetTable(namespace="kafkron", allowed=())
    table.known = {PAUSES: TargetTopic(1, 1_000_000), "kafkron.runs": TargetTopic(3, 1_000_000)}
    failed = ShardWriteFailed("shard 0: target not written")
    failed.__cause__ = TargetUnacknowledged(PAUSES, 0, "has no leader")
    marked = refused_target(failed, "kafkron")
    assert marked is not None
    table.refuse(*marked, 0.0)
    shard = Shard()
    shard.core.set_target_topics(table.snapshot(1.0))
    out = shard.send(command("ratelimit.pause", "payments"), at_ms=T0)
    assert out.of(TopicKind.RATELIMITS) == []
    (rejected,) = out.rejected
    assert "has no leader" in rejected.reason and "send the command again" in rejected.reason
