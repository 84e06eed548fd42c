"""Helpers of the worker integration tests: write runs, start workers, read results."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from actors.views.tail import read_to_end
from actors.worker.core import WorkerCore
from tests.kit.paths import REPO
from topics.command_types import Job
from topics.messages import (
    PROGRESS_STATUS,
    Result,
    idempotency_key,
    parse_result,
    run_id_for,
    run_value,
)
from topics.names import Settings, TopicKind

T0 = 1_790_000_000_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def heard(core: WorkerCore, at_ms: int) -> int:
    """The group's heartbeats answered up to ``at_ms``, as the runtime reports each one
    (``WorkerMachine.heartbeat`` -> ``WorkerCore.lease_renewed``): the core's lease
    holds at ``at_ms``, and no start is refused for a lease it never had renewed.
    Returns ``at_ms``, so an event at that instant reads ``core.job_exited(key,
    outcome, heard(core, t))``."""
    core.lease_renewed(at_ms)
    return at_ms


def run_record(
    schedule_id: str,
    job_name: str,
    args: Mapping[str, Any] | None = None,
    *,
    scheduled_ms: int = T0,
    attempt: int = 1,
    timeout_s: float = 120,
    report_start: bool = False,
    **job_fields: Any,
) -> tuple[bytes, bytes]:
    """(key, value) of one run as a shard would write it (``report_start``: as under a
    start deadline; ``job_fields``: the job's other fields, ``concurrency=``,
    ``rate_limit=``, ...)."""
    run_id = run_id_for(schedule_id, scheduled_ms)
    fired = now_ms()
    value = run_value(
        run_id=run_id,
        schedule_id=schedule_id,
        task=None,
        scheduled_ms=scheduled_ms,
        fired_ms=fired,
        attempt=attempt,
        job=Job(job_name, dict(args or {}), **job_fields),
        idempotency_key=idempotency_key(run_id),
        deadline_ms=fired + int(timeout_s * 1000),
        report_start=report_start,
    )
    return schedule_id.encode(), value


async def produce(
    settings: Settings, records: list[tuple[bytes, bytes]], *, partition: int | None = None
) -> None:
    """The records onto the runs topic, by their keys' partition or all onto ``partition``
    (the one a concurrency or rate-limit key hashes to, as the shard places them)."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all")
    await producer.start()
    try:
        for key, value in records:
            await producer.send(
                settings.topic(TopicKind.RUNS), value=value, key=key, partition=partition
            )
        await producer.flush()
    finally:
        await producer.stop()


async def results(settings: Settings, *, progress: bool = False) -> list[Result]:
    """The attempts' results on the results topic; with ``progress``, the ``running``
    progress reports (``ctx.heartbeat(details)``) instead, which are no outcome."""
    records = await read_to_end(settings, settings.topic(TopicKind.RESULTS))
    found = [parse_result(r.value) for r in records if r.value is not None]
    return [r for r in found if (r.status == PROGRESS_STATUS) == progress]


