"""A million schedules: one shard restored from the real broker, time and memory.

What a new owner does at a takeover, on the local broker, with a changelog of
``--schedules`` hourly schedules (the records a shard writes once its schedules
fired: version-2 records and 1,000 definitions' own records; ``--changelog 1``
writes the full records of a changelog from before version 2 instead):

- ``bare``: a read_committed consumer reads the partition to its end and drops
  every record (the baseline: what reading alone costs in this process);
- ``restore``: `read_to_end` into `ShardCore.restore`, then `finish_restore`, with
  the runtime's garbage-collector settings (young threshold, ``gc.freeze`` after).

Each phase runs in a fresh Python process, so its peak resident memory (the
kernel's high-water mark) is its own: the restore phase reports the RSS of a
process holding the whole shard, which is the issue's memory target
(<= 400 MiB for 1M schedules), next to the restore time (<= 5 s).

``--profile`` runs each phase under cProfile and prints its top 20 (by own time)
to stderr: where a restore's time goes (reading, decoding, rebuilding the core).

    python bench/restore_1m.py [--schedules 1000000] [--phase-timeout-s 300] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import pstats
import subprocess
import sys
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaProducer, TopicPartition

from actors.collector import YOUNG_THRESHOLD
from actors.scheduler.restore import make_restore_consumer, read_to_end
from actors.shard import ShardCore
from topics.admin import create_topics, delete_topics
from topics.closing import bounded, stop_producer
from topics.names import Settings, TopicKind

HERE = Path(__file__).resolve().parent
TARGET_S = 5.0
TARGET_RSS_MIB = 400.0


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def rss_mib() -> tuple[float, float]:
    """(current, peak) resident memory of this process in MiB.

    The peak is the kernel's high-water mark of this process image (VmHWM), not
    getrusage's ru_maxrss, which a child inherits from its parent at fork.
    """
    found = {"VmRSS:": 0, "VmHWM:": 0}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            name = line.split(maxsplit=1)[0] if line.strip() else ""
            if name in found:
                found[name] = int(line.split()[1])
    return found["VmRSS:"] / 1024, found["VmHWM:"] / 1024


async def produce(settings: Settings, count: int, version: int) -> int:
    sys.path.insert(0, str(HERE))
    from shard_core import changelog_records  # the same records as the core benchmark

    records = changelog_records(count, version)
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
                log(f"  produced {i + 1:,} records")
        await asyncio.gather(*pending)
    finally:
        await stop_producer(producer, "stopping the loader's producer", 30)
    return len(records)


async def phase(settings: Settings, name: str, profile: bool = False) -> dict[str, float]:
    """One phase, in this (fresh) process; returns its figures."""
    profiler = cProfile.Profile() if profile else None
    consumer = make_restore_consumer(settings.bootstrap, f"{settings.namespace}-bench-{name}")
    await consumer.start()
    try:
        tp = TopicPartition(settings.topic(TopicKind.SCHEDULES), 0)
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, older, oldest)  # as the scheduler does
        started = time.perf_counter()
        now_ms = time.time_ns() // 1_000_000
        if profiler is not None:
            profiler.enable()
        if name == "bare":
            result = await read_to_end(consumer, tp, lambda key, value: None)
            schedules = 0
        else:
            core = ShardCore(partition=0, partitions=1, now_ms=now_ms)
            result = await read_to_end(consumer, tp, core.restore)
            core.finish_restore(now_ms)
            gc.freeze()
            schedules = int(core.stats["schedules"])
        elapsed_s = time.perf_counter() - started
        if profiler is not None:
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(20)
            log(f"  {name}: cProfile top 20 by own time (profiled, so slower)\n{text.getvalue()}")
        current, peak = rss_mib()
        return {
            "seconds": elapsed_s,
            "records": result.records,
            "schedules": schedules,
            "rss_mib": current,
            "peak_rss_mib": peak,
        }
    finally:
        log(f"  {name}: measured, closing the consumer")
        # A client's close has been seen to hang: the figures are taken already.
        if not await bounded(consumer.stop(), f"{name}: stopping the consumer", 10):
            log(f"  {name}: the consumer did not close within 10 s; leaving it")


def run_phase(args: argparse.Namespace, namespace: str, name: str) -> dict[str, float] | None:
    command = [sys.executable, __file__, "--phase", name, "--namespace", namespace]
    if args.bootstrap:
        command += ["--bootstrap", args.bootstrap]
    if args.profile:
        command += ["--profile"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=args.phase_timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        log(f"phase {name}: no answer within {args.phase_timeout_s} s")
        return None
    log(done.stderr.strip()[-6000:] if args.profile else done.stderr.strip()[-1000:])
    if done.returncode != 0:
        log(f"phase {name} failed:\n{done.stderr[-2000:]}")
        return None
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


async def main(args: argparse.Namespace) -> int:
    if args.phase:
        settings = Settings.from_env(namespace=args.namespace, bootstrap=args.bootstrap)
        print(json.dumps(await phase(settings, args.phase, args.profile)), flush=True)
        os._exit(0)  # nothing left to wait for: not even a client that will not close
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    settings = Settings.from_env(namespace=namespace, bootstrap=args.bootstrap)
    await create_topics(settings, partitions=1)
    try:
        log(f"writing {args.schedules:,} schedules (changelog v{args.changelog}) ...")
        started = time.perf_counter()
        try:
            written = await asyncio.wait_for(
                produce(settings, args.schedules, args.changelog), args.phase_timeout_s
            )
        except TimeoutError:
            print(
                f"bench restore_1m: could not measure (loading took over {args.phase_timeout_s} s)"
            )
            return 1
        log(f"  {written:,} records in {time.perf_counter() - started:.1f} s")
        results = {}
        for name in ("bare", "restore"):
            log(f"phase {name} ...")
            figures = run_phase(args, namespace, name)
            if figures is None:
                print(f"bench restore_1m: could not measure (phase {name} failed)")
                return 1
            log(f"  {figures}")
            results[name] = figures
    finally:
        await delete_topics(settings)
    bare, restore = results["bare"], results["restore"]
    if restore["schedules"] != args.schedules:
        print(f"bench restore_1m: could not measure (restored {restore['schedules']:.0f})")
        return 1
    print(
        f"restore of {args.schedules:,} schedules: {restore['seconds']:.2f} s "
        f"(reading alone {bare['seconds']:.2f} s, "
        f"ratio {restore['seconds'] / bare['seconds']:.2f}); "
        f"RSS {restore['rss_mib']:.0f} MiB after, peak {restore['peak_rss_mib']:.0f} MiB "
        f"(reading alone peaks at {bare['peak_rss_mib']:.0f} MiB)"
    )
    print(
        f"bench restore_1m: schedules={args.schedules} changelog=v{args.changelog} "
        f"records={restore['records']:.0f} restore_s={restore['seconds']:.2f} "
        f"read_only_s={bare['seconds']:.2f} "
        f"restore_vs_read={restore['seconds'] / bare['seconds']:.2f} "
        f"restore_target_met={restore['seconds'] <= TARGET_S} "
        f"rss_mib={restore['rss_mib']:.0f} peak_rss_mib={restore['peak_rss_mib']:.0f} "
        f"rss_target_met={restore['peak_rss_mib'] <= TARGET_RSS_MIB} "
        f"read_only_peak_rss_mib={bare['peak_rss_mib']:.0f}"
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument("--changelog", type=int, choices=(1, 2), default=2)
    parser.add_argument("--phase-timeout-s", type=float, default=300.0)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--profile", action="store_true", help="cProfile each phase")
    parser.add_argument("--phase", choices=("bare", "restore"), help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.schedules < 1_000:
        parser.error("--schedules must be at least 1000 (one per definition)")
    sys.exit(asyncio.run(main(parsed)))
