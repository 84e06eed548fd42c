"""Helpers of the three-node cluster tests: the cluster fixture's launcher, the load, the check.

The cluster is started with the product's own launcher (`kafkron broker start
--nodes 3`) on ports and a data dir of its own, so it runs beside the shared
single-node broker of the other tests. Faults go through the launcher too
(``broker stop --node N [--kill]``, ``broker start --node N``, `actors.broker.cluster`'s
``lose_disk``), except SIGSTOP, which is a signal to the node's pid.

The load of every scenario: 300 every-second schedules (half produced with
aiokafka's murmur2 partitioner, half with kcat's CRC32, so commands also reach
shards that must forward them), three `kafkron scheduler` and two `kafkron
worker` processes running a no-op job. The check reads ``{ns}.runs`` and
``{ns}.results`` read_committed with a fresh consumer and asserts, over the
window: no duplicate run, no gap that is not reported, nothing early, and exactly
one visible result per ``(run_id, attempt)`` that ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from actors.broker import quorum
from actors.broker.cluster import ClusterLayout
from actors.broker.errors import BrokerError
from actors.views.tail import read_to_end
from tests.kit.ports import free_port_block
from tests.kit.scheduler import (
    REPO,
    Progress,
    RunsReport,
    SchedulerProcesses,
    check_runs,
    now_ms,
    produce,
    upsert,
)
from tests.kit.worker import WorkerProcess, wait_until_split
from topics.admin import admin_client
from topics.messages import PROGRESS_STATUS, parse_result, parse_run
from topics.names import Settings, TopicKind

# Brokers go down on purpose here; aiokafka would log every refused reconnect.
logging.getLogger("aiokafka").setLevel(logging.CRITICAL)

NODES = 3
SHARDS = 6
SCHEDULES = 300
SCHEDULERS = 3
WORKERS = 2


@dataclass
class Cluster:
    """A running local cluster, driven through the `kafkron broker` command."""

    layout: ClusterLayout

    @property
    def bootstrap(self) -> str:
        return self.layout.bootstrap

    def broker(self, action: str, *extra: str, timeout_s: float = 300) -> str:
        where = ["--port", str(self.layout.port), "--data-dir", str(self.layout.data_dir)]
        done = subprocess.run(
            [sys.executable, "-m", "actors.cli", "broker", action, *where, *extra],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        assert done.returncode == 0, f"broker {action} {extra} failed: {done.stdout}{done.stderr}"
        return done.stdout

    def start(self) -> None:
        self.broker("start", "--nodes", str(self.layout.nodes))

    def stop(self) -> None:
        self.broker("stop")

    def kill_node(self, n: int) -> None:
        self.broker("stop", "--node", str(n), "--kill")

    def stop_node(self, n: int) -> None:
        self.broker("stop", "--node", str(n))

    def start_node(self, n: int) -> None:
        self.broker("start", "--node", str(n))

    def pid(self, n: int) -> int:
        from actors.broker import process

        pid = process.running_pid(self.layout.node(n))
        assert pid is not None, f"node {n} is not running"
        return pid

    async def view(self) -> quorum.ClusterView:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = await quorum.describe(self.bootstrap)
            if found is not None:
                return found
            await asyncio.sleep(1)
        raise AssertionError("no node of the cluster answers")

    async def wait_healthy(self, timeout_s: float = 180) -> None:
        """Until every node is registered and every partition has all replicas in sync."""
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            found = await quorum.describe(self.bootstrap)
            if found is not None and len(found.brokers) == self.layout.nodes:
                lagging = await under_replicated(Settings(bootstrap=self.bootstrap))
                if not lagging and not found.leaderless:
                    return
                last = f"under-replicated: {lagging[:5]}"
            await asyncio.sleep(1)
        raise AssertionError(f"the cluster did not heal within {timeout_s:.0f} s; {last}")

    async def healthy_namespace(self) -> Settings:
        """Once the cluster is healthy, settings for a namespace of the test's own: its
        topics never meet another test's, nor a run before it on the same cluster."""
        await self.wait_healthy()
        return Settings(namespace=f"t-{uuid.uuid4().hex[:8]}", bootstrap=self.bootstrap)


async def under_replicated(settings: Settings) -> list[str]:
    """Partitions (every topic) whose in-sync replicas are fewer than their replicas."""
    async with admin_client(settings) as admin:
        names = [t for t in await admin.list_topics() if not t.startswith("__cluster")]
        described = await admin.describe_topics(names)
    return [
        f"{t['topic']}[{p['partition']}] isr={p['isr']} replicas={p['replicas']}"
        for t in described
        for p in t["partitions"]
        if len(p["isr"]) < len(p["replicas"])
    ]


