"""End to end: one `kafkron scheduler` process firing 100k schedules on the local broker.

Measured in one run, against the broker's own ceiling measured in the same run:

- ``ceiling``: transactional, batched produce of run-sized records by one Python
  producer (1,000 records per transaction) — the most a scheduler process could
  hope to commit.
- ``restore``: a 100k-schedule shard read back from its changelog (the code a new
  owner runs: `read_to_end` into `ShardCore.restore`, then `finish_restore`).
- ``steady``: 100k schedules every 20 s, spread over 1,000 anchors (5k runs/s):
  committed runs/s and lateness p50/p99, where lateness is the instant a
  read_committed consumer sees the run minus its scheduled instant.
- ``failover``: a standby scheduler waits; the owner is killed with SIGKILL; the
  time until the first run fired by the new owner is visible, against the session
  timeout plus 3 s, in two parts: ``detect`` (the kill to the standby's assignment:
  the group's session timeout and its heartbeats, not kafkron's code) and
  ``takeover`` (the assignment to the first run visible: the fence, the restore,
  the first fire and its commit, which is kafkron's). Compare versions on
  ``takeover``: ``detect`` ends at the standby's first heartbeat after the session
  expired, so it is set by where in its 3 s heartbeat cycle the kill falls. This
  script's timeline fixes that phase within a checkout (the same steps, the same
  sleeps: the same detect to 1%), and anything that changes how long an earlier step
  takes (the process start ``start_to_assigned_s``, the loading) moves it by up to a
  heartbeat interval from one checkout to another.
- ``max``: 100k schedules every second (100k runs/s asked): the sustained rate of
  committed runs one process achieves, and its fraction of the ceiling.

The schedules are written straight into the changelog (the records a shard would
write for them), so loading 100k schedules takes seconds, not a command apiece.
No workers run: runs stay in flight, which is what a scheduler under load sees.

    python bench/e2e_fire.py [--schedules 100000] [--phase-s 40] [--session-timeout-ms 10000]

With ``--nodes 3`` it measures replication's cost instead: it starts its own
single-node broker and its own three-node cluster (``kafkron broker start``'s
launcher, free ports, a temporary data dir, both stopped at the end), and runs the
``steady`` and ``max`` phases on each: committed runs/s and lateness on the cluster
(RF 3, ``min.insync.replicas`` 2, acks from two replicas) against the single node
in the same run, and their ratio.

    python bench/e2e_fire.py --nodes 3 [--schedules 20000] [--phase-s 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import measured
import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from actors.broker import cluster as broker_cluster
from actors.broker.cluster import ClusterLayout
from actors.scheduler.restore import make_restore_consumer, read_to_end
from actors.shard import ShardCore
from topics import closing
from topics.admin import create_topics, delete_topics
from topics.names import Settings, TopicKind
from topics.records import InRecord
from topics.targets import TargetTopics
from topics.timefmt import format_ms, parse_instant

REPO = Path(__file__).resolve().parent.parent
RUNS_PARTITIONS = 6
ANCHOR_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
# aiokafka's close has been seen to hang after a broker went away: bound every close.
CLOSE_TIMEOUT_S = 30.0

T = TypeVar("T")


def progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


async def bounded(what: str, awaitable: Awaitable[T], timeout_s: float) -> T:
    """`awaitable` within `timeout_s`, else exit saying which phase could not be measured."""
    try:
        return await asyncio.wait_for(awaitable, timeout_s)
    except TimeoutError:
        raise SystemExit(
            f"bench e2e_fire: could not measure: {what} exceeded {timeout_s:.0f} s"
        ) from None


async def close_quietly(client: AIOKafkaConsumer | AIOKafkaProducer) -> None:
    # wait_for would wait on a cancelled stop() that never ends: abandon it instead.
    await closing.bounded(client.stop(), "closing a client", CLOSE_TIMEOUT_S)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# --- loading schedules ---------------------------------------------------------------


def changelog_records(
    schedules: int,
    groups: int,
    period_s: int,
    first_fire_after_ms: int,
    *,
    does: dict[str, object] | None = None,
    targets: TargetTopics | None = None,
) -> list[tuple[bytes, bytes]]:
    """Changelog records of ``schedules`` schedules, written by a real `ShardCore`.

    Schedules fall into ``groups`` anchors spread evenly over the period; one record
    per group comes from the core, the rest of the group differ only in their id.
    ``does``: what they do (default a job; ``{"target": ...}`` for a Kafka target,
    whose topic ``targets`` must allow, as the scheduler's ``--target-topic``).
    """
    core = ShardCore(partition=0, partitions=1, now_ms=first_fire_after_ms, namespace="bench")
    if targets is not None:
        core.set_target_topics(targets)
    step_ms = period_s * 1000 // groups
    records: list[tuple[bytes, bytes]] = []
    per_group = schedules // groups
    for g in range(groups):
        template_id = f"g{g:04d}-00000"
        command = orjson.dumps(
            {
                "v": 1,
                "type": "schedule.upsert",
                "id": template_id,
                "spec": {"every": f"{period_s}s", "anchor": format_ms(ANCHOR_MS + g * step_ms)},
                **(does or {"job": {"name": "bench.noop", "args": {}}}),
                "overlap": "allow",
            }
        )
        out = core.apply(
            InRecord(TopicKind.COMMANDS, 0, g, template_id.encode(), command),
            first_fire_after_ms,
        )
        (template,) = [o.value for o in out if o.topic is TopicKind.SCHEDULES]
        assert template is not None
        needle = b'"id":"' + template_id.encode() + b'"'
        for j in range(per_group):
            sid = f"g{g:04d}-{j:05d}".encode()
            records.append((sid, template.replace(needle, b'"id":"' + sid + b'"', 1)))
    return records


async def produce_changelog(settings: Settings, records: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap, linger_ms=20, max_batch_size=512 * 1024
    )
    await producer.start()
    try:
        topic = settings.topic(TopicKind.SCHEDULES)
        futures = [await producer.send(topic, v, key=k, partition=0) for k, v in records]
        await asyncio.gather(*futures)
    finally:
        await close_quietly(producer)


# --- the broker's ceiling ---------------------------------------------------------------


async def ceiling_msgs_s(settings: Settings, value: bytes, count: int) -> float:
    """Transactional batched produce of ``value``-sized records, 1,000 per transaction."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap,
        transactional_id=f"{settings.namespace}-ceiling",
        linger_ms=0,
        max_batch_size=900 * 1024,
    )
    await producer.start()
    topic = settings.topic(TopicKind.RUNS)
    keys = [f"g0000-{i:05d}".encode() for i in range(1000)]

    async def produce(n: int) -> None:
        for start in range(0, n, 1000):
            async with producer.transaction():
                batches = [producer.create_batch() for _ in range(RUNS_PARTITIONS)]
                for i in range(start, min(start + 1000, n)):
                    batches[i % RUNS_PARTITIONS].append(
                        key=keys[i % 1000], value=value, timestamp=None
                    )
                for p, batch in enumerate(batches):
                    await producer.send_batch(batch, topic, partition=p)

    try:
        await produce(2_000)  # warm-up
        started = time.perf_counter()
        await produce(count)
        return count / (time.perf_counter() - started)
    finally:
        await close_quietly(producer)


