"""Helpers of the scheduler's real-broker tests: start schedulers, ack runs, check runs.

The invariant checked (`check_runs`): every occurrence of every schedule inside the
window is in ``{ns}.runs`` (read_committed) exactly once as attempt 1, or is
reported ``missed``/``skipped`` in ``{ns}.results``; no (run_id, attempt) twice; no
run fired before its scheduled instant.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from actors.views.tail import read_to_end
from topics.messages import parse_result, parse_run, result_value
from topics.names import Settings, TopicKind
from topics.vocabulary import RunStatus

REPO = Path(__file__).resolve().parent.parent


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
                    worker="test-acker",
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
    runs: int = 0
    occurrences_checked: int = 0
    duplicates: list[tuple[str, int]] = field(default_factory=list)
    gaps: list[tuple[str, int]] = field(default_factory=list)
    early: list[tuple[str, int, int]] = field(default_factory=list)
    missed_reported: int = 0
    late_ms: list[int] = field(default_factory=list)

    def summary(self) -> str:
        late = sorted(self.late_ms)
        p99 = late[len(late) * 99 // 100] if late else None
        return (
            f"runs={self.runs} checked={self.occurrences_checked}"
            f" duplicates={len(self.duplicates)} gaps={len(self.gaps)} early={len(self.early)}"
            f" missed_reported={self.missed_reported} fire_lateness_p99_ms={p99}"
            f" max={late[-1] if late else None}"
            f" first_dups={self.duplicates[:5]} first_gaps={self.gaps[:5]}"
        )


async def check_runs(
    settings: Settings,
    schedule_ids: Iterable[str],
    *,
    period_ms: int,
    window_start_ms: int,
    window_end_ms: int,
) -> RunsReport:
    """Read runs and results to their end and check exactly-once over the window.

    The window is per schedule from its first occurrence at or after
    ``window_start_ms`` to the last at or before ``window_end_ms``.
    """
    report = RunsReport()
    ids = set(schedule_ids)
    first_attempts: Counter[tuple[str, int]] = Counter()
    seen_attempts: Counter[tuple[str, int]] = Counter()
    for record in await read_to_end(settings, settings.topic(TopicKind.RUNS), timeout_s=120):
        assert record.value is not None
        run = parse_run(record.value)
        report.runs += 1
        seen_attempts[(run.run_id, run.attempt)] += 1
        if run.attempt == 1:
            first_attempts[(run.schedule_id, run.scheduled_ms)] += 1
        if run.fired_ms < run.scheduled_ms:
            report.early.append((run.schedule_id, run.scheduled_ms, run.fired_ms))
        report.late_ms.append(run.fired_ms - run.scheduled_ms)
    reported: set[tuple[str, int]] = set()
    for record in await read_to_end(settings, settings.topic(TopicKind.RESULTS), timeout_s=120):
        if record.value is None:
            continue
        result = parse_result(record.value)
        if result.status in ("missed", "skipped"):
            reported.add((result.schedule_id, result.scheduled_ms))
            report.missed_reported += 1
    report.duplicates = sorted(k for k, n in first_attempts.items() if n > 1)
    report.duplicates += sorted((rid, a) for (rid, a), n in seen_attempts.items() if n > 1)
    first = -(-window_start_ms // period_ms) * period_ms
    for schedule_id in sorted(ids):
        t = first
        while t <= window_end_ms:
            report.occurrences_checked += 1
            key = (schedule_id, t)
            if first_attempts[key] == 0 and key not in reported:
                report.gaps.append(key)
            t += period_ms
    return report