# A cluster started beforehand (`.ci/run` starts one with `kafkron broker start --nodes 3`
# and stops it on exit whatever happens): its base port, and its data dir if not the
# broker command's default for that port. Unset: the fixture starts one of its own.
CLUSTER_PORT_ENV = "KAFKRON_CLUSTER_PORT"
CLUSTER_DATA_DIR_ENV = "KAFKRON_CLUSTER_DATA_DIR"


def given_cluster() -> Cluster | None:
    """The cluster the environment names, checked to be a running `NODES`-node one."""
    port = os.environ.get(CLUSTER_PORT_ENV)
    if not port:
        return None
    try:
        layout = ClusterLayout.resolve(int(port), os.environ.get(CLUSTER_DATA_DIR_ENV) or None)
    except (ValueError, BrokerError) as exc:
        raise AssertionError(f"{CLUSTER_PORT_ENV}={port}: {exc}") from exc
    if layout.nodes != NODES:
        raise AssertionError(
            f"{CLUSTER_PORT_ENV}={port} names a {layout.nodes}-node cluster ({layout.data_dir});"
            f" the tests need {NODES}: kafkron broker start --nodes {NODES} --port {port}"
        )
    return Cluster(layout)


@contextlib.contextmanager
def running_cluster(tmp: Path) -> Iterator[Cluster]:
    """A three-node cluster for the duration.

    The one named by `KAFKRON_CLUSTER_PORT` if set (left running: whoever started it
    stops it), else one of its own on free ports, stopped (every node) even on failure.
    """
    given = given_cluster()
    if given is not None:
        # Every node must be up: a node a crashed earlier run left down is started again.
        given.start()
        yield given
        return
    layout = ClusterLayout(port=free_port_block(2 * NODES), data_dir=tmp / "cluster", nodes=NODES)
    cluster = Cluster(layout)
    try:
        cluster.start()
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.stop()


# --- the load ----------------------------------------------------------------------------


def kcat_commands(settings: Settings, records: list[tuple[str, bytes]]) -> None:
    """Produce (key, value) commands with kcat (librdkafka, CRC32 partitioner, acks=all)."""
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed: apt-get install -y kcat"
    lines = []
    for key, value in records:
        assert b"|" not in value and b"\n" not in value
        lines.append(key.encode() + b"|" + value)
    subprocess.run(
        [kcat, "-P", "-b", settings.bootstrap, "-t", settings.topic(TopicKind.COMMANDS), "-K", "|"],
        input=b"\n".join(lines) + b"\n",
        check=True,
        timeout=120,
    )


@dataclass
class Load:
    """Schedulers and workers of one namespace, the schedules, and what has fired."""

    settings: Settings
    schedulers: SchedulerProcesses
    workers: list[WorkerProcess]
    ids: list[str]
    progress: Progress = field(default_factory=Progress)
    # When the watcher first saw each (run_id, attempt): what a worker would see.
    visible_ms: dict[tuple[str, int], int] = field(default_factory=dict)
    scheduler_codes: list[int | None] = field(default_factory=list)
    worker_codes: list[int] = field(default_factory=list)

    def logs(self) -> str:
        return self.schedulers.logs() + "\n" + "\n".join(w.log()[-3000:] for w in self.workers)

    async def upsert_all(self) -> None:
        half = len(self.ids) // 2
        await produce(self.settings, [(i.encode(), upsert(i)) for i in self.ids[:half]])
        await asyncio.to_thread(
            kcat_commands, self.settings, [(i, upsert(i)) for i in self.ids[half:]]
        )


@contextlib.asynccontextmanager
async def running_load(settings: Settings, tmp: Path, prefix: str) -> AsyncIterator[Load]:
    """Three schedulers and two workers on `settings`, stopped on exit (even on failure)."""
    schedulers = SchedulerProcesses(settings, tmp)
    workers: list[WorkerProcess] = []
    load = Load(settings, schedulers, workers, [f"{prefix}-{i:03d}" for i in range(SCHEDULES)])
    watcher: asyncio.Task[None] | None = None
    try:
        schedulers.start(SCHEDULERS)
        workers += [
            WorkerProcess(settings, tmp, f"worker-{i}", jobs="tests.jobs.worker", concurrency=16)
            for i in range(WORKERS)
        ]
        await schedulers.wait_stable(SHARDS, timeout_s=180)
        await wait_until_split(workers, SHARDS, timeout_s=180)
        watcher = asyncio.create_task(watch_runs(settings, load.progress, load.visible_ms))
        await load.upsert_all()
        yield load
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher
        load.scheduler_codes = schedulers.stop_all()
        load.worker_codes = [w.stop() for w in workers]


