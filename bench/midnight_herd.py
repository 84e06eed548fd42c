"""The midnight herd: a million schedules due at the same instant, one scheduler process.

"Every customer's nightly job": ``--schedules`` daily schedules (default 1M) all
due at one instant H, on one shard held by one `kafkron scheduler` process on
the local broker. The changelog is written straight from the shard's own encoders
(a definition's record and one version-2 record per schedule, as a shard that has
fired them before holds), so loading takes seconds; the scheduler restores it,
then H comes. A read_committed consumer watches ``{ns}.runs``:

- when the last run became visible, after H (target: all by H + 60 s, which is
  >= 16.7k runs/s for 1M);
- none early (every run's ``fired_at`` at or after its ``scheduled_at``), none
  twice (as many distinct run ids as records).

Baseline, measured in the same run: the broker's transactional produce ceiling
(as in e2e_fire.py: one producer, 1,000 records per transaction), so the herd's
rate is also printed as a fraction of what one process could hope to commit.

    python bench/midnight_herd.py [--schedules 1000000] [--lead-s 120] [--timeout-s 900]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from e2e_fire import RUNS_PARTITIONS, Scheduler, measure_ceiling, wait_for

from actors.shard.definition import definition_bytes
from actors.shard.state import ScheduleState, definition_key, encode_definition, encode_fire
from topics.admin import create_topics, delete_topics
from topics.closing import bounded, stop_producer
from topics.commands import ScheduleUpsert, decode_command
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms

TARGET_S = 60.0


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def herd_records(count: int, herd_ms: int) -> list[tuple[bytes, bytes]]:
    """The changelog of ``count`` daily schedules due at ``herd_ms``, by the shard's encoders."""
    body = {
        "v": 1,
        "type": "schedule.upsert",
        "id": "template",
        "spec": {"every": "24h", "anchor": format_ms(herd_ms)},
        "job": {"name": "billing.nightly", "args": {"customer": "c"}},
    }
    command = decode_command(b"template", orjson.dumps(body), herd_ms - 3_600_000)
    assert isinstance(command, ScheduleUpsert), command
    def_bytes = definition_bytes(command)
    records = [(definition_key(def_bytes).encode(), encode_definition(def_bytes))]
    for i in range(count):
        state = ScheduleState(f"customer-{i:07d}-nightly", def_bytes, None)
        state.next_ms = herd_ms
        records.append((state.key, encode_fire(state)))
    return records


async def produce(settings: Settings, records: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap, linger_ms=50, max_batch_size=1024 * 1024
    )
    await producer.start()
    try:
        topic = settings.topic(TopicKind.SCHEDULES)
        pending = []
        for i, (key, value) in enumerate(records):
            pending.append(await producer.send(topic, value, key=key, partition=0))
            if len(pending) >= 50_000:
                await asyncio.gather(*pending)
                pending.clear()
                log(f"  loaded {i + 1:,} records")
        await asyncio.gather(*pending)
    finally:
        await stop_producer(producer, "stopping the loader's producer", 30)


class Herd:
    """What the watcher saw: distinct run ids, records, the last visible instant, early runs."""

    def __init__(self) -> None:
        self.run_ids: set[bytes] = set()
        self.records = 0
        self.early = 0
        self.last_visible_ms = 0


def _field(value: bytes, name: bytes) -> bytes:
    """The text of a string field of a run record as `run_value` lays it out."""
    start = value.index(name) + len(name)
    return value[start : value.index(b'"', start)]


