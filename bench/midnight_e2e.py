"""The midnight herd end to end: a million one-offs due at one instant, run by workers.

``--schedules`` one-off schedules (``{"at": H}``, default 1,000,000) of a no-op
job, all due at the same instant H, on one shard held by one ``kafkron
scheduler``; ``--workers`` ``kafkron worker`` processes (default two) run them,
all on the local broker. The changelog is written straight from the shard's own
encoders (`herd_kit`, as `midnight_herd.py` does), the scheduler restores it
before H, and a read_committed consumer watches ``{ns}.results``:

- every run's result visible by H + 60 s (``last_result_s``: the last result's
  visibility after H), none twice (one result per run id and attempt), none early
  (every result's ``started_at`` at or after its ``scheduled_at``), all succeeded;
- the rate of each phase, in schedules or runs per second:
  ``load_per_s`` (the changelog written, then restored by the scheduler, whose
  start-up is left out),
  ``fire_per_s`` (H to the last run appended to ``{ns}.runs``, whose records are
  stamped by the broker), ``run_per_s`` (H to the last job's ``finished_at``) and
  ``results_per_s`` (H to the last result visible).

Baseline, measured in the same run: the broker's transactional produce ceiling
(as in e2e_fire.py: one producer, 1,000 records per transaction), so the results'
rate is also printed as a fraction of what one process could hope to commit
(each run is two committed records on its way: the run and its result).

Every phase has a timeout (``--timeout-s``) and prints its progress to stderr; a
run that cannot measure says why on its last line and exits 1.

    python bench/midnight_e2e.py [--schedules 1000000] [--workers 2] [--lead-s 120]
        [--timeout-s 900] [--loop asyncio|uvloop] [--record [PATH]]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import measured
from aiokafka import AIOKafkaConsumer, TopicPartition
from e2e_fire import RUNS_PARTITIONS, Scheduler, measure_ceiling
from e2e_work import start
from herd_kit import field as text_of
from herd_kit import herd_records, load_changelog, log, now_ms

from actors.history.recorder import partitions_of
from topics.admin import create_topics, delete_topics
from topics.closing import bounded
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms, parse_instant

TARGET_S = 60.0
T = TypeVar("T")


class CannotMeasure(Exception):
    """A phase did not finish in its time, or a process it needs exited."""


@dataclass
class Results:
    """What the results watcher saw, kept small: no JSON parse while the herd runs."""

    attempts: set[bytes] = field(default_factory=set)  # run id .. attempt, as written
    records: int = 0
    early: int = 0
    not_succeeded: int = 0
    last_visible_ms: int = 0
    last_finished: bytes = b""  # instants are YYYY-MM-DDTHH:MM:SS.mmmZ: text order is time order

    def saw(self, value: bytes, visible_ms: int) -> None:
        self.records += 1
        # run_id, schedule_id and attempt come first, in that order (`result_value`).
        start = value.index(b'"run_id":"')
        self.attempts.add(value[start : value.index(b',"status":', start)])
        if text_of(value, b'"status":"') != b"succeeded":
            self.not_succeeded += 1
        # started_at is null for an attempt the shard decided
        started = text_of(value, b'"started_at":"') if b'"started_at":"' in value else None
        if started is not None and started < text_of(value, b'"scheduled_at":"'):
            self.early += 1
        if b'"finished_at":"' in value:
            finished = text_of(value, b'"finished_at":"')
            if finished > self.last_finished:
                self.last_finished = finished
        self.last_visible_ms = visible_ms


async def within(what: str, step: Awaitable[T], timeout_s: float) -> T:
    try:
        return await asyncio.wait_for(step, timeout_s)
    except TimeoutError:
        raise CannotMeasure(f"{what} did not finish within {timeout_s:.0f} s") from None


async def until(predicate: Callable[[], bool], what: str, timeout_s: float) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.2)

    await within(what, poll(), timeout_s)


def alive(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is not None:
            raise CannotMeasure(f"a kafkron process exited early ({' '.join(proc.args[2:])})")


def owns_runs(log_path: Path) -> bool:
    """Whether the worker's last word on its partitions names some (a rebalance
    settled and it has work to take)."""
    owned = re.findall(r"owns runs partitions (\[[0-9, ]*\]|none)", log_path.read_text("utf-8"))
    return bool(owned) and owned[-1].startswith("[")


async def watch_results(
    settings: Settings,
    seen: Results,
    expected: int,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        group_id=None,
        max_partition_fetch_bytes=8 * 1024 * 1024,
        fetch_max_wait_ms=100,
    )
    await consumer.start()
    try:
        topic = settings.topic(TopicKind.RESULTS)
        partitions = await partitions_of(consumer, topic)
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        await consumer.seek_to_beginning()
        next_note = 100_000
        while len(seen.attempts) < expected:
            alive(procs)
            batch = await consumer.getmany(timeout_ms=200, max_records=20_000)
            visible = now_ms()
            for records in batch.values():
                for record in records:
                    if record.value is not None:
                        seen.saw(record.value, visible)
            if seen.records >= next_note:
                log(f"  {len(seen.attempts):,} results visible")
                next_note += 100_000
    finally:
        await bounded(consumer.stop(), "stopping the results consumer", 10)


async def last_run_appended(settings: Settings) -> tuple[int, int]:
    """(runs committed, the latest broker append time among them) of ``{ns}.runs``,
    read after the herd (``{ns}.runs`` records are stamped by the broker)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        group_id=None,
        max_partition_fetch_bytes=8 * 1024 * 1024,
    )
    await consumer.start()
    try:
        topic = settings.topic(TopicKind.RUNS)
        tps = [TopicPartition(topic, p) for p in range(RUNS_PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        count = latest = 0

        async def behind() -> bool:
            for tp in tps:
                if await consumer.position(tp) < ends[tp]:
                    return True
            return False

        while await behind():
            batch = await consumer.getmany(timeout_ms=500, max_records=50_000)
            for records in batch.values():
                count += len(records)
                latest = max(latest, max((r.timestamp for r in records), default=0))
        return count, latest
    finally:
        await bounded(consumer.stop(), "stopping the runs reader", 10)


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def herd(args: argparse.Namespace, settings: Settings, logs: Path) -> dict[str, float]:
    count = args.schedules
    loop_option = ["--loop", args.loop] if args.loop else []
    procs: list[subprocess.Popen[bytes]] = []
    scheduler: Scheduler | None = None
    try:
        for i in range(args.workers):
            worker = ["worker", "--jobs", "noop_jobs", "--concurrency", str(args.concurrency)]
            worker += ["--worker-id", f"bench-w{i}", *loop_option]
            procs.append(start(settings, worker, logs / f"worker{i}.log"))

        herd_ms = (now_ms() + int(args.lead_s * 1000)) // 1000 * 1000
        log(f"load: {count:,} one-offs due at {format_ms(herd_ms)} into the changelog ...")
        load_started = now_ms()
        records = herd_records(
            count,
            herd_ms,
            {"at": format_ms(herd_ms)},
            {"name": args.job, "args": {}},
            id_format="oneoff-{:07d}",
        )
        await within("loading the changelog", load_changelog(settings, records), args.timeout_s)
        produce_s = (now_ms() - load_started) / 1000
        log("load: the scheduler restores it ...")
        scheduler = Scheduler(settings, logs / "scheduler.log", 10_000, tuple(loop_option))
        procs.append(scheduler.proc)
        await until(lambda: scheduler.restore_ms() is not None, "the restore", args.timeout_s)
        restored_ms = now_ms()
        log(
            f"load: restored in {scheduler.restore_ms()} ms, "
            f"{(herd_ms - restored_ms) / 1000:.1f} s before H"
        )
        if restored_ms >= herd_ms:
            raise CannotMeasure(
                f"restored {(restored_ms - herd_ms) / 1000:.1f} s after H; raise --lead-s"
            )
        await until(
            lambda: all(owns_runs(logs / f"worker{i}.log") for i in range(args.workers)),
            "the workers to take runs partitions",
            max(1.0, (herd_ms - now_ms()) / 1000),
        )

        log(
            f"fire, run, results: waiting for {count:,} results "
            f"(H in {(herd_ms - now_ms()) / 1000:.1f} s) ..."
        )
        seen = Results()
        await within(
            f"{count:,} results (H + {args.timeout_s:.0f} s)",
            watch_results(settings, seen, count, procs),
            max(0.0, (herd_ms - now_ms()) / 1000) + args.timeout_s,
        )
        log("fire: reading the runs topic's append times ...")
        runs, last_run_ms = await within(
            "reading the runs", last_run_appended(settings), args.timeout_s
        )
    finally:
        stop_all(procs)
        if scheduler is not None:
            scheduler._out.close()
    last_result_s = (seen.last_visible_ms - herd_ms) / 1000
    last_finished_ms = parse_instant(seen.last_finished.decode()) if seen.last_finished else herd_ms
    return {
        "schedules": count,
        "results": len(seen.attempts),
        "twice": seen.records - len(seen.attempts),
        "early": seen.early,
        "not_succeeded": seen.not_succeeded,
        "runs": runs,
        "last_result_s": last_result_s,
        # Writing the changelog, then the scheduler's restore of it (its start-up left out).
        "load_per_s": count / max(0.001, produce_s + (scheduler.restore_ms() or 0) / 1000),
        "fire_per_s": runs / max(0.001, (last_run_ms - herd_ms) / 1000),
        "run_per_s": len(seen.attempts) / max(0.001, (last_finished_ms - herd_ms) / 1000),
        "results_per_s": len(seen.attempts) / max(0.001, last_result_s),
        "restore_ms": float(scheduler.restore_ms() or 0) if scheduler else 0.0,
        "restored_before_h_s": (herd_ms - restored_ms) / 1000,
    }


async def main(args: argparse.Namespace) -> int:
    logs = Path(tempfile.mkdtemp(prefix="midnight-e2e-"))
    log(f"process logs in {logs}")
    try:
        log("baseline: the broker's transactional ceiling ...")
        ceiling = await within(
            "the ceiling", measure_ceiling(args.bootstrap, os.urandom(400)), args.timeout_s
        )
        settings = Settings.from_env(
            namespace=f"bench-{uuid.uuid4().hex[:8]}", bootstrap=args.bootstrap
        )
        await create_topics(settings, partitions=1, runs_partitions=RUNS_PARTITIONS)
        try:
            f = await herd(args, settings, logs)
        finally:
            await bounded(delete_topics(settings), "deleting the topics", 60)
    except CannotMeasure as exc:
        print(f"bench midnight_e2e: could not measure: {exc} (logs in {logs})")
        return 1
    complete = f["results"] == args.schedules and f["not_succeeded"] == 0
    met = complete and f["last_result_s"] <= TARGET_S and f["twice"] == 0 and f["early"] == 0
    print(
        f"midnight of {args.schedules:,} one-offs, {args.workers} workers: "
        f"{f['results']:,.0f} results, the last visible {f['last_result_s']:.1f} s after H "
        f"(target all by {TARGET_S:.0f} s); {f['twice']:.0f} twice, {f['early']:.0f} early, "
        f"{f['not_succeeded']:.0f} not succeeded; phases: load {f['load_per_s']:,.0f}/s, "
        f"fire {f['fire_per_s']:,.0f}/s, run {f['run_per_s']:,.0f}/s, results "
        f"{f['results_per_s']:,.0f}/s; broker ceiling {ceiling:,.0f} msgs/s"
    )
    print(
        f"bench midnight_e2e: schedules={args.schedules} workers={args.workers} "
        f"loop={args.loop or 'asyncio'} complete={complete} target_met={met} "
        f"last_result_s={f['last_result_s']:.1f} twice={f['twice']:.0f} early={f['early']:.0f} "
        f"not_succeeded={f['not_succeeded']:.0f} load_per_s={f['load_per_s']:.0f} "
        f"fire_per_s={f['fire_per_s']:.0f} run_per_s={f['run_per_s']:.0f} "
        f"results_per_s={f['results_per_s']:.0f} restore_ms={f['restore_ms']:.0f} "
        f"restored_before_h_s={f['restored_before_h_s']:.1f} ceiling_msgs_s={ceiling:.0f} "
        f"results_vs_ceiling={f['results_per_s'] / ceiling:.3f}"
    )
    measured.record(
        "midnight_e2e",
        {
            "schedules": args.schedules,
            "workers": args.workers,
            "complete": complete,
            "target_met": met,
            "last_result_s": round(f["last_result_s"], 1),
            "twice": int(f["twice"]),
            "early": int(f["early"]),
            "load_per_s": round(f["load_per_s"]),
            "fire_per_s": round(f["fire_per_s"]),
            "run_per_s": round(f["run_per_s"]),
            "results_per_s": round(f["results_per_s"]),
            "ceiling_msgs_s": round(ceiling),
        },
        argv=sys.argv[1:],
        to=args.record,
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1000, help="each worker's")
    parser.add_argument("--job", default="bench.noop", help="the job every one-off runs")
    parser.add_argument(
        "--lead-s", type=float, default=120.0, help="seconds from loading to H (the restore fits)"
    )
    parser.add_argument("--timeout-s", type=float, default=900.0, help="bound of each phase")
    parser.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default=None,
        help="the event loop of the scheduler and the workers (default: theirs)",
    )
    parser.add_argument("--bootstrap", default=None)
    measured.add_record_option(parser)
    sys.exit(asyncio.run(main(parser.parse_args())))
