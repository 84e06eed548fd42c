"""End to end: schedules fired by a scheduler, no-op jobs run by workers, results seen.

What is measured, on a fresh namespace of the local broker, with one ``kafkron
scheduler`` and ``--workers`` ``kafkron worker`` processes (async no-op jobs):

- **steady**: ``--rate`` schedules of ``every 1s`` whose anchors are spread over
  the second (a steady ``rate`` runs/s), for ``--seconds``; the latency of each
  run is (its result is visible to a read_committed consumer) - (its scheduled
  time): p50 and p99 over the steady part (the first 3 s are warm-up).
- **burst**: ``--burst`` one-off schedules all due at the same instant (everyone's
  ``0 0 * * *``); throughput is burst / (last result visible - due time): firing,
  running and committing them all, end to end.
- **workers alone**: ``--burst`` runs written straight to ``{ns}.runs`` (no
  scheduler in the path); results/s from the first visible to the last.

Baseline, measured in the same run: APScheduler 3 (in one process, in memory,
asyncio executor) firing the same burst of no-op jobs due at one instant, the bar
a Python user compares a scheduler with. The ratio is kafkron's end-to-end runs/s
over APScheduler's fires/s (which has no broker, no durability, no second process).

CPU per run: wall-clock rates on a small shared machine swing by a third from run
to run, the CPU spent on the same work far less. Over the burst (from just before
its due instant to its last result seen) and over the workers-alone phase, each
process's user + system CPU (``/proc``, `proc_cpu.py`) divided by the runs:
``sched_cpu_us_per_run``, ``worker_cpu_us_per_run`` (the workers summed),
``broker_cpu_us_per_run`` (the broker `kafkron broker` started; -1 for another),
``total_cpu_us_per_run`` (the three), against APScheduler's CPU per fire in the same
run: ``cpu_ratio_vs_apscheduler`` is APScheduler's µs per fire over kafkron's per
run (above 1: kafkron's whole path costs less CPU per run than an in-memory fire).
The observer (this process's results consumer) is printed but not counted.
``--profile-worker DIR`` runs the first worker under `sampler.py` (where its CPU
goes, sampled every ms of CPU: ``DIR/worker0.txt``, written as it stops).

Run: ``python bench/e2e_work.py [--workers 2] [--rate 2000] [--seconds 20]
[--burst 30000]``. The last line is ``bench e2e_work: ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import measured
import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from proc_cpu import Snapshot, broker_pid

from actors.history.recorder import partitions_of
from actors.views.tail import read_to_end
from topics.admin import create_topics, delete_topics
from topics.closing import bounded, stop_producer
from topics.command_types import Job
from topics.messages import idempotency_key, run_id_for, run_value
from topics.names import Settings, TopicKind
from topics.partitioner import murmur2_partition
from topics.timefmt import format_ms, parse_instant

REPO = Path(__file__).resolve().parent.parent
WARMUP_S = 3.0
LEAD_MS = 8_000  # schedules are created this far ahead of their first fire
# CPU is read this long before a burst's due instant: every upsert is applied by
# then (the burst is sent LEAD_MS ahead), and the idle processes spend next to nothing.
CPU_LEAD_MS = 200


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def pct(values: list[int], q: float) -> int:
    if not values:
        return -1
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- baseline: APScheduler ---------------------------------------------------------


async def apscheduler_burst(count: int) -> tuple[float, int, float]:
    """(fires/s, p99 lateness ms, CPU µs per fire) of ``count`` no-op date jobs due at
    one instant; the CPU is this process's, from just before the due instant to the
    last fire (adding the jobs is not counted, as kafkron's upserts are not)."""
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    done: list[int] = []

    async def fire() -> None:
        done.append(now_ms())

    scheduler = AsyncIOScheduler(
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1},
    )
    scheduler.start()
    from datetime import UTC, datetime

    due_ms = now_ms() + 2_000 + count // 20  # adding jobs takes a while
    run_date = datetime.fromtimestamp(due_ms / 1000, tz=UTC)
    for _ in range(count):
        scheduler.add_job(fire, "date", run_date=run_date)
    await asyncio.sleep(max(0.0, (due_ms - now_ms() - CPU_LEAD_MS) / 1000))
    cpu_before_s = time.process_time()
    while len(done) < count:
        await asyncio.sleep(0.05)
    cpu_us_per_fire = (time.process_time() - cpu_before_s) * 1e6 / count
    scheduler.shutdown(wait=False)
    span_s = max(0.001, (max(done) - due_ms) / 1000)
    return count / span_s, pct([d - due_ms for d in done], 0.99), cpu_us_per_fire


