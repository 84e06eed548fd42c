"""Read a topic to its current end, read_committed, without joining a group.

`kafkron ls` and the web console read the compacted changelog whole; `kafkron
rejected` reads the last records of each partition. Neither commits offsets nor
disturbs the actors' groups.
"The end" is the last stable offset when the read starts: a transaction still
open then is not waited for, and anything written later is not read.
`read_partition_since` reads one partition from an instant on, for `kafkron dag
show`'s run-level result (found by its time, not by reading the whole topic).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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
    headers: tuple[tuple[str, bytes], ...] = ()
    """Only `read_to_end` fills them (a Kafka target's records carry kafkron's)."""


async def _started(settings: Settings) -> AIOKafkaConsumer:
    consumer = AIOKafkaConsumer(**consumer_kwargs(settings, f"{settings.namespace}-cli"))
    try:
        await consumer.start()
    except KafkaError as exc:
        await bounded(consumer.stop(), "stopping the reading consumer")
        raise TailError(
            f"cannot reach Kafka at {settings.bootstrap} ({exc}); start it with "
            "`kafkron broker start` or set KAFKRON_BOOTSTRAP"
        ) from None
    return consumer


async def _partitions(consumer: AIOKafkaConsumer, settings: Settings, topic: str) -> list[int]:
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
    return partitions


async def read_to_end(
    settings: Settings, topic: str, *, last_per_partition: int | None = None, timeout_s: float = 60
) -> list[Record]:
    """Every committed record of ``topic`` up to its end (or the last N of each partition)."""
    consumer = await _started(settings)
    try:
        partitions = await _partitions(consumer, settings, topic)
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
                        Record(
                            tp.partition, r.offset, r.timestamp, r.key, r.value, tuple(r.headers)
                        )
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


async def read_partition_since(
    settings: Settings,
    topic: str,
    partition: int,
    since_ms: int,
    *,
    until: Callable[[Record], bool],
    timeout_s: float = 60,
) -> list[Record]:
    """The committed records of one partition from the first stamped at or after
    ``since_ms`` (the broker's time index), up to its end or through the first
    record ``until`` accepts, whichever comes first."""
    consumer = await _started(settings)
    try:
        if partition not in await _partitions(consumer, settings, topic):
            raise TailError(f"topic {topic} has no partition {partition}")
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        found = (await consumer.offsets_for_times({tp: since_ms}))[tp]
        if found is None:  # nothing stamped that late
            return []
        consumer.seek(tp, found.offset)
        records: list[Record] = []
        async with asyncio.timeout(timeout_s):
            while await consumer.position(tp) < end:
                batches = await consumer.getmany(tp, timeout_ms=POLL_TIMEOUT_MS)
                for r in batches.get(tp, []):
                    if r.offset >= end:
                        return records
                    record = Record(partition, r.offset, r.timestamp, r.key, r.value)
                    records.append(record)
                    if until(record):
                        return records
        return records
    except TimeoutError:
        raise TailError(f"reading {topic} took longer than {timeout_s:.0f} s; retry") from None
    finally:
        await bounded(consumer.stop(), "stopping the reading consumer")