async def measure_ceiling(bootstrap: str | None, value: bytes, attempts: int = 3) -> float:
    """The ceiling on a fresh namespace; a producer that stalls (a fresh topic's leader
    moving under it) is abandoned and the measure retried on another namespace."""
    for attempt in range(1, attempts + 1):
        probe = await new_namespace(bootstrap)
        try:
            await asyncio.sleep(2)  # let the fresh partitions' leadership settle
            return await asyncio.wait_for(ceiling_msgs_s(probe, value, 100_000), 120)
        except TimeoutError:
            print(f"ceiling attempt {attempt} stalled; retrying", file=sys.stderr)
        finally:
            await delete_topics(probe)
    raise SystemExit("bench e2e_fire: the broker ceiling could not be measured")


# --- watching runs -------------------------------------------------------------------------


@dataclass
class Watch:
    """Every committed run seen: when it became visible and how late that was."""

    seen: list[tuple[int, int, int]] = field(default_factory=list)  # (visible, scheduled, fired)

    def window(self, start_ms: int, end_ms: int) -> list[tuple[int, int, int]]:
        return [s for s in self.seen if start_ms <= s[0] < end_ms]


async def watch_runs(settings: Settings, watch: Watch, stop: asyncio.Event) -> None:
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
    instants: dict[str, int] = {}
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200, max_records=20_000)
            visible = now_ms()
            seen = watch.seen
            for records in batch.values():
                for record in records:
                    run = orjson.loads(record.value)
                    text = run["scheduled_at"]
                    scheduled = instants.get(text)
                    if scheduled is None:
                        scheduled = instants[text] = parse_instant(text)
                    seen.append((visible, scheduled, parse_instant(run["fired_at"])))
    finally:
        await close_quietly(consumer)