# --- kafkron ----------------------------------------------------------------------------


@dataclass
class Seen:
    """Results as the read_committed consumer sees them, by schedule id prefix."""

    latency_ms: dict[str, list[int]] = field(default_factory=dict)
    visible_ms: dict[str, list[int]] = field(default_factory=dict)
    scheduled_ms: dict[str, list[int]] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    # Where the time goes: scheduled -> started (firing, delivery, queueing), and
    # finished -> visible (the worker's transaction and the consumer's fetch).
    to_start_ms: dict[str, list[int]] = field(default_factory=dict)
    to_visible_ms: dict[str, list[int]] = field(default_factory=dict)
    # What the consumer saw and when, decoded only by `settle` (after a phase, not
    # while the phase runs: the observer's parsing would take a share of the two
    # cores from the workers it measures). Counted by the key's prefix meanwhile.
    _raw: list[tuple[int, bytes]] = field(default_factory=list)
    _counts: dict[str, int] = field(default_factory=dict)

    def saw(self, at_ms: int, key: bytes, value: bytes) -> None:
        prefix = key.split(b"-", 1)[0].decode()
        self._counts[prefix] = self._counts.get(prefix, 0) + 1
        self._raw.append((at_ms, value))

    def count(self, prefix: str) -> int:
        return self._counts.get(prefix, 0)

    def settle(self) -> Seen:
        """Decode what was seen since the last call into the figures' lists."""
        raw, self._raw = self._raw, []
        for at, record in raw:
            value = orjson.loads(record)
            prefix = value["schedule_id"].split("-", 1)[0]
            scheduled = parse_instant(value["scheduled_at"])
            self.latency_ms.setdefault(prefix, []).append(at - scheduled)
            self.visible_ms.setdefault(prefix, []).append(at)
            self.scheduled_ms.setdefault(prefix, []).append(scheduled)
            self.statuses[value["status"]] = self.statuses.get(value["status"], 0) + 1
            if value.get("started_at") and value.get("finished_at"):
                started = parse_instant(value["started_at"])
                finished = parse_instant(value["finished_at"])
                self.to_start_ms.setdefault(prefix, []).append(started - scheduled)
                self.to_visible_ms.setdefault(prefix, []).append(at - finished)
        return self


async def collect(settings: Settings, seen: Seen, stop: asyncio.Event) -> None:
    topic = settings.topic(TopicKind.RESULTS)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        group_id=None,
        fetch_max_wait_ms=50,
    )
    await consumer.start()
    try:
        partitions = await partitions_of(consumer, topic)
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=100)
            at = now_ms()
            for records in batch.values():
                for record in records:
                    if record.value is not None and record.key is not None:
                        seen.saw(at, record.key, record.value)
    finally:
        await bounded(consumer.stop(), "stopping the results consumer")


