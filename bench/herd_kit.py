"""What the herd benchmarks share: a herd's changelog, written as a shard writes it.

`bench/midnight_herd.py` (runs fired) and `bench/midnight_e2e.py` (runs fired, run
by workers, results seen) both load ``count`` schedules due at one instant H
straight into ``{ns}.schedules`` with the shard's own encoders (a definition's
record, then one version-2 record per schedule, as a shard that has written them
holds), so loading a million takes seconds rather than a million commands; a
scheduler then restores them before H.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

from actors.shard.definition import definition_bytes
from actors.shard.state import ScheduleState, definition_key, encode_definition, encode_fire
from topics.closing import stop_producer
from topics.commands import ScheduleUpsert, decode_command
from topics.names import Settings, TopicKind

LOAD_BATCH = 50_000  # records in flight before the loader waits for their acks


def log(text: str) -> None:
    """Progress, on stderr (the last line of stdout is the benchmark's figures)."""
    print(text, file=sys.stderr, flush=True)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def herd_records(
    count: int,
    herd_ms: int,
    spec: dict[str, Any],
    job: dict[str, Any],
    id_format: str = "customer-{:07d}-nightly",
) -> Iterator[tuple[bytes, bytes]]:
    """The changelog of ``count`` schedules of ``spec`` and ``job``, each next due at
    ``herd_ms``: their one definition's record first, then one record per schedule
    (made as they are produced, so a million never sit in memory at once)."""
    body = {"v": 1, "type": "schedule.upsert", "id": "template", "spec": spec, "job": job}
    command = decode_command(b"template", orjson.dumps(body), herd_ms - 3_600_000)
    assert isinstance(command, ScheduleUpsert), command
    def_bytes = definition_bytes(command)
    yield definition_key(def_bytes).encode(), encode_definition(def_bytes)
    for i in range(count):
        state = ScheduleState(id_format.format(i), def_bytes, None)
        state.next_ms = herd_ms
        yield state.key, encode_fire(state)


async def load_changelog(settings: Settings, records: Iterator[tuple[bytes, bytes]]) -> int:
    """Produce ``records`` to partition 0 of ``{ns}.schedules``; how many were written."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap, linger_ms=50, max_batch_size=1024 * 1024
    )
    await producer.start()
    written = 0
    try:
        topic = settings.topic(TopicKind.SCHEDULES)
        pending = []
        for key, value in records:
            pending.append(await producer.send(topic, value, key=key, partition=0))
            written += 1
            if len(pending) >= LOAD_BATCH:
                await asyncio.gather(*pending)
                pending.clear()
                log(f"  loaded {written:,} records")
        await asyncio.gather(*pending)
    finally:
        await stop_producer(producer, "stopping the loader's producer", 30)
    return written


def field(value: bytes, name: bytes) -> bytes:
    """The text of a string field of a record as orjson lays it out (``name`` is
    ``b'"field":"'``): two searches in C, no JSON parse on a watcher that must not
    take the CPU of what it watches."""
    start = value.index(name) + len(name)
    return value[start : value.index(b'"', start)]