async def wait_for_results(
    settings: Settings,
    done: Callable[[list[Result]], bool],
    *,
    timeout_s: float = 120,
    workers: Sequence[ChildProcess] = (),
) -> list[Result]:
    """Poll the results topic (read_committed) until ``done(results)`` holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = await results(settings)
        if done(found):
            return found
        for worker in workers:
            worker.check_alive()
        if time.monotonic() > deadline:
            raise AssertionError(
                f"results not complete after {timeout_s:.0f} s: {len(found)} visible: "
                + ", ".join(f"{r.run_id}#{r.attempt}={r.status}" for r in found[:20])
            )
        await asyncio.sleep(0.5)


# A worker's stop is bounded by the product itself: the drain (--drain-s, 30 s) and
# then the bounded closes (30 s), past which it exits with code 3 (worker_cmd.py).
# Waiting less than that killed a worker whose stop was slow but within its own
# bound, and the test saw -9 instead of the worker's own account in its log.
STOP_WAIT_S = 75.0


class ChildProcess:
    """A ``kafkron`` command in a child process, its output kept in a file."""

    def __init__(
        self,
        settings: Settings,
        tmp: Path,
        name: str,
        argv: list[str],
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.log_path = tmp / f"{name}.log"
        full_env = dict(os.environ)
        full_env.update(
            {
                "KAFKRON_NAMESPACE": settings.namespace,
                "KAFKRON_BOOTSTRAP": settings.bootstrap,
                "PYTHONPATH": str(REPO),
                "KAFKRON_TEST_MARKS": str(tmp / "marks.log"),
            }
        )
        full_env.update(env or {})
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "actors.cli", *argv],
            cwd=REPO,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"worker {self.name} exited {self.proc.returncode}:\n{self.log()}")

    async def wait_log(self, text: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.log():
            self.check_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} never logged {text!r}:\n{self.log()}")
            await asyncio.sleep(0.1)

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def stop(self, timeout_s: float = STOP_WAIT_S) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


class WorkerProcess(ChildProcess):
    """``kafkron worker`` with the test jobs (or ``jobs``)."""

    def __init__(
        self,
        settings: Settings,
        tmp: Path,
        name: str,
        *,
        jobs: str = "tests.jobs.worker",
        concurrency: int = 4,
        session_timeout_ms: int = 6_000,
        extra_args: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        argv = [
            "worker",
            "--jobs",
            jobs,
            "--concurrency",
            str(concurrency),
            "--session-timeout-ms",
            str(session_timeout_ms),
            "--worker-id",
            name,
            *extra_args,
        ]
        super().__init__(settings, tmp, name, argv, env=env)


class SchedulerProcess(ChildProcess):
    """``kafkron scheduler`` with a short session (tests fail over faster)."""

    def __init__(self, settings: Settings, tmp: Path, name: str = "scheduler") -> None:
        argv = ["scheduler", "--session-timeout-ms", "6000", "--heartbeat-ms", "1000"]
        super().__init__(settings, tmp, name, argv)


def marks(tmp: Path) -> list[tuple[str, str, int, str]]:
    """(event, run_id, attempt, worker) lines the test jobs wrote."""
    path = tmp / "marks.log"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        event, run_id, attempt, worker = line.split(" ")
        out.append((event, run_id, int(attempt), worker))
    return out


def owned_partitions(worker: WorkerProcess) -> set[int]:
    """The runs partitions the worker's log last said it owns."""
    owned: set[int] = set()
    for line in worker.log().splitlines():
        if "owns runs partitions" in line:
            text = line.rsplit("owns runs partitions", 1)[1].strip()
            owned = set() if text == "none" else {int(p) for p in text.strip("[]").split(",")}
    return owned


def owner_of(workers: list[WorkerProcess], partition: int) -> WorkerProcess | None:
    """The live worker whose log last said it owns ``partition``, if any."""
    for worker in workers:
        if worker.proc.poll() is None and partition in owned_partitions(worker):
            return worker
    return None


async def wait_until_split(
    workers: list[WorkerProcess], partitions: int, timeout_s: float = 60
) -> list[set[int]]:
    """Wait until every partition is owned, each by exactly one of ``workers``."""
    deadline = time.monotonic() + timeout_s
    while True:
        owned = [owned_partitions(w) for w in workers]
        flat = [p for o in owned for p in o]
        if sorted(flat) == list(range(partitions)) and all(owned):
            return owned
        for worker in workers:
            worker.check_alive()
        if time.monotonic() > deadline:
            raise AssertionError(f"partitions never split between workers: {owned}")
        await asyncio.sleep(0.2)


def key_for_partition(prefix: str, partition: int, partitions: int) -> str:
    """A schedule id that the default partitioner puts on ``partition``."""
    from topics.partitioner import murmur2_partition

    for i in range(10_000):
        candidate = f"{prefix}-{i}"
        if murmur2_partition(candidate.encode(), partitions) == partition:
            return candidate
    raise AssertionError(f"no key for partition {partition}")


async def wait_marks(
    tmp: Path, want: Callable[[list[tuple[str, str, int, str]]], bool], timeout_s: float = 60
) -> list[tuple[str, str, int, str]]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = marks(tmp)
        if want(found):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"marks never matched: {found}")
        await asyncio.sleep(0.1)