async def watch_runs(
    settings: Settings, progress: Progress, visible_ms: dict[tuple[str, int], int]
) -> None:
    """Follow ``{ns}.runs`` read_committed: the latest instant fired per schedule, and
    when each run became visible."""
    consumer = AIOKafkaConsumer(
        settings.topic(TopicKind.RUNS),
        bootstrap_servers=settings.bootstrap,
        group_id=None,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        while True:
            try:
                batch = await consumer.getmany(timeout_ms=500, max_records=5000)
            except asyncio.CancelledError:
                raise
            except Exception:  # a broker down: keep following once it is back
                await asyncio.sleep(1)
                continue
            seen_ms = now_ms()
            for records in batch.values():
                for record in records:
                    run = parse_run(record.value)
                    progress.runs += 1
                    visible_ms.setdefault((run.run_id, run.attempt), seen_ms)
                    if run.scheduled_ms > progress.latest_ms.get(run.schedule_id, -1):
                        progress.latest_ms[run.schedule_id] = run.scheduled_ms
    finally:
        await consumer.stop()


# --- the check -----------------------------------------------------------------------------


@dataclass
class ClusterReport:
    runs: RunsReport
    results_per_attempt: Counter[tuple[str, int]]
    # Who wrote each answer (status, writer, results offset), to tell a re-run
    # from a shard's timeout racing a late worker.
    writers: dict[tuple[str, int], list[str]]
    unanswered: list[tuple[str, int]]
    # Per fault: worst visible - scheduled of the occurrences due in the second after it.
    first_fire_late_ms: list[int | None]
    max_late_ms: int | None  # worst visible - scheduled over the whole window

    @property
    def duplicate_results(self) -> list[tuple[str, int]]:
        return sorted(k for k, n in self.results_per_attempt.items() if n > 1)

    def summary(self) -> str:
        return (
            f"{self.runs.summary()} results_dup={len(self.duplicate_results)}"
            f" {[(k, self.writers.get(k)) for k in self.duplicate_results[:3]]}"
            f" unanswered={len(self.unanswered)} {self.unanswered[:5]}"
            f" first_fire_after_fault_late_ms={self.first_fire_late_ms}"
            f" max_visible_late_ms={self.max_late_ms}"
        )


async def check(
    load: Load,
    *,
    window_start_ms: int,
    window_end_ms: int,
    faults_ms: list[int],
    results_timeout_s: float = 180,
) -> ClusterReport:
    """The independent read_committed check of runs and results over the window.

    Runs while the workers still run: waits (up to `results_timeout_s`) until every
    run of the window has a visible result, then counts them: exactly one per
    (run_id, attempt). The first fire after a fault is the occurrence due in the
    second after it (`faults_ms`); its lateness is the worst over the schedules of
    the instant the watcher saw it minus its scheduled instant.
    """
    settings = load.settings
    runs_report = await check_runs(
        settings,
        load.ids,
        window_end_ms=window_end_ms,
    )
    deadline = time.monotonic() + results_timeout_s
    while True:
        fired = {
            (run.run_id, run.attempt): run
            for run in (
                parse_run(r.value)
                for r in await read_to_end(settings, settings.topic(TopicKind.RUNS), timeout_s=120)
                if r.value is not None
            )
        }
        answered: Counter[tuple[str, int]] = Counter()
        writers: dict[tuple[str, int], list[str]] = {}
        for record in await read_to_end(settings, settings.topic(TopicKind.RESULTS), timeout_s=120):
            if record.value is None:
                continue
            result = parse_result(record.value)
            if result.status not in ("missed", "skipped", PROGRESS_STATUS):
                key = (result.run_id, result.attempt)
                answered[key] += 1
                writers.setdefault(key, []).append(
                    f"{result.status} by {result.worker} at p{record.partition}@{record.offset}"
                    f" finished {result.finished_ms}"
                )
        unanswered = sorted(
            k for k, run in fired.items() if answered[k] == 0 and run.scheduled_ms <= window_end_ms
        )
        if not unanswered or time.monotonic() > deadline:
            break
        await asyncio.sleep(2)
    # Every run the watcher saw: a fault may come before the window (a broker down for
    # the whole of it), and its first fire is still a figure to report.
    seen_late = {
        key: load.visible_ms[key] - run.scheduled_ms
        for key, run in fired.items()
        if key in load.visible_ms
    }
    late = {
        key: ms
        for key, ms in seen_late.items()
        if window_start_ms <= fired[key].scheduled_ms <= window_end_ms
    }

    def first_fire(fault_ms: int) -> int | None:
        due = [
            ms
            for key, ms in seen_late.items()
            if fault_ms <= fired[key].scheduled_ms < fault_ms + 1_000
        ]
        return max(due) if due else None

    return ClusterReport(
        runs=runs_report,
        results_per_attempt=answered,
        writers={k: v for k, v in writers.items() if len(v) > 1},
        unanswered=unanswered,
        first_fire_late_ms=[first_fire(t) for t in faults_ms],
        max_late_ms=max(late.values()) if late else None,
    )
