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
        [--record [PATH]]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from pathlib import Path

import measured
from aiokafka import AIOKafkaConsumer, TopicPartition
from e2e_fire import RUNS_PARTITIONS, Scheduler, measure_ceiling, wait_for
from herd_kit import field, herd_records, load_changelog, log, now_ms

from topics.admin import create_topics, delete_topics
from topics.closing import bounded
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms

TARGET_S = 60.0


class Herd:
    """What the watcher saw: distinct run ids, records, the last visible instant, early runs."""

    def __init__(self) -> None:
        self.run_ids: set[bytes] = set()
        self.records = 0
        self.early = 0
        self.last_visible_ms = 0


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
                    herd.run_ids.add(field(value, b'"run_id":"'))
                    # Both instants are written as YYYY-MM-DDTHH:MM:SS.mmmZ: text order
                    # is time order.
                    if field(value, b'"fired_at":"') < field(value, b'"scheduled_at":"'):
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
        records = herd_records(
            args.schedules,
            herd_ms,
            {"every": "24h", "anchor": format_ms(herd_ms)},
            {"name": "billing.nightly", "args": {"customer": "c"}},
        )
        await asyncio.wait_for(load_changelog(settings, records), args.timeout_s)
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
    measured.record(
        "midnight_herd",
        {
            "schedules": args.schedules,
            "complete": complete,
            "last_visible_s": round(last_s, 1),
            "runs_s": round(rate),
            "twice": herd.records - len(herd.run_ids),
            "early": herd.early,
            "ceiling_msgs_s": round(ceiling),
        },
        argv=sys.argv[1:],
        to=args.record,
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
    measured.add_record_option(parser)
    sys.exit(asyncio.run(main(parser.parse_args())))