async def watch(settings: Settings, herd: Herd, expected: int, stop: asyncio.Event) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        group_id=None,
        max_partition_fetch_bytes=8 * 1024 * 1024,
    )
    await consumer.start()
    topic = settings.topic(TopicKind.RUNS)
    consumer.assign([TopicPartition(topic, p) for p in range(RUNS_PARTITIONS)])
    await consumer.seek_to_beginning()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200, max_records=20_000)
            visible = now_ms()
            for records in batch.values():
                for record in records:
                    value = record.value
                    herd.records += 1
                    herd.run_ids.add(_field(value, b'"run_id":"'))
                    # Both instants are written as YYYY-MM-DDTHH:MM:SS.mmmZ: text order
                    # is time order.
                    if _field(value, b'"fired_at":"') < _field(value, b'"scheduled_at":"'):
                        herd.early += 1
                    herd.last_visible_ms = visible
            if batch and herd.records % 100_000 < 20_000:
                log(f"  {herd.records:,} runs visible")
            if herd.records >= expected:
                return
    finally:
        if not await bounded(consumer.stop(), "stopping the watcher's consumer", 10):
            log("  the watcher's consumer did not close within 10 s; leaving it")


async def main(args: argparse.Namespace) -> int:
    run_sized = os.urandom(400)
    log("the broker's transactional ceiling ...")
    ceiling = await measure_ceiling(args.bootstrap, run_sized)
    settings = Settings.from_env(
        namespace=f"bench-{uuid.uuid4().hex[:8]}", bootstrap=args.bootstrap
    )
    await create_topics(settings, partitions=1, runs_partitions=RUNS_PARTITIONS)
    scheduler = None
    try:
        herd_ms = (now_ms() + int(args.lead_s * 1000)) // 1000 * 1000
        log(f"loading {args.schedules:,} schedules due at {format_ms(herd_ms)} ...")
        records = herd_records(args.schedules, herd_ms)
        await asyncio.wait_for(produce(settings, records), args.timeout_s)
        del records
        herd, stop = Herd(), asyncio.Event()
        watcher = asyncio.create_task(watch(settings, herd, args.schedules, stop))
        with tempfile.TemporaryDirectory(prefix="midnight-herd-") as tmp:
            scheduler = Scheduler(settings, Path(tmp) / "scheduler.log", 10_000)
            await wait_for(lambda: scheduler.restore_ms() is not None, args.timeout_s, "restore")
            restore_ms = scheduler.restore_ms()
            restored_at = now_ms()
            log(f"restored in {restore_ms} ms, {(herd_ms - restored_at) / 1000:.1f} s before H")
            try:
                await asyncio.wait_for(watcher, args.timeout_s)
            except TimeoutError:
                stop.set()
                log("the herd did not finish in time")
            tail = scheduler.text()[-3000:]
            scheduler.stop()
            scheduler = None
    finally:
        if scheduler is not None:
            scheduler.stop()
        await delete_topics(settings)
    if herd.records == 0:
        log(tail)
        print("bench midnight_herd: could not measure (no run became visible)")
        return 1
    last_s = (herd.last_visible_ms - herd_ms) / 1000
    rate = len(herd.run_ids) / max(last_s, 0.001)
    complete = len(herd.run_ids) == args.schedules
    met = complete and last_s <= TARGET_S
    print(
        f"herd of {args.schedules:,} at {format_ms(herd_ms)}: {len(herd.run_ids):,} runs, "
        f"the last visible {last_s:.1f} s after H ({rate:,.0f} runs/s; target all by "
        f"{TARGET_S:.0f} s); {herd.records - len(herd.run_ids)} twice, {herd.early} early; "
        f"restored {(herd_ms - restored_at) / 1000:.1f} s before H in {restore_ms} ms; "
        f"broker ceiling {ceiling:,.0f} msgs/s"
    )
    print(
        f"bench midnight_herd: schedules={args.schedules} complete={complete} "
        f"last_visible_s={last_s:.1f} runs_s={rate:.0f} target_met={met} "
        f"twice={herd.records - len(herd.run_ids)} early={herd.early} "
        f"restore_ms={restore_ms} restored_before_h_s={(herd_ms - restored_at) / 1000:.1f} "
        f"ceiling_msgs_s={ceiling:.0f} herd_vs_ceiling={rate / ceiling:.3f}"
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument(
        "--lead-s", type=float, default=120.0, help="seconds from loading to H (the restore fits)"
    )
    parser.add_argument("--timeout-s", type=float, default=900.0, help="bound of each phase")
    parser.add_argument("--bootstrap", default=None)
    sys.exit(asyncio.run(main(parser.parse_args())))
