"""Read a topic to its current end, read_committed, without joining a group.

`kafkron ls` and the web console read the compacted changelog whole; `kafkron
rejected` reads the last records of each partition. Neither commits offsets nor
disturbs the actors' groups.
"The end" is the last stable offset when the read starts: a transaction still
open then is not waited for, and anything written later is not read.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from actors.history.recorder import partitions_of
from topics.acl_plan import Operation, ResourceType
from topics.clients import consumer_kwargs
from topics.closing import bounded
from topics.names import Settings
from topics.refusals import denial_message, topic_denied

POLL_TIMEOUT_MS = 500


class TailError(Exception):
    """The topic cannot be read; the message says what to do."""


@dataclass(frozen=True, slots=True)
class Record:
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None


async def read_to_end(
    settings: Settings, topic: str, *, last_per_partition: int | None = None, timeout_s: float = 60
) -> list[Record]:
    """Every committed record of ``topic`` up to its end (or the last N of each partition)."""
    consumer = AIOKafkaConsumer(**consumer_kwargs(settings, f"{settings.namespace}-cli"))
    try:
        await consumer.start()
    except KafkaError as exc:
        await bounded(consumer.stop(), "stopping the reading consumer")
        raise TailError(
            f"cannot reach Kafka at {settings.bootstrap} ({exc}); start it with "
            "`kafkron broker start` or set KAFKRON_BOOTSTRAP"
        ) from None
    try:
        partitions = await partitions_of(consumer, topic)
        if not partitions and await topic_denied(consumer._client, topic):
            raise TailError(
                denial_message(settings.namespace, ResourceType.TOPIC, topic, Operation.READ)
            )
        if not partitions:
            raise TailError(
                f"topic {topic} does not exist; create the namespace's topics with "
                f"`KAFKRON_NAMESPACE={settings.namespace} kafkron topics create`"
            )
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        begins = await consumer.beginning_offsets(tps)
        remaining: set[TopicPartition] = set()
        for tp in tps:
            start = begins[tp]
            if last_per_partition is not None:
                start = max(start, ends[tp] - last_per_partition)
            consumer.seek(tp, start)
            if start < ends[tp]:
                remaining.add(tp)
        records: list[Record] = []
        async with asyncio.timeout(timeout_s):
            while remaining:
                batches = await consumer.getmany(*remaining, timeout_ms=POLL_TIMEOUT_MS)
                for tp, batch in batches.items():
                    records.extend(
                        Record(tp.partition, r.offset, r.timestamp, r.key, r.value)
                        for r in batch
                        if r.offset < ends[tp]
                    )
                for tp in list(remaining):
                    # A position steps over transaction markers, so it reaches the end.
                    if await consumer.position(tp) >= ends[tp]:
                        remaining.discard(tp)
        return records
    except TimeoutError:
        raise TailError(f"reading {topic} took longer than {timeout_s:.0f} s; retry") from None
    finally:
        await bounded(consumer.stop(), "stopping the reading consumer")
