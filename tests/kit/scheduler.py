"""Helpers of the scheduler's real-broker tests: start schedulers, ack runs, check runs.

The invariants checked (`check_runs`) are the simulation's own checkers
(`simulation.checkers.TOPIC_CHECKERS`) run on the records read from the real broker:
every occurrence of every schedule, from the first its shard planned to the end of
the window, is in ``{ns}.runs`` (read_committed) as attempt 1 or is reported
``missed``/``skipped`` in ``{ns}.results``; no (run_id, attempt) twice, no
occurrence both fired and reported, no attempt with two results; no run appended
(the broker's LogAppendTime) before its scheduled instant.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from actors.views.tail import read_to_end
from simulation.checkers import TOPIC_CHECKERS
from simulation.checkers.evidence import (
    TopicEvidence,
    TopicRecord,
    Verdict,
    from_topics,
    of_topics,
)
from tests.kit.paths import REPO
from topics.messages import parse_run, result_value
from topics.names import Settings, TopicKind
from topics.vocabulary import RunStatus


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def upsert(schedule_id: str, *, every: str = "1s", overlap: str = "allow", **extra: Any) -> bytes:
    """A ``schedule.upsert`` command firing every ``every``, no-op job."""
    command: dict[str, Any] = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": {"every": every},
        "job": {"name": "test.noop", "args": {}},
        "overlap": overlap,
        "misfire": {"policy": "run_once", "grace_s": 300},
        **extra,
    }
    return orjson.dumps(command)


async def produce(
    settings: Settings, records: Iterable[tuple[bytes | None, bytes | None]], **kwargs: Any
) -> None:
    """Produce to ``{ns}.commands`` with aiokafka (murmur2 partitioner), then flush."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [
            await producer.send(settings.topic(TopicKind.COMMANDS), key=k, value=v, **kwargs)
            for k, v in records
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


