"""What waits on each worker queue, read from Kafka (docs/DESIGN.md §8.1).

A queue's runs wait on its topic until a worker of the queue's group finishes them
and commits past them, so the broker alone says, per queue:

- ``open_runs``: records the group has not committed yet (the lag: runs waiting or
  running and their cancel records, but also, as `actors.observe.lag` explains,
  transaction markers and the aborted records of the shards' clock probes on
  ``{ns}.runs``: a count of records, an upper bound on runs);
- ``oldest_open_ms``: the broker's append time (LogAppendTime) of the first record
  not committed, over the queue's partitions: the oldest run still waiting or
  running, the instant the shard wrote it;
- ``workers``: members of the queue's group now; 0 means no worker serves the queue,
  and its runs only wait until the shard's deadline ends them (§3.5).

Read with the admin client and one read_committed consumer that assigns partitions
itself (never joins a group), so looking never disturbs the workers. `kafkron ls`,
the web console and the scheduler's metric (`actors.observe.queue_age`) share it.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from topics.clients import admin_kwargs, consumer_kwargs
from topics.closing import bounded, within
from topics.committed import fetch_committed
from topics.names import Settings
from topics.queues import placement_of_topic

READ_TIMEOUT_S = 10.0
FIRST_RECORD_WAIT_MS = 1_000


@dataclass(frozen=True, slots=True)
class QueueState:
    queue: str
    topic: str
    open_runs: int
    oldest_open_ms: int | None
    """None when nothing is open (or the first open record could not be read)."""
    workers: int

    def age_s(self, now_ms: int) -> float:
        """How long the oldest open run has waited or run, in seconds (0 if none)."""
        return 0.0 if self.oldest_open_ms is None else max(0, now_ms - self.oldest_open_ms) / 1000


async def queue_states(settings: Settings) -> list[QueueState]:
    """Every queue of the namespace whose topic exists (the default one first)."""
    return await within(_read(settings), READ_TIMEOUT_S)


async def _read(settings: Settings) -> list[QueueState]:
    admin = AIOKafkaAdminClient(**admin_kwargs(settings, f"{settings.namespace}-queues"))
    consumer = AIOKafkaConsumer(**consumer_kwargs(settings, f"{settings.namespace}-queues"))
    await admin.start()
    try:
        await consumer.start()
        try:
            return await _states(settings, admin, consumer)
        finally:
            await bounded(consumer.stop(), "stopping the queues' consumer")
    finally:
        await bounded(admin.close(), "closing the queues' admin client")


async def _states(
    settings: Settings, admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer
) -> list[QueueState]:
    topics = await admin.list_topics()
    queues = sorted(
        (q, t) for t in topics if (q := placement_of_topic(settings.namespace, t)) is not None
    )
    queues.sort(key=lambda qt: qt[0] != "default")
    # Every offset first: a consumer that has fetched (`_oldest`) answers later offset
    # requests for other partitions wrongly (aiokafka 0.14), so the reads come last.
    measured = []
    for queue, topic in queues:
        group = settings.for_placement(queue).worker_group
        partitions = sorted(consumer.partitions_for_topic(topic) or ())
        if not partitions:
            await consumer._client.force_metadata_update()
            partitions = sorted(consumer.partitions_for_topic(topic) or ())
        tps = [TopicPartition(topic, p) for p in partitions]
        committed = await fetch_committed(admin, group, tps) if tps else {}
        ends = await consumer.end_offsets(tps) if tps else {}
        begins = await consumer.beginning_offsets(tps) if tps else {}
        positions = {}
        for tp in tps:
            done = committed[tp]
            positions[tp] = begins[tp] if done is None else done.offset
        open_at = {tp: p for tp, p in positions.items() if p < ends[tp]}
        open_runs = sum(ends[tp] - p for tp, p in open_at.items())
        measured.append((queue, topic, group, open_runs, open_at))
    found: list[QueueState] = []
    for queue, topic, group, open_runs, open_at in measured:
        oldest = await _oldest(consumer, open_at)
        found.append(QueueState(queue, topic, open_runs, oldest, await _members(admin, group)))
    return found


async def _oldest(consumer: AIOKafkaConsumer, positions: dict[TopicPartition, int]) -> int | None:
    """The earliest append time among the first committed record at each position."""
    if not positions:
        return None
    consumer.assign(list(positions))
    for tp, offset in positions.items():
        consumer.seek(tp, offset)
    firsts: dict[TopicPartition, int] = {}
    batch = await consumer.getmany(timeout_ms=FIRST_RECORD_WAIT_MS, max_records=len(positions) * 8)
    for tp, records in batch.items():
        if records:
            firsts[tp] = records[0].timestamp
    return min(firsts.values()) if firsts else None


async def _members(admin: AIOKafkaAdminClient, group: str) -> int:
    for response in await admin.describe_consumer_groups([group]):
        for described in response.to_object()["groups"]:
            if described["group"] == group and described["error_code"] == 0:
                return len(described["members"])
    return 0
