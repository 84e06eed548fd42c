"""End to end with Kafka targets: the same herd firing runs, then records to a user's topic.

One `kafkron scheduler` process fires ``--schedules`` schedules every second (the
``max`` phase of `e2e_fire`), twice in one run on the same broker:

- ``plain``: each schedule runs a job; committed runs/s on ``{ns}.runs``, seen by a
  read_committed consumer;
- ``target``: each schedule has a Kafka target on a topic created beforehand
  (as many partitions as the runs topic) that the scheduler is allowed to write
  (``--target-topic``); the shard writes each occurrence's record, with its headers
  and a ``succeeded`` result, in the fire's transaction; committed records/s on the
  target topic, seen by a read_committed consumer.

The figure is ``target_vs_plain``: the target's rate over the plain one, measured
minutes apart on the same machine, so the machine's speed cancels out (the bar is
0.8). Lateness is the instant the consumer sees a record minus its scheduled
instant (``kafkron-scheduled-at`` for a target record). The schedules are written
straight into the changelog by a real `ShardCore`, as in `e2e_fire`. Each phase
has a timeout, progress goes to stderr, and the last line holds the figures or says
which phase could not be measured.

    python bench/e2e_fire_target.py [--schedules 20000] [--phase-s 30] [--lead-s 45]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import e2e_fire as e2e
import measured
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from topics.admin import delete_topics
from topics.closing import bounded
from topics.names import Settings
from topics.targets import SCHEDULED_AT_HEADER, TargetTopic, TargetTopics
from topics.timefmt import parse_instant

PARTITIONS = e2e.RUNS_PARTITIONS
GROUPS = 100  # anchors over the second, as e2e_fire's max phase
BAR = 0.8


async def watch_target(
    settings: Settings, topic: str, watch: e2e.Watch, stop: asyncio.Event
) -> None:
    """Every committed target record: (visible, scheduled from its header, its timestamp)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        group_id=None,
        max_partition_fetch_bytes=8 * 1024 * 1024,
    )
    await consumer.start()
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    await consumer.seek_to_beginning()
    instants: dict[bytes, int] = {}
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200, max_records=20_000)
            visible = e2e.now_ms()
            seen = watch.seen
            for records in batch.values():
                for record in records:
                    text = next(v for k, v in record.headers if k == SCHEDULED_AT_HEADER)
                    scheduled = instants.get(text)
                    if scheduled is None:
                        scheduled = instants[text] = parse_instant(text.decode())
                    seen.append((visible, scheduled, record.timestamp))
    finally:
        await e2e.close_quietly(consumer)


async def create_topic(settings: Settings, topic: str, *, delete: bool = False) -> None:
    """Create the target topic (or delete it: it is no topic of the namespace's)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        if delete:
            await admin.delete_topics([topic])
        else:
            await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        await bounded(admin.close(), "closing the admin client")


async def herd(args: argparse.Namespace, logs: Path, *, target: bool) -> dict[str, float | None]:
    """One phase: load the herd, start a scheduler, count what becomes visible."""
    tag = "target" if target else "plain"
    settings = await e2e.new_namespace(args.bootstrap)
    # Not under "{ns}.": a namespace's own topics are never a target.
    topic = f"{settings.namespace}-orders-due"
    try:
        extra: tuple[str, ...] = ()
        does: dict[str, object] | None = None
        targets = None
        if target:
            await e2e.bounded("creating the target topic", create_topic(settings, topic), 60)
            extra = ("--target-topic", topic)
            does = {"target": {"kafka": {"topic": topic, "key": "{schedule_id}", "value": {}}}}
            targets = TargetTopics(
                allowed=(topic,),
                known={topic: TargetTopic(PARTITIONS)},
                own_prefix=f"{settings.namespace}.",
            )
        first_fire_ms = e2e.now_ms() + int(args.lead_s * 1000)
        records = e2e.changelog_records(
            args.schedules, GROUPS, 1, first_fire_ms, does=does, targets=targets
        )
        e2e.progress(f"{tag}: loading {args.schedules} schedules every second")
        await e2e.bounded("loading the changelog", e2e.produce_changelog(settings, records), 300)
        watch, stop = e2e.Watch(), asyncio.Event()
        watching = watch_target(settings, topic, watch, stop) if target else None
        watcher = asyncio.create_task(watching or e2e.watch_runs(settings, watch, stop))
        scheduler = e2e.Scheduler(settings, logs / f"{tag}.log", args.session_timeout_ms, extra)
        try:
            await e2e.wait_for(lambda: scheduler.restore_ms() is not None, 180, f"{tag} restore")
            e2e.progress(f"{tag}: restored; measuring {args.phase_s:.0f} s after the first fires")
            await asyncio.sleep(max(0.0, (first_fire_ms - e2e.now_ms()) / 1000) + 10)
            start = e2e.now_ms()
            await asyncio.sleep(args.phase_s)
            end = e2e.now_ms()
        finally:
            stop.set()
            await e2e.bounded(f"closing the {tag} watcher", watcher, 60)
            scheduler.stop()
        window = watch.window(start, end)
        late = [v - s for v, s, _ in window]
        figures: dict[str, float | None] = {
            "per_s": round(len(window) / ((end - start) / 1000), 1),
            "p50_ms": e2e.percentile(late, 0.50),
            "p99_ms": e2e.percentile(late, 0.99),
        }
        e2e.progress(f"{tag}: {figures}")
        return figures
    finally:
        await e2e.bounded("deleting the topics", delete_topics(settings), 60)
        if target:
            await e2e.bounded(
                "deleting the target topic", create_topic(settings, topic, delete=True), 60
            )


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=20_000)
    parser.add_argument("--phase-s", type=float, default=30.0)
    parser.add_argument("--lead-s", type=float, default=45.0)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--bootstrap", default=None)
    measured.add_record_option(parser)
    args = parser.parse_args(argv)
    budget = args.lead_s + args.phase_s + 600
    with tempfile.TemporaryDirectory(prefix="e2e-fire-target-") as tmp:
        logs = Path(tmp)
        plain = await e2e.bounded("the plain phase", herd(args, logs, target=False), budget)
        target = await e2e.bounded("the target phase", herd(args, logs, target=True), budget)
    plain_s, target_s = float(plain["per_s"] or 0), float(target["per_s"] or 0)
    print(f"plain (runs on {{ns}}.runs): {plain}")
    print(f"target (records on the target topic): {target}")
    if not plain_s or not target_s:
        print("bench e2e_fire_target: could not measure: a phase committed nothing")
        return 1
    ratio = target_s / plain_s
    measured.record(
        "e2e_fire_target",
        {"schedules": args.schedules, "plain_runs_s": round(plain_s), "target_vs_plain": ratio},
        argv=argv,
        to=args.record,
    )
    print(
        f"bench e2e_fire_target: schedules={args.schedules} asked_per_s={args.schedules}"
        f" phase_s={args.phase_s:.0f} plain_runs_s={plain_s:.0f} target_records_s={target_s:.0f}"
        f" target_vs_plain={ratio:.3f} (bar {BAR}: {'met' if ratio >= BAR else 'NOT met'})"
        f" plain_p50_ms={plain['p50_ms']} target_p50_ms={target['p50_ms']}"
        f" plain_p99_ms={plain['p99_ms']} target_p99_ms={target['p99_ms']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