async def send(settings: Settings, commands: list[dict[str, Any]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        topic = settings.topic(TopicKind.COMMANDS)
        futures = [
            await producer.send(topic, key=c["id"].encode(), value=orjson.dumps(c))
            for c in commands
        ]
        await asyncio.gather(*futures)
    finally:
        await stop_producer(producer, "stopping the commands producer")


async def firing_lateness(settings: Settings, prefix: str) -> list[int]:
    """fired_at - scheduled_at of the runs of ``prefix``: the scheduler's share."""
    records = await read_to_end(settings, settings.topic(TopicKind.RUNS), timeout_s=300)
    late = []
    for record in records:
        if record.value is None:
            continue
        value = orjson.loads(record.value)
        if value["schedule_id"].startswith(prefix + "-"):
            late.append(parse_instant(value["fired_at"]) - parse_instant(value["scheduled_at"]))
    return late


async def write_runs(settings: Settings, count: int, job: str) -> None:
    """``count`` run records of ``job``, as a shard would write them (in
    record batches, so the bench's own producing is not what is measured)."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all")
    await producer.start()
    try:
        topic = settings.topic(TopicKind.RUNS)
        partitions = len(await producer.partitions_for(topic))
        at = now_ms()
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        for i in range(count):
            schedule_id = f"drain-{i}"
            run_id = run_id_for(schedule_id, at)
            value = run_value(
                run_id=run_id,
                schedule_id=schedule_id,
                task=None,
                scheduled_ms=at,
                fired_ms=at,
                attempt=1,
                job=Job(job, {}),
                idempotency_key=idempotency_key(run_id),
                deadline_ms=at + 3_600_000,
            )
            key = schedule_id.encode()
            by_partition.setdefault(murmur2_partition(key, partitions), []).append((key, value))
        futures = []
        for partition, items in by_partition.items():
            batch = producer.create_batch()
            for key, value in items:
                if batch.append(key=key, value=value, timestamp=None) is None:
                    futures.append(await producer.send_batch(batch, topic, partition=partition))
                    batch = producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None)
            futures.append(await producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*futures)
    finally:
        await stop_producer(producer, "stopping the runs producer")


def upsert(schedule_id: str, spec: dict[str, Any], job: str = "bench.noop") -> dict[str, Any]:
    return {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": spec,
        "job": {"name": job, "args": {}},
        "overlap": "allow",
        "misfire": {"policy": "run_once", "grace_s": 3600},
    }


async def wait_count(
    seen: Seen, prefix: str, count: int, timeout_s: float, procs: list[Any]
) -> None:
    deadline = time.monotonic() + timeout_s
    while seen.count(prefix) < count:
        for proc in procs:
            if proc.poll() is not None:
                raise SystemExit(f"a kafkron process exited early ({proc.args})")
        if time.monotonic() > deadline:
            raise SystemExit(
                f"{prefix}: only {seen.count(prefix)} of {count} results in {timeout_s} s"
            )
        await asyncio.sleep(0.1)


def start(
    settings: Settings, argv: list[str], log: Path, profile: Path | None = None
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "KAFKRON_NAMESPACE": settings.namespace,
        "KAFKRON_BOOTSTRAP": settings.bootstrap,
        "PYTHONPATH": os.pathsep.join([str(REPO / "bench"), str(REPO)]),
    }
    profiler = [] if profile is None else [str(REPO / "bench" / "sampler.py"), str(profile)]
    return subprocess.Popen(
        [sys.executable, *profiler, "-m", "actors.cli", *argv],
        cwd=REPO,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def process_pids(settings: Settings, procs: list[subprocess.Popen[bytes]]) -> dict[str, int]:
    """The processes whose CPU a run costs, by role: the scheduler, each worker, the
    broker (when it is the local one `kafkron broker` started) and this process, the
    observer whose results consumer is not part of the path."""
    pids = {"sched": procs[0].pid, "observer": os.getpid()}
    pids.update({f"worker{i}": proc.pid for i, proc in enumerate(procs[1:])})
    broker = broker_pid(settings.bootstrap)
    if broker is not None:
        pids["broker"] = broker
    return pids


def cpu_per_run(prefix: str, spent_s: dict[str, float | None], runs: int) -> dict[str, float]:
    """µs of CPU per run of each role (the workers summed: each run is one worker's),
    and of the path (scheduler, workers, broker; -1 when a part could not be read)."""

    def us(names: list[str]) -> float:
        parts = [spent_s.get(name) for name in names]
        if not names or any(part is None for part in parts):
            return -1.0
        return sum(part for part in parts if part is not None) * 1e6 / runs

    workers = sorted(name for name in spent_s if name.startswith("worker"))
    out = {
        f"{prefix}sched_cpu_us_per_run": us(["sched"]),
        f"{prefix}worker_cpu_us_per_run": us(workers),
        f"{prefix}broker_cpu_us_per_run": us(["broker"]),
        f"{prefix}observer_cpu_us_per_run": us(["observer"]),
    }
    path = [out[f"{prefix}{role}_cpu_us_per_run"] for role in ("sched", "worker", "broker")]
    out[f"{prefix}total_cpu_us_per_run"] = -1.0 if min(path) < 0 else sum(path)
    return out


async def kafkron_run(args: argparse.Namespace) -> dict[str, float]:
    settings = Settings.from_env(namespace=f"bench-{uuid.uuid4().hex[:8]}")
    await create_topics(settings, partitions=args.partitions)
    logs = Path(tempfile.mkdtemp(prefix="kafkron-bench-"))
    loop = ["--loop", args.loop] if args.loop else []
    scheduler = ["scheduler", "--figures-interval-s", "0", *loop]
    if args.max_fires_per_turn is not None:
        scheduler += ["--max-fires-per-turn", str(args.max_fires_per_turn)]
    procs = [start(settings, scheduler, logs / "scheduler.log")]
    for i in range(args.workers):
        procs.append(
            start(
                settings,
                [
                    "worker",
                    "--jobs",
                    "noop_jobs",
                    "--concurrency",
                    str(args.concurrency),
                    "--worker-id",
                    f"bench-w{i}",
                    *loop,
                ],
                logs / f"worker{i}.log",
                args.profile_worker / "worker0.txt" if args.profile_worker and i == 0 else None,
            )
        )
    seen = Seen()
    stop = asyncio.Event()
    collector = asyncio.create_task(collect(settings, seen, stop))
    figures: dict[str, float] = {}
    try:
        # Warm-up: every process has joined its group and owns its partitions.
        due = format_ms(now_ms() + 3_000)
        await send(settings, [upsert(f"warm-{i}", {"at": due}, args.job) for i in range(200)])
        await wait_count(seen, "warm", 200, 120, procs)
        await asyncio.sleep(2)

        # Steady: `rate` runs/s from every-1s schedules with anchors spread over the second.
        first_ms = now_ms() + LEAD_MS
        step_ms = 1000 / args.rate
        steady = [
            upsert(
                f"steady-{i}",
                {"every": "1s", "anchor": format_ms(first_ms + int(i * step_ms))},
                args.job,
            )
            for i in range(args.rate)
        ]
        await send(settings, steady)
        end_ms = first_ms + int(args.seconds * 1000)
        await asyncio.sleep(max(0.0, (end_ms - now_ms()) / 1000))
        expected = int((end_ms - first_ms - WARMUP_S * 1000) / 1000 * args.rate)

        def in_window() -> list[int]:
            seen.settle()
            pairs = zip(
                seen.latency_ms.get("steady", []),
                seen.scheduled_ms.get("steady", []),
                strict=True,
            )
            return [lat for lat, sch in pairs if first_ms + WARMUP_S * 1000 <= sch < end_ms]

        # Every run scheduled in the window should arrive; wait for the stragglers
        # (at most 60 s) before deleting the schedules, so a lagging shard still fires
        # what was due before the end.
        settle_until = time.monotonic() + 60
        while time.monotonic() < settle_until and len(in_window()) < expected:
            await asyncio.sleep(0.5)
        await send(settings, [{"v": 1, "type": "schedule.delete", "id": c["id"]} for c in steady])
        window = in_window()
        await asyncio.sleep(3)
        figures["steady_rate"] = args.rate
        figures["steady_runs"] = len(window)
        figures["steady_expected"] = expected
        figures["p50_ms"] = pct(window, 0.50)
        figures["p99_ms"] = pct(window, 0.99)
        fired = await firing_lateness(settings, "steady")
        figures["steady_fire_late_p50_ms"] = pct(fired, 0.5)
        figures["steady_fire_late_p99_ms"] = pct(fired, 0.99)
        seen.settle()
        figures["steady_to_start_p50_ms"] = pct(seen.to_start_ms.get("steady", []), 0.5)
        figures["steady_to_visible_p50_ms"] = pct(seen.to_visible_ms.get("steady", []), 0.5)

        # Burst: everything due at once.
        due_ms = now_ms() + LEAD_MS + args.burst // 5
        await send(
            settings,
            [upsert(f"burst-{i}", {"at": format_ms(due_ms)}, args.job) for i in range(args.burst)],
        )
        await asyncio.sleep(max(0.0, (due_ms - now_ms() - CPU_LEAD_MS) / 1000))
        pids = process_pids(settings, procs)
        cpu_before = Snapshot.take(pids)
        await wait_count(seen, "burst", args.burst, 600, procs)
        figures.update(cpu_per_run("", Snapshot.take(pids).spent_since(cpu_before), args.burst))
        seen.settle()
        last_ms = max(seen.visible_ms["burst"])
        figures["burst"] = args.burst
        figures["burst_runs_per_s"] = args.burst / max(0.001, (last_ms - due_ms) / 1000)
        figures["burst_p50_ms"] = pct(seen.latency_ms["burst"], 0.50)
        figures["burst_p99_ms"] = pct(seen.latency_ms["burst"], 0.99)
        burst_fired = await firing_lateness(settings, "burst")
        figures["burst_fire_late_p50_ms"] = pct(burst_fired, 0.5)
        figures["burst_to_start_p50_ms"] = pct(seen.to_start_ms["burst"], 0.5)
        figures["burst_to_visible_p50_ms"] = pct(seen.to_visible_ms["burst"], 0.5)

        # Workers alone: runs written straight to {ns}.runs (no scheduler in the
        # path); the rate at which their results become visible, first to last.
        cpu_before = Snapshot.take(pids)
        await write_runs(settings, args.burst, args.job)
        await wait_count(seen, "drain", args.burst, 600, procs)
        spent = Snapshot.take(pids).spent_since(cpu_before)
        figures.update(cpu_per_run("drain_", spent, args.burst))
        seen.settle()
        drained = seen.visible_ms["drain"]
        figures["drain_runs_per_s"] = args.burst / max(0.001, (max(drained) - min(drained)) / 1000)
        figures["not_succeeded"] = sum(n for s, n in seen.statuses.items() if s != "succeeded")
    finally:
        stop.set()
        await collector
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        await delete_topics(settings)
    print(f"process logs in {logs}", file=sys.stderr)
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rate", type=int, default=2000, help="steady runs/s")
    parser.add_argument("--seconds", type=float, default=20.0, help="steady phase length")
    parser.add_argument("--burst", type=int, default=30000)
    parser.add_argument(
        "--max-fires-per-turn",
        type=int,
        default=None,
        help="the scheduler's bound per shard and turn (default: the scheduler's own)",
    )
    parser.add_argument(
        "--job",
        default="bench.noop",
        help="the job every run runs, from bench/noop_jobs.py: bench.noop (async, a task "
        "each) or bench.noop_inline (inline=True: no task, no thread)",
    )
    parser.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default=None,
        help="the event loop of the scheduler and the workers (default: theirs)",
    )
    parser.add_argument(
        "--profile-worker",
        type=Path,
        default=None,
        metavar="DIR",
        help="sample where the first worker's CPU goes, written to DIR/worker0.txt",
    )
    measured.add_record_option(parser)
    args = parser.parse_args()
    if args.profile_worker is not None:
        args.profile_worker.mkdir(parents=True, exist_ok=True)

    base_rate, base_p99, base_cpu_us = await apscheduler_burst(args.burst)
    print(
        f"apscheduler burst of {args.burst}: {base_rate:,.0f} fires/s, p99 late {base_p99} ms,"
        f" {base_cpu_us:.1f} µs CPU per fire (load average {os.getloadavg()[0]:.2f})"
    )
    f = await kafkron_run(args)
    print(
        f"kafkron steady {f['steady_rate']:.0f}/s: {f['steady_runs']:.0f} of "
        f"{f['steady_expected']:.0f} runs; scheduled->visible p50 {f['p50_ms']:.0f} ms "
        f"p99 {f['p99_ms']:.0f} ms (firing late p50 {f['steady_fire_late_p50_ms']:.0f} ms "
        f"p99 {f['steady_fire_late_p99_ms']:.0f} ms; p50 scheduled->started "
        f"{f['steady_to_start_p50_ms']:.0f} ms, finished->visible "
        f"{f['steady_to_visible_p50_ms']:.0f} ms)"
    )
    print(
        f"kafkron burst of {f['burst']:.0f}: {f['burst_runs_per_s']:,.0f} runs/s end to end, "
        f"p50 {f['burst_p50_ms']:.0f} ms p99 {f['burst_p99_ms']:.0f} ms (firing late p50 "
        f"{f['burst_fire_late_p50_ms']:.0f} ms; p50 scheduled->started "
        f"{f['burst_to_start_p50_ms']:.0f} ms, finished->visible "
        f"{f['burst_to_visible_p50_ms']:.0f} ms); {f['not_succeeded']:.0f} not succeeded"
    )
    print(
        f"kafkron workers alone, {f['burst']:.0f} runs written straight to the runs topic: "
        f"{f['drain_runs_per_s']:,.0f} runs/s"
    )
    for phase, prefix in (("burst", ""), ("workers alone", "drain_")):
        print(
            f"CPU µs per run, {phase}: scheduler {f[prefix + 'sched_cpu_us_per_run']:.1f}, "
            f"workers {f[prefix + 'worker_cpu_us_per_run']:.1f}, broker "
            f"{f[prefix + 'broker_cpu_us_per_run']:.1f}, total "
            f"{f[prefix + 'total_cpu_us_per_run']:.1f} (observer "
            f"{f[prefix + 'observer_cpu_us_per_run']:.1f}, not counted)"
        )
    total_us = f["total_cpu_us_per_run"]
    cpu_ratio = base_cpu_us / total_us if total_us > 0 else -1.0
    load = os.getloadavg()[0]
    print(
        f"bench e2e_work: workers={args.workers} burst_runs_per_s={f['burst_runs_per_s']:.0f} "
        f"steady_rate={f['steady_rate']:.0f} steady_p50_ms={f['p50_ms']:.0f} "
        f"steady_p99_ms={f['p99_ms']:.0f} apscheduler_fires_per_s={base_rate:.0f} "
        f"ratio_vs_apscheduler={f['burst_runs_per_s'] / base_rate:.2f} "
        f"workers_alone_runs_per_s={f['drain_runs_per_s']:.0f} "
        f"sched_cpu_us_per_run={f['sched_cpu_us_per_run']:.1f} "
        f"worker_cpu_us_per_run={f['worker_cpu_us_per_run']:.1f} "
        f"broker_cpu_us_per_run={f['broker_cpu_us_per_run']:.1f} "
        f"total_cpu_us_per_run={total_us:.1f} "
        f"apscheduler_cpu_us_per_fire={base_cpu_us:.1f} cpu_ratio_vs_apscheduler={cpu_ratio:.2f} "
        f"drain_worker_cpu_us_per_run={f['drain_worker_cpu_us_per_run']:.1f} "
        f"drain_broker_cpu_us_per_run={f['drain_broker_cpu_us_per_run']:.1f} "
        f"load_avg={load:.2f} job={args.job} loop={args.loop or 'asyncio'}"
    )
    measured.record(
        "e2e_work",
        {
            "workers": args.workers,
            "concurrency": args.concurrency,
            "workers_alone_runs_per_s": round(f["drain_runs_per_s"]),
            "burst_runs_per_s": round(f["burst_runs_per_s"]),
            "apscheduler_fires_per_s": round(base_rate),
            "ratio_vs_apscheduler": round(f["burst_runs_per_s"] / base_rate, 2),
            "job": args.job,
            "loop": args.loop or "asyncio",
        },
        argv=sys.argv[1:],
        to=args.record,
    )


if __name__ == "__main__":
    asyncio.run(main())