def percentile(values: list[int], q: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


# --- scheduler processes -----------------------------------------------------------------


class Scheduler:
    def __init__(
        self, settings: Settings, log: Path, session_timeout_ms: int, extra: tuple[str, ...] = ()
    ) -> None:
        env = {
            **os.environ,
            "KAFKRON_NAMESPACE": settings.namespace,
            "KAFKRON_BOOTSTRAP": settings.bootstrap,
        }
        self.log = log
        self._out = log.open("wb")
        self.spawned_ms = now_ms()
        options = ["--session-timeout-ms", str(session_timeout_ms)]
        options += ["--heartbeat-ms", str(session_timeout_ms // 3), "--figures-interval-s", "10"]
        options += extra
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "actors.cli", "scheduler", *options],
            cwd=REPO,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def owns_shard_0(self) -> bool:
        owned = re.findall(r"assigned shards (\[[0-9, ]*\])", self.text())
        return bool(owned) and 0 in orjson.loads(owned[-1])

    def assigned_ms(self, after_ms: int) -> int | None:
        """When this process logged shard 0 assigned, first at or after ``after_ms``
        (epoch ms; the log's instants are local time to the millisecond)."""
        for stamp, shards in re.findall(
            r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ kafkron\.scheduler"
            r" assigned shards (\[[0-9, ]*\])$",
            self.text(),
            re.MULTILINE,
        ):
            at_ms = int(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000)
            if at_ms >= after_ms and 0 in orjson.loads(shards):
                return at_ms
        return None

    def restore_ms(self) -> float | None:
        # "shard 0: N changelog records (...) restored in X ms" (older: "shard 0 taken on: ...")
        found = re.findall(r"shard 0(?: taken on)?: .* restored in (\d+) ms", self.text())
        return float(found[-1]) if found else None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()


async def wait_for(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.2)
    raise SystemExit(f"bench e2e_fire: timed out waiting for {what}")


async def new_namespace(bootstrap: str | None) -> Settings:
    settings = Settings.from_env(namespace=f"bench-{uuid.uuid4().hex[:8]}", bootstrap=bootstrap)
    await create_topics(settings, partitions=1, runs_partitions=RUNS_PARTITIONS)
    return settings


# --- phases --------------------------------------------------------------------------------


async def measure_restore(settings: Settings) -> tuple[float, int]:
    consumer = make_restore_consumer(settings.bootstrap, f"{settings.namespace}-bench-restore")
    await consumer.start()
    try:
        started = time.perf_counter()
        core = ShardCore(partition=0, partitions=1, now_ms=now_ms(), namespace=settings.namespace)
        tp = TopicPartition(settings.topic(TopicKind.SCHEDULES), 0)
        await read_to_end(consumer, tp, core.restore)
        core.finish_restore(now_ms())
        return time.perf_counter() - started, int(core.stats["schedules"])
    finally:
        await close_quietly(consumer)


async def steady_and_failover(
    args: argparse.Namespace, logs: Path
) -> tuple[float, dict[str, float | int | None]]:
    settings = await new_namespace(args.bootstrap)
    try:
        first_fire_ms = now_ms() + int(args.lead_s * 1000)
        records = changelog_records(args.schedules, 1000, 20, first_fire_ms)
        await produce_changelog(settings, records)
        restore_s, restored = await measure_restore(settings)
        assert restored == args.schedules, f"restored {restored} of {args.schedules}"
        watch, stop = Watch(), asyncio.Event()
        watcher = asyncio.create_task(watch_runs(settings, watch, stop))
        owner = Scheduler(settings, logs / "steady-owner.log", args.session_timeout_ms)
        await wait_for(owner.owns_shard_0, 120, "the owner to take shard 0")
        standby = Scheduler(settings, logs / "steady-standby.log", args.session_timeout_ms)
        await wait_for(lambda: owner.restore_ms() is not None, 120, "the owner's restore")
        # The standby joining rebalances the group; wait until the owner has shard 0 again.
        await asyncio.sleep(max(0.0, (first_fire_ms - now_ms()) / 1000) + 20)
        start = now_ms()
        await asyncio.sleep(args.phase_s)
        end = now_ms()
        window = watch.window(start, end)
        late = [v - s for v, s, _ in window]
        figures: dict[str, float | int | None] = {
            "steady_runs_s": round(len(window) / ((end - start) / 1000), 1),
            "steady_p50_ms": percentile(late, 0.50),
            "steady_p99_ms": percentile(late, 0.99),
            "restore_in_scheduler_ms": owner.restore_ms(),
        }
        victim, survivor = (owner, standby) if owner.owns_shard_0() else (standby, owner)
        killed_ms = now_ms()
        victim.proc.send_signal(signal.SIGKILL)
        await wait_for(
            lambda: any(f > killed_ms for _, _, f in watch.seen[-5000:]),
            args.session_timeout_ms / 1000 + 120,
            "a run fired by the new owner",
        )
        first = min(v for v, _, f in watch.seen if f > killed_ms)
        figures["failover_first_fire_s"] = round((first - killed_ms) / 1000, 2)
        assigned_ms = survivor.assigned_ms(killed_ms)
        if assigned_ms is not None:  # its log says when the group handed shard 0 over
            figures["failover_detect_s"] = round((assigned_ms - killed_ms) / 1000, 2)
            figures["failover_takeover_s"] = round((first - assigned_ms) / 1000, 2)
        started_ms = owner.assigned_ms(owner.spawned_ms)
        if started_ms is not None:
            figures["start_to_assigned_s"] = round((started_ms - owner.spawned_ms) / 1000, 2)
        figures["failover_budget_s"] = args.session_timeout_ms / 1000 + 3
        stop.set()
        await watcher
        survivor.stop()
        victim.stop()
        return restore_s, figures
    finally:
        await delete_topics(settings)


async def max_rate(args: argparse.Namespace, logs: Path) -> dict[str, float | int | None]:
    settings = await new_namespace(args.bootstrap)
    try:
        first_fire_ms = now_ms() + int(args.lead_s * 1000)
        records = changelog_records(args.schedules, 100, 1, first_fire_ms)
        await produce_changelog(settings, records)
        watch, stop = Watch(), asyncio.Event()
        watcher = asyncio.create_task(watch_runs(settings, watch, stop))
        scheduler = Scheduler(settings, logs / "max.log", args.session_timeout_ms)
        await wait_for(lambda: scheduler.restore_ms() is not None, 180, "the restore")
        await asyncio.sleep(max(0.0, (first_fire_ms - now_ms()) / 1000) + 10)
        start = now_ms()
        await asyncio.sleep(args.phase_s)
        end = now_ms()
        window = watch.window(start, end)
        stop.set()
        await watcher
        scheduler.stop()
        late = [v - s for v, s, _ in window]
        return {
            "max_runs_s": round(len(window) / ((end - start) / 1000), 1),
            "max_p50_ms": percentile(late, 0.50),
        }
    finally:
        await delete_topics(settings)


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--phase-s", type=float, default=40.0)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument(
        "--lead-s", type=float, default=60.0, help="seconds between loading and the first fire"
    )
    parser.add_argument(
        "--nodes",
        type=int,
        default=None,
        help="measure a cluster of this many local nodes against a single node (own brokers)",
    )
    measured.add_record_option(parser)
    args = parser.parse_args(argv)
    if args.nodes is not None:
        if args.nodes < 2:
            parser.error("--nodes must be at least 2 (it is compared with a single node)")
        return await cluster_vs_single(args)
    with tempfile.TemporaryDirectory(prefix="e2e-fire-") as tmp:
        logs = Path(tmp)
        sample = changelog_records(1, 1, 20, now_ms())[0][1]
        run_sized = os.urandom(min(len(sample), 400))
        ceiling = await measure_ceiling(args.bootstrap, run_sized)
        restore_s, steady = await steady_and_failover(args, logs)
        fastest = await max_rate(args, logs)
    print(f"ceiling (txn, batched, {len(run_sized)} B records): {ceiling:,.0f} msgs/s")
    print(f"restore of {args.schedules} schedules: {restore_s:.2f} s")
    print(f"steady 5k/s asked: {steady}")
    print(f"max (100k/s asked): {fastest}")
    max_runs = float(fastest["max_runs_s"] or 0)
    print(
        f"bench e2e_fire: schedules={args.schedules} ceiling_msgs_s={ceiling:.0f}"
        f" max_runs_s={max_runs:.0f} max_vs_ceiling={max_runs / ceiling:.3f}"
        f" steady_runs_s={steady['steady_runs_s']} steady_p50_ms={steady['steady_p50_ms']}"
        f" steady_p99_ms={steady['steady_p99_ms']} restore_100k_s={restore_s:.2f}"
        f" failover_first_fire_s={steady['failover_first_fire_s']}"
        f" failover_detect_s={steady.get('failover_detect_s')}"
        f" failover_takeover_s={steady.get('failover_takeover_s')}"
        f" start_to_assigned_s={steady.get('start_to_assigned_s')}"
        f" failover_budget_s={steady['failover_budget_s']}"
    )
    first_fire_s = steady["failover_first_fire_s"]
    measured.record(
        "e2e_fire",
        {
            "schedules": args.schedules,
            "max_runs_s": round(max_runs),
            "ceiling_msgs_s": round(ceiling),
            "restore_s": round(restore_s, 2),
            "failover_first_fire_s": ("not measured" if first_fire_s is None else first_fire_s),
            "failover_takeover_s": steady.get("failover_takeover_s") or "not measured",
            "session_timeout_ms": args.session_timeout_ms,
        },
        argv=argv,
        to=args.record,
    )
    return 0


# --- cluster against single node -----------------------------------------------------------


def _free_port_block(size: int) -> int:
    for base in range(21000, 60000, 97):
        try:
            with contextlib.ExitStack() as stack:
                for port in range(base, base + size):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise SystemExit("bench e2e_fire: no block of free ports")


@contextlib.asynccontextmanager
async def own_brokers(nodes: int, data_dir: Path) -> AsyncIterator[str]:
    """A local cluster of `nodes` (1: a single broker) for the phase; always stopped.

    The launcher blocks (and runs its own probes' event loops): it runs in a thread.
    """
    layout = ClusterLayout(port=_free_port_block(2 * nodes), data_dir=data_dir, nodes=nodes)
    progress(f"starting {nodes} node(s) on {layout.bootstrap}")
    try:
        await asyncio.to_thread(broker_cluster.start, layout, 240)
        yield layout.bootstrap
    finally:
        progress(f"stopping {nodes} node(s)")
        await asyncio.to_thread(broker_cluster.stop, layout)


async def steady(args: argparse.Namespace, logs: Path, tag: str) -> dict[str, float | int | None]:
    """The steady phase alone: 5k runs/s asked, committed runs/s and lateness."""
    settings = await new_namespace(args.bootstrap)
    try:
        first_fire_ms = now_ms() + int(args.lead_s * 1000)
        records = changelog_records(args.schedules, 1000, 20, first_fire_ms)
        await bounded("loading the changelog", produce_changelog(settings, records), 300)
        watch, stop = Watch(), asyncio.Event()
        watcher = asyncio.create_task(watch_runs(settings, watch, stop))
        scheduler = Scheduler(settings, logs / f"steady-{tag}.log", args.session_timeout_ms)
        try:
            await wait_for(lambda: scheduler.restore_ms() is not None, 180, "the restore")
            await asyncio.sleep(max(0.0, (first_fire_ms - now_ms()) / 1000) + 10)
            start = now_ms()
            await asyncio.sleep(args.phase_s)
            end = now_ms()
        finally:
            stop.set()
            await bounded("closing the watcher", watcher, 60)
            scheduler.stop()
        window = watch.window(start, end)
        late = [v - s for v, s, _ in window]
        return {
            "runs_s": round(len(window) / ((end - start) / 1000), 1),
            "p50_ms": percentile(late, 0.50),
            "p99_ms": percentile(late, 0.99),
        }
    finally:
        await bounded("deleting the topics", delete_topics(settings), 60)


async def on_brokers(
    args: argparse.Namespace, logs: Path, nodes: int
) -> dict[str, float | int | None]:
    async with own_brokers(nodes, logs / f"kafka-{nodes}") as bootstrap:
        args.bootstrap = bootstrap
        progress(f"{nodes} node(s): steady phase ({args.schedules} schedules every 20 s)")
        steady_figures = await bounded("steady", steady(args, logs, f"{nodes}"), args.phase_s + 600)
        progress(f"{nodes} node(s): steady {steady_figures}; max phase (every second)")
        fastest = await bounded("max", max_rate(args, logs), args.phase_s + 600)
        progress(f"{nodes} node(s): max {fastest}")
    return {
        "steady_runs_s": float(steady_figures["runs_s"] or 0),
        "steady_p99_ms": steady_figures["p99_ms"],
        "max_runs_s": float(fastest["max_runs_s"] or 0),
        "max_p50_ms": fastest["max_p50_ms"],
    }


async def cluster_vs_single(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="e2e-fire-nodes-") as tmp:
        logs = Path(tmp)
        single = await on_brokers(args, logs, 1)
        cluster = await on_brokers(args, logs, args.nodes)
    print(f"single node: {single}")
    print(f"{args.nodes} nodes (RF 3, min.insync.replicas 2): {cluster}")
    single_max, cluster_max = float(single["max_runs_s"] or 0), float(cluster["max_runs_s"] or 0)
    single_steady = float(single["steady_runs_s"] or 0)
    cluster_steady = float(cluster["steady_runs_s"] or 0)
    if not single_max or not single_steady:
        print("bench e2e_fire: could not measure: the single node committed no runs")
        return 1
    ratio_max, ratio_steady = cluster_max / single_max, cluster_steady / single_steady
    print(
        f"bench e2e_fire --nodes {args.nodes}: schedules={args.schedules}"
        f" single_max_runs_s={single_max:.0f} cluster_max_runs_s={cluster_max:.0f}"
        f" cluster_vs_single_max={ratio_max:.3f}"
        f" single_steady_runs_s={single_steady:.0f} cluster_steady_runs_s={cluster_steady:.0f}"
        f" cluster_vs_single_steady={ratio_steady:.3f}"
        f" single_steady_p99_ms={single['steady_p99_ms']}"
        f" cluster_steady_p99_ms={cluster['steady_p99_ms']}"
        f" single_max_p50_ms={single['max_p50_ms']} cluster_max_p50_ms={cluster['max_p50_ms']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
