"""How fast this machine's local broker accepts 200-byte messages from one producer.

Later benchmarks report their rates against this ceiling: a scheduler that fires
N runs/s cannot beat the rate at which one Python producer gets records into Kafka.

Three ways of producing, measured in the same run on one fresh topic:

- ``send``: ``await producer.send()`` per message, futures awaited at the end (the
  baseline: how most aiokafka code is written).
- ``batched``: ``create_batch``/``send_batch``, one batch per partition at a time.
- ``txn``: ``batched`` inside transactions, committing every 1,000 messages (how a
  shard writes: one transaction per tick's worth of fires).

All three use ``acks=all`` and idempotence (transactions require both), so the
ratios isolate the batching and the transaction cost. Usage::

    python bench/broker_ceiling.py [--messages 200000] [--partitions 6]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import measured
from aiokafka import AIOKafkaProducer
from aiokafka.admin import NewTopic

from topics.admin import admin_client, wait_for_leaders
from topics.closing import stop_producer
from topics.names import Settings

MESSAGE_BYTES = 200
TXN_EVERY = 1_000
KEYS = 10_000  # distinct keys, like schedule ids


@dataclass(frozen=True, slots=True)
class Rate:
    name: str
    messages: int
    seconds: float

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.messages * MESSAGE_BYTES / self.seconds / 1e6


def _keys() -> list[bytes]:
    return [f"schedule-{i:05d}".encode() for i in range(KEYS)]


async def _produce_send(producer: AIOKafkaProducer, topic: str, count: int, _: int) -> None:
    value = os.urandom(MESSAGE_BYTES)
    keys = _keys()
    futures = [await producer.send(topic, value, key=keys[i % KEYS]) for i in range(count)]
    await asyncio.gather(*futures)


async def _send_batches(
    producer: AIOKafkaProducer, topic: str, start: int, count: int, partitions: int
) -> list[asyncio.Future[object]]:
    """Fill one batch per partition in turn; returns the futures of the sent batches."""
    value = os.urandom(MESSAGE_BYTES)
    keys = _keys()
    futures: list[asyncio.Future[object]] = []
    i = start
    end = start + count
    partition = 0
    while i < end:
        batch = producer.create_batch()
        while i < end and batch.append(key=keys[i % KEYS], value=value, timestamp=None):
            i += 1
        futures.append(await producer.send_batch(batch, topic, partition=partition))
        partition = (partition + 1) % partitions
    return futures


async def _produce_batched(
    producer: AIOKafkaProducer, topic: str, count: int, partitions: int
) -> None:
    await asyncio.gather(*await _send_batches(producer, topic, 0, count, partitions))


async def _produce_txn(producer: AIOKafkaProducer, topic: str, count: int, partitions: int) -> None:
    for start in range(0, count, TXN_EVERY):
        async with producer.transaction():
            await _send_batches(producer, topic, start, min(TXN_EVERY, count - start), partitions)


Producer = Callable[[AIOKafkaProducer, str, int, int], Awaitable[None]]


async def _measure(
    settings: Settings, name: str, produce: Producer, count: int, partitions: int, txn: bool
) -> Rate:
    topic = f"bench-ceiling-{uuid.uuid4().hex[:8]}"
    async with admin_client(settings) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
        await wait_for_leaders(admin, [topic])
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        max_batch_size=256 * 1024,
        transactional_id=f"bench-ceiling-{uuid.uuid4().hex[:8]}" if txn else None,
    )
    await producer.start()
    try:
        # Warm-up: connections, metadata, the transaction coordinator.
        await produce(producer, topic, min(TXN_EVERY * 2, count), partitions)
        started = time.perf_counter()
        await produce(producer, topic, count, partitions)
        seconds = time.perf_counter() - started
    finally:
        await stop_producer(producer, "stopping the ceiling's producer")
        async with admin_client(settings) as admin:
            await admin.delete_topics([topic])
    return Rate(name, count, seconds)


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=6)
    measured.add_record_option(parser)
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    rates = [
        await _measure(settings, "send", _produce_send, args.messages, args.partitions, False),
        await _measure(
            settings, "batched", _produce_batched, args.messages, args.partitions, False
        ),
        await _measure(settings, "txn", _produce_txn, args.messages, args.partitions, True),
    ]
    print(
        f"{args.messages} messages of {MESSAGE_BYTES} B, {args.partitions} partitions,"
        f" broker {settings.bootstrap}, acks=all, txn every {TXN_EVERY}"
    )
    for rate in rates:
        print(f"  {rate.name:8} {rate.msgs_per_s:>10,.0f} msgs/s {rate.mb_per_s:7.1f} MB/s")
    send, batched, txn = rates
    print(
        f"bench broker_ceiling: send_msgs_s={send.msgs_per_s:.0f}"
        f" batched_msgs_s={batched.msgs_per_s:.0f} batched_mb_s={batched.mb_per_s:.1f}"
        f" txn1000_msgs_s={txn.msgs_per_s:.0f} txn1000_mb_s={txn.mb_per_s:.1f}"
        f" batched_vs_send={batched.msgs_per_s / send.msgs_per_s:.2f}"
        f" txn_vs_batched={txn.msgs_per_s / batched.msgs_per_s:.2f}"
    )
    measured.record(
        "broker_ceiling",
        {"txn1000_msgs_s": round(txn.msgs_per_s), "batched_msgs_s": round(batched.msgs_per_s)},
        argv=argv,
        to=args.record,
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
