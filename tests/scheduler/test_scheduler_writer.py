"""Planning a transaction's writes: partitions as Kafka's default partitioner picks them,
one changelog record per key, everything else kept in order."""

from __future__ import annotations

import asyncio

from actors.scheduler.breather import Breather
from actors.scheduler.figures import RateWindow
from actors.scheduler.oversize import BATCH_OVERHEAD_BYTES
from actors.scheduler.writer import MAX_BATCH_BYTES, Partitioner, batch_bytes
from topics.names import TopicKind
from topics.partitioner import murmur2_partition
from topics.records import OutRecord

COUNTS = {kind: 6 for kind in TopicKind} | {TopicKind.RUNS: 4}


def test_keyed_records_go_where_murmur2_puts_them_and_explicit_partitions_stay() -> None:
    partitioner = Partitioner(COUNTS)
    run = OutRecord(TopicKind.RUNS, b"invoice-nightly", b"{}")
    forward = OutRecord(TopicKind.COMMANDS, b"invoice-nightly", b"{}", partition=5)
    assert partitioner.partition_for(run) == murmur2_partition(b"invoice-nightly", 4)
    assert partitioner.partition_for(forward) == 5


def test_keyless_records_spread_round_robin() -> None:
    partitioner = Partitioner(COUNTS)
    rejected = OutRecord(TopicKind.REJECTED, None, b"{}")
    seen = {partitioner.partition_for(rejected) for _ in range(12)}
    assert seen == set(range(6))


def test_plan_keeps_the_last_changelog_record_of_each_key_and_every_run() -> None:
    partitioner = Partitioner(COUNTS)
    records = [
        OutRecord(TopicKind.RUNS, b"a", b"run-a-1"),
        OutRecord(TopicKind.SCHEDULES, b"a", b"state-a-1", partition=2),
        OutRecord(TopicKind.SCHEDULES, b"b", b"state-b-1", partition=2),
        OutRecord(TopicKind.RUNS, b"a", b"run-a-2"),
        OutRecord(TopicKind.SCHEDULES, b"a", b"state-a-2", partition=2),
        OutRecord(TopicKind.SCHEDULES, b"b", None, partition=2),  # deleted last: tombstone wins
    ]
    plan = partitioner.plan(records)
    assert plan.groups[(TopicKind.SCHEDULES, 2)] == [
        (b"a", b"state-a-2", None, ()),
        (b"b", None, None, ()),
    ]
    runs_partition = murmur2_partition(b"a", 4)
    assert plan.groups[(TopicKind.RUNS, runs_partition)] == [
        (b"a", b"run-a-1", None, ()),
        (b"a", b"run-a-2", None, ()),
    ]
    assert plan.records == 4
    assert plan.count(TopicKind.RUNS) == 2


def test_an_empty_batch_plans_nothing() -> None:
    plan = Partitioner(COUNTS).plan([])
    assert plan.records == 0 and not plan.groups


def test_rate_window_counts_recent_seconds_only() -> None:
    rate = RateWindow(window_s=10)
    for second in range(100, 110):
        rate.add(second + 0.5, 5)
    assert rate.per_s(109.9) == 5.0
    assert rate.per_s(115.0) == 2.0  # seconds 106..115 are the window: 106..109 hold 5 each
    assert rate.per_s(200.0) == 0.0
    assert rate.total == 50


def test_breather_yields_once_its_budget_is_spent() -> None:
    async def scenario() -> list[str]:
        order: list[str] = []

        async def other() -> None:
            order.append("other ran")

        breather = Breather(budget_s=0.0)
        task = asyncio.create_task(other())
        order.append("before")
        await breather.maybe()  # budget 0: always yields, so the other task runs
        order.append("after")
        await task
        return order

    assert asyncio.run(scenario()) == ["before", "other ran", "after"]


def test_a_forwarded_command_keeps_its_authors_timestamp_in_the_plan() -> None:
    plan = Partitioner(COUNTS).plan(
        [OutRecord(TopicKind.COMMANDS, b"a", b"{}", partition=1, timestamp_ms=1_700_000_000_000)]
    )
    assert plan.groups[(TopicKind.COMMANDS, 1)] == [(b"a", b"{}", 1_700_000_000_000, ())]


def test_batches_are_sized_for_their_topic_not_for_the_producer() -> None:
    limits = {TopicKind.RUNS: 4_096}
    assert batch_bytes(limits, TopicKind.RUNS) == 4_096 - BATCH_OVERHEAD_BYTES
    assert batch_bytes(limits, TopicKind.RESULTS) == MAX_BATCH_BYTES
    assert batch_bytes({TopicKind.RUNS: 50 * 1024 * 1024}, TopicKind.RUNS) == MAX_BATCH_BYTES


def test_a_target_topic_named_like_a_kafkron_topic_is_a_destination_of_its_own() -> None:
    from actors.scheduler.writer import TargetDest
    from topics.records import TargetRecord

    plan = Partitioner({kind: 3 for kind in TopicKind}).plan(
        [
            TargetRecord("results", b"k", b"target", 0, None, ()),
            OutRecord(TopicKind.RESULTS, b"s", b"result", 0),
            OutRecord(TopicKind.RUNS, b"s", b"run", 0),
            TargetRecord("runs", b"k", b"target-2", 0, None, ()),
        ]
    )
    assert plan.groups[(TargetDest("results"), 0)] == [(b"k", b"target", None, ())]
    assert plan.groups[(TopicKind.RESULTS, 0)] == [(b"s", b"result", None, ())]
    assert plan.groups[(TopicKind.RUNS, 0)] == [(b"s", b"run", None, ())]
    assert plan.groups[(TargetDest("runs"), 0)] == [(b"k", b"target-2", None, ())]
