"""What kafkron relies on from Kafka, checked against the real local broker.

Exactly-once firing rests on transactions being invisible to read_committed readers
until committed (and forever if aborted); shard restore rests on compaction keeping
the last value of each key and dropping deleted keys.
"""

from __future__ import annotations

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import NewTopic

from topics.admin import admin_client
from topics.names import Settings, TopicKind


async def _read_all(
    settings: Settings, topic: str, isolation_level: str, partition: int = 0
) -> list[tuple[bytes | None, bytes | None]]:
    """Every visible (key, value) of one partition, from the start to the end offset."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        isolation_level=isolation_level,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        # For read_committed this is the last stable offset: nothing past an open txn.
        end = (await consumer.end_offsets([tp]))[tp]
        records: list[tuple[bytes | None, bytes | None]] = []
        while await consumer.position(tp) < end:
            batch = await consumer.getmany(tp, timeout_ms=1000)
            records.extend((r.key, r.value) for r in batch.get(tp, []))
        return records
    finally:
        await consumer.stop()


async def test_aborted_transaction_is_invisible_and_committed_is_visible(
    kafka_settings: Settings,
) -> None:
    topic = kafka_settings.topic(TopicKind.RUNS)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_settings.bootstrap,
        transactional_id=f"{kafka_settings.namespace}-txn-test",
    )
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed-1", key=b"k", partition=0)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"aborted", key=b"k", partition=0)
        await producer.abort_transaction()

        # An open transaction is invisible to read_committed until it commits.
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"committed-2", key=b"k", partition=0)
        assert await _read_all(kafka_settings, topic, "read_committed") == [(b"k", b"committed-1")]
        await producer.commit_transaction()
    finally:
        await producer.stop()

    committed = await _read_all(kafka_settings, topic, "read_committed")
    assert [value for _, value in committed] == [b"committed-1", b"committed-2"]
    # The aborted record is in the log; only the isolation level hides it.
    uncommitted = await _read_all(kafka_settings, topic, "read_uncommitted")
    assert [value for _, value in uncommitted] == [b"committed-1", b"aborted", b"committed-2"]


async def test_compacted_topic_keeps_the_last_value_per_key(kafka_settings: Settings) -> None:
    # Its own topic with a tiny segment.ms: the namespace's schedules topic rolls hourly,
    # and Kafka never compacts the active segment.
    topic = f"{kafka_settings.namespace}.compaction-{uuid.uuid4().hex[:6]}"
    async with admin_client(kafka_settings) as admin:
        await admin.create_topics(
            [
                NewTopic(
                    topic,
                    1,
                    1,
                    topic_configs={
                        "cleanup.policy": "compact",
                        "segment.ms": "100",
                        "min.cleanable.dirty.ratio": "0.01",
                        "delete.retention.ms": "100",
                    },
                )
            ]
        )
    producer = AIOKafkaProducer(bootstrap_servers=kafka_settings.bootstrap, acks="all")
    await producer.start()
    try:
        writes: list[tuple[bytes, bytes | None]] = [
            (b"a", b"a1"),
            (b"b", b"b1"),
            (b"a", b"a2"),
            (b"c", b"c1"),
            (b"b", b"b2"),
            (b"c", None),  # tombstone: delete c
            (b"a", b"a3"),
        ]
        for key, value in writes:
            await producer.send_and_wait(topic, value, key=key, partition=0)

        expected = {b"a": b"a3", b"b": b"b2"}
        deadline = asyncio.get_running_loop().time() + 90
        while True:
            # Each filler write after segment.ms rolls a segment, so the records above
            # leave the active segment and become cleanable.
            await asyncio.sleep(0.2)
            await producer.send_and_wait(topic, b"roll", key=b"filler", partition=0)
            records = await _read_all(kafka_settings, topic, "read_committed")
            ours = [(k, v) for k, v in records if k != b"filler"]
            keys = [k for k, _ in ours]
            if keys.count(b"a") == 1 and keys.count(b"b") == 1 and b"c" not in keys:
                break
            assert asyncio.get_running_loop().time() < deadline, f"never compacted: {ours}"
    finally:
        await producer.stop()
        async with admin_client(kafka_settings) as admin:
            await admin.delete_topics([topic])

    assert dict(ours) == expected
    # Compaction keeps log order: the survivors appear in the order of their last write.
    assert ours == [(b"b", b"b2"), (b"a", b"a3")]
