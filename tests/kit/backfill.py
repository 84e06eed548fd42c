"""Helpers of the real-broker backfill tests (docs/DESIGN.md §6.9): the topics read
back, the command line in the test's namespace, a poll, and the marks the timed test
job (`tests.jobs.backfill`) writes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from actors.shard.state import decode_schedule
from actors.views.schedules import latest_states
from actors.views.tail import read_to_end
from tests.kit.paths import REPO
from tests.kit.worker import ChildProcess
from topics.messages import PROGRESS_STATUS, Result, Run, is_cancel, parse_result, parse_run
from topics.names import Settings, TopicKind


async def runs_of(settings: Settings) -> list[Run]:
    """Every run record of the namespace (read_committed), cancel records left out."""
    records = await read_to_end(settings, settings.topic(TopicKind.RUNS))
    return [parse_run(r.value) for r in records if r.value is not None and not is_cancel(r.value)]


async def outcomes_of(settings: Settings) -> list[Result]:
    """Every result of the namespace but the progress reports."""
    records = await read_to_end(settings, settings.topic(TopicKind.RESULTS))
    found = [parse_result(r.value) for r in records if r.value is not None]
    return [r for r in found if r.status != PROGRESS_STATUS]


async def backfill_doc(settings: Settings, schedule_id: str) -> dict[str, Any] | None:
    """The schedule's backfill as its changelog record holds it, or None."""
    records = await read_to_end(settings, settings.topic(TopicKind.SCHEDULES))
    value = latest_states(records).get(schedule_id)
    if value is None:
        return None
    state = decode_schedule(value)
    return None if state.backfill is None else state.backfill.json()


def cli(settings: Settings, *argv: str) -> tuple[int, str, str]:
    """``kafkron ARGV`` in a child process of the test's namespace."""
    env = {
        **os.environ,
        "KAFKRON_NAMESPACE": settings.namespace,
        "KAFKRON_BOOTSTRAP": settings.bootstrap,
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def dry_run(settings: Settings, *argv: str) -> list[dict[str, Any]] | None:
    """The steps of ``kafkron backfill ARGV --dry-run --json`` and its totals last, or
    None when it failed (the recorder's database not there yet)."""
    code, out, _err = cli(settings, "backfill", *argv, "--dry-run", "--json")
    if code != 0:
        return None
    return [orjson.loads(line) for line in out.splitlines()]


async def wait_for(
    what: str,
    check: Callable[[], Awaitable[Any]],
    timeout_s: float,
    *procs: ChildProcess,
) -> Any:
    """Poll ``check`` until it returns something true; fail with the processes' logs."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = await check()
        if found:
            return found
        for proc in procs:
            proc.check_alive()
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {p.name}\n{p.log()[-3000:]}" for p in procs)
            raise AssertionError(f"{what}: not after {timeout_s:.0f} s\n{logs}")
        await asyncio.sleep(0.5)


def max_in_flight(lines: list[tuple[str, str, int, str]], keys: set[tuple[str, int]]) -> int:
    """The most of ``keys`` (run id, attempt) between their start and end marks at
    once, in the order the jobs wrote them (one append-only file)."""
    open_now = peak = 0
    for event, run_id, attempt, _ in lines:
        if (run_id, attempt) not in keys:
            continue
        open_now += 1 if event == "start" else -1
        peak = max(peak, open_now)
    return peak


@dataclass(frozen=True, slots=True)
class TimedMark:
    """One line of the timed job's log: ``start``, ``end`` or ``stopped`` (asked to
    stop by a cancel), the attempt, and the worker's wall clock then (epoch ms)."""

    event: str
    run_id: str
    attempt: int
    at_ms: int

    @property
    def key(self) -> tuple[str, int]:
        return (self.run_id, self.attempt)


def timed_marks(path: Path) -> list[TimedMark]:
    """The lines `tests.jobs.backfill`'s ``test.timed`` wrote to ``path``, in order."""
    if not path.exists():
        return []
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        event, run_id, attempt, at_ms = line.split(" ")
        found.append(TimedMark(event, run_id, int(attempt), int(at_ms)))
    return found


def peak_in_flight(found: list[TimedMark], keys: set[tuple[str, int]]) -> int:
    """The most of ``keys`` between their start and their end (or stop) at once."""
    open_now = peak = 0
    for mark in found:
        if mark.key not in keys:
            continue
        open_now += 1 if mark.event == "start" else -1
        peak = max(peak, open_now)
    return peak