class SchedulerProcesses:
    """``kafkron scheduler`` subprocesses of one namespace, logs in ``log_dir``."""

    def __init__(
        self,
        settings: Settings,
        log_dir: Path,
        *,
        session_timeout_ms: int = 10_000,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.settings = settings
        self.extra_args = extra_args
        self.log_dir = log_dir
        self.session_timeout_ms = session_timeout_ms
        self.procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[Any] = []

    def start(self, count: int = 1) -> None:
        env = {
            **os.environ,
            "KAFKRON_NAMESPACE": self.settings.namespace,
            "KAFKRON_BOOTSTRAP": self.settings.bootstrap,
        }
        for _ in range(count):
            i = len(self.procs)
            log = (self.log_dir / f"scheduler-{i}.log").open("wb")
            self._logs.append(log)
            self.procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "actors.cli",
                        "scheduler",
                        "--session-timeout-ms",
                        str(self.session_timeout_ms),
                        "--heartbeat-ms",
                        str(self.session_timeout_ms // 3),
                        "--figures-interval-s",
                        "10",
                        *self.extra_args,
                    ],
                    cwd=REPO,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    def signal(self, i: int, sig: signal.Signals) -> None:
        self.procs[i].send_signal(sig)

    def stop_all(self, timeout_s: float = 60) -> list[int | None]:
        """SIGTERM (SIGCONT first, in case one is stopped), wait; SIGKILL stragglers."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        codes: list[int | None] = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout_s))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes.append(None)
        for log in self._logs:
            log.close()
        return codes

    def logs(self, tail_lines: int = 40) -> str:
        parts = []
        for path in sorted(self.log_dir.glob("scheduler-*.log")):
            lines = path.read_text(errors="replace").splitlines()
            parts.append(f"--- {path.name}\n" + "\n".join(lines[-tail_lines:]))
        return "\n".join(parts)

    def assigned(self, i: int) -> list[int] | None:
        """The shards process ``i`` was last assigned (from its log), None before any."""
        path = self.log_dir / f"scheduler-{i}.log"
        last = None
        for line in path.read_text(errors="replace").splitlines():
            if "assigned shards" in line:
                last = orjson.loads(line.rsplit("assigned shards", 1)[1].strip())
            elif "revoked shards" in line:
                last = []
        return last

    async def wait_stable(self, shards: int, timeout_s: float = 60) -> None:
        """Until every live process owns a shard and together they own all of them."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            live = [i for i, p in enumerate(self.procs) if p.poll() is None]
            owned = [self.assigned(i) for i in live]
            taken = self.grep("taken on")
            everything = sorted(s for o in owned if o for s in o) == list(range(shards))
            if all(owned) and everything and len(taken) >= shards:
                return
            await asyncio.sleep(0.5)
        raise AssertionError(f"schedulers never settled on {shards} shards:\n{self.logs()}")

    def grep(self, text: str) -> list[str]:
        hits = []
        for path in sorted(self.log_dir.glob("scheduler-*.log")):
            hits += [line for line in path.read_text(errors="replace").splitlines() if text in line]
        return hits


class Progress:
    """What the acker has seen: the latest scheduled instant fired per schedule."""

    def __init__(self) -> None:
        self.latest_ms: dict[str, int] = {}
        self.runs = 0

    def caught_up(self, ids: Iterable[str], until_ms: int) -> bool:
        latest = self.latest_ms
        return all(latest.get(i, -1) >= until_ms for i in ids)

    async def wait_caught_up(self, ids: list[str], until_ms: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.caught_up(ids, until_ms):
                return True
            await asyncio.sleep(0.5)
        return False


ACKER_WORKER = "test-acker"
"""The worker name of `acker`'s results."""


@contextlib.asynccontextmanager
async def acker(settings: Settings) -> Any:
    """A stand-in worker: answers every run with a ``succeeded`` result at once.

    Keeps runs from piling up in flight (overlap ``allow`` would otherwise grow
    every schedule's changelog record with each fire). It is plain aiokafka on the
    real broker; a duplicate ack is harmless (the shard ignores unknown attempts).
    """
    consumer = AIOKafkaConsumer(
        settings.topic(TopicKind.RUNS),
        bootstrap_servers=settings.bootstrap,
        group_id=f"{settings.namespace}-acker",
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=True,
    )
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, linger_ms=5)
    await consumer.start()
    await producer.start()

    progress = Progress()

    async def loop() -> None:
        while True:
            try:
                await ack_some()
            except asyncio.CancelledError:
                raise
            except Exception:  # a broker restart: keep acking once it is back
                await asyncio.sleep(1)

    async def ack_some() -> None:
        topic = settings.topic(TopicKind.RESULTS)
        latest = progress.latest_ms
        batch = await consumer.getmany(timeout_ms=500, max_records=5000)
        futures = []
        for records in batch.values():
            for record in records:
                run = parse_run(record.value)
                progress.runs += 1
                if run.scheduled_ms > latest.get(run.schedule_id, -1):
                    latest[run.schedule_id] = run.scheduled_ms
                value = result_value(
                    run_id=run.run_id,
                    schedule_id=run.schedule_id,
                    task=run.task,
                    attempt=run.attempt,
                    status=RunStatus.SUCCEEDED,
                    scheduled_ms=run.scheduled_ms,
                    started_ms=now_ms(),
                    finished_ms=now_ms(),
                    worker=ACKER_WORKER,
                    error=None,
                )
                futures.append(await producer.send(topic, key=record.key, value=value))
        if futures:
            await asyncio.gather(*futures)

    task = asyncio.create_task(loop())
    try:
        yield progress
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await producer.stop()
        await consumer.stop()


@dataclass
class RunsReport:
    """The verdicts of the topic checkers, with the lists the tests assert empty."""

    verdicts: list[Verdict] = field(default_factory=list)
    runs: int = 0
    missed_reported: int = 0
    late_ms: list[int] = field(default_factory=list)  # broker append - scheduled, attempt 1

    def _violations(self, name: str) -> list[str]:
        return [v for verdict in self.verdicts if verdict.name == name for v in verdict.violations]

    @property
    def duplicates(self) -> list[str]:
        return self._violations("exactly-once")

    @property
    def gaps(self) -> list[str]:
        return self._violations("nothing-missed")

    @property
    def early(self) -> list[str]:
        return self._violations("never-early")

    @property
    def occurrences_checked(self) -> int:
        return sum(v.checked for v in self.verdicts if v.name == "nothing-missed")

    def summary(self) -> str:
        late = sorted(self.late_ms)
        p99 = late[len(late) * 99 // 100] if late else None
        return (
            f"runs={self.runs} checked={self.occurrences_checked}"
            f" duplicates={len(self.duplicates)} gaps={len(self.gaps)} early={len(self.early)}"
            f" missed_reported={self.missed_reported} fire_lateness_p99_ms={p99}"
            f" max={late[-1] if late else None}"
            f" first_dups={self.duplicates[:5]} first_gaps={self.gaps[:5]}"
            f" first_early={self.early[:5]}"
        )


async def read_topic_evidence(
    settings: Settings, *, ignore_workers: Iterable[str] = (ACKER_WORKER,)
) -> TopicEvidence:
    """Every committed record of the namespace's topics, as the simulation's checkers
    read a simulated Kafka (`simulation.checkers.evidence.from_topics`)."""

    async def read(kind: TopicKind) -> list[TopicRecord]:
        records = await read_to_end(settings, settings.topic(kind), timeout_s=120)
        return [TopicRecord(r.partition, r.offset, r.timestamp_ms, r.key, r.value) for r in records]

    commands = await read(TopicKind.COMMANDS)
    return from_topics(
        runs=await read(TopicKind.RUNS),
        results=await read(TopicKind.RESULTS),
        dlq=await read(TopicKind.DLQ),
        schedules=sorted(await read(TopicKind.SCHEDULES), key=lambda r: (r.partition, r.offset)),
        commands=[(r.key, r.value, r.append_ms) for r in commands if r.key and r.value],
        ignore_workers=frozenset(ignore_workers),
        alerts=await read(TopicKind.ALERTS),
    )


async def check_runs(
    settings: Settings,
    schedule_ids: Iterable[str],
    *,
    window_end_ms: int,
    ignore_workers: Iterable[str] = (ACKER_WORKER,),
) -> RunsReport:
    """Read the topics to their end and judge them with the simulation's checkers.

    Every occurrence of the schedules ``schedule_ids`` from the first one its shard
    planned (the schedule's first changelog record) up to ``window_end_ms`` must be
    accounted for. Results of ``ignore_workers`` (the test's stand-in `acker`, which
    is not under test and may answer a run twice) are left out of the one-result rule.
    """
    topics = await read_topic_evidence(settings, ignore_workers=ignore_workers)
    ids = set(schedule_ids)
    for upserts in (topics.definitions, topics.dags):  # only the test's own are judged
        for sid in [sid for sid in upserts if sid not in ids]:
            del upserts[sid]
    evidence = of_topics(topics, end_ms=window_end_ms)
    report = RunsReport(verdicts=[check(evidence) for check in TOPIC_CHECKERS])
    report.runs = len(topics.runs)
    report.late_ms = [r.append_ms - r.scheduled_ms for r in topics.runs if r.attempt == 1]
    report.missed_reported = sum(
        1 for r in topics.results if r.status in (RunStatus.MISSED, RunStatus.SKIPPED)
    )
    return report
