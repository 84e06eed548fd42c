"""`kafkron backfill` on the real broker (docs/DESIGN.md §6.9).

A schedule runs, loses its scheduler for longer than its misfire grace (a planted
outage: its occurrences are reported missed), runs again; the recorder records it
all. A ``missing`` backfill over the whole range then runs exactly the missed
occurrences, each once at attempt 2, with the scheduler killed (``kill -9``) in the
middle, never more than ``--max-parallel 4`` at once by the jobs' own start and end
marks. A second backfill (``--reprocess all``) is cancelled with ``--running``:
nothing of it starts after the cancel.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from actors.shard.state import decode_schedule
from actors.views.schedules import latest_states
from actors.views.tail import read_to_end
from tests.kit.paths import REPO
from tests.kit.scheduler import produce
from tests.kit.worker import ChildProcess, SchedulerProcess, WorkerProcess, marks, now_ms
from topics.messages import Run, is_cancel, parse_result, parse_run, parse_run_id
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SCHEDULE = "bf"
EVERY_MS = 2000


async def _runs(settings: Settings) -> list[Run]:
    records = await read_to_end(settings, settings.topic(TopicKind.RUNS))
    return [parse_run(r.value) for r in records if r.value is not None and not is_cancel(r.value)]


async def _results(settings: Settings) -> list[object]:
    records = await read_to_end(settings, settings.topic(TopicKind.RESULTS))
    found = [parse_result(r.value) for r in records if r.value is not None]
    return [r for r in found if r.status != "running"]


async def _backfill_doc(settings: Settings) -> dict[str, object] | None:
    records = await read_to_end(settings, settings.topic(TopicKind.SCHEDULES))
    value = latest_states(records).get(SCHEDULE)
    if value is None:
        return None
    state = decode_schedule(value)
    return None if state.backfill is None else state.backfill.json()


def _cli(settings: Settings, *argv: str) -> tuple[int, str, str]:
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


async def _wait(what: str, check: object, timeout_s: float, *procs: ChildProcess) -> object:
    deadline = time.monotonic() + timeout_s
    while True:
        found = await check()  # type: ignore[operator]
        if found:
            return found
        for proc in procs:
            proc.check_alive()
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {p.name}\n{p.log()[-3000:]}" for p in procs)
            raise AssertionError(f"{what}: not after {timeout_s:.0f} s\n{logs}")
        await asyncio.sleep(0.5)


def _max_in_flight(lines: list[tuple[str, str, int, str]], keys: set[tuple[str, int]]) -> int:
    """The most of ``keys`` (run id, attempt) between their start and end marks at
    once, in the order the jobs wrote them (one append-only file)."""
    open_now = peak = 0
    for event, run_id, attempt, _ in lines:
        if (run_id, attempt) not in keys:
            continue
        open_now += 1 if event == "start" else -1
        peak = max(peak, open_now)
    return peak


@pytest.mark.kafka_partitions(1)
async def test_a_missing_backfill_runs_exactly_the_missed_across_a_kill_9_then_cancel(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    db = tmp_path / "h.db"
    env_db = str(db)
    worker = WorkerProcess(settings, tmp_path, "w1", concurrency=8)
    recorder = ChildProcess(settings, tmp_path, "recorder", ["recorder", "--db", env_db])
    scheduler = SchedulerProcess(settings, tmp_path, "s1")
    procs = [worker, recorder, scheduler]
    try:
        command = {
            "v": 1,
            "type": "schedule.upsert",
            "id": SCHEDULE,
            "spec": {"every": "2s"},
            "job": {"name": "test.sleep", "args": {"seconds": 1.5}},
            "misfire": {"policy": "skip", "grace_s": 1},
            "overlap": "allow",
            "timeout_s": 60,
        }
        await produce(settings, [(SCHEDULE.encode(), orjson.dumps(command))])

        async def live_runs(count: int) -> object:
            runs = [r for r in await _runs(settings) if r.attempt == 1]
            return runs if len(runs) >= count else None

        first = await _wait("the first live runs", lambda: live_runs(4), 120, *procs)
        from_ms = min(r.scheduled_ms for r in first)  # type: ignore[attr-defined]
        # The planted outage: no scheduler for about 20 s (its session is 6 s).
        scheduler.signal(signal.SIGKILL)
        scheduler.stop()
        await asyncio.sleep(20)
        scheduler = SchedulerProcess(settings, tmp_path, "s2")
        procs = [worker, recorder, scheduler]

        async def missed_reported() -> object:
            missed = [r for r in await _results(settings) if r.status == "missed"]  # type: ignore[attr-defined]
            return missed or None

        await _wait("the outage's missed results", missed_reported, 120, *procs)
        back_ms = now_ms()
        await _wait(
            "live runs after the outage",
            lambda: _after(settings, back_ms + 3 * EVERY_MS),
            120,
            *procs,
        )
        to_ms = now_ms()

        # Brute force: what the topics say was missed in [from, to) (the shard reports
        # each of these few individually: no folded range).
        missed_instants: set[int] = set()
        for result in await _results(settings):
            if result.status in ("missed", "skipped"):  # type: ignore[attr-defined]
                _, at, _ = parse_run_id(result.run_id)  # type: ignore[attr-defined]
                assert result.covers is None  # type: ignore[attr-defined]
                if from_ms <= at < to_ms:
                    missed_instants.add(at)
        assert missed_instants

        base = ["backfill", SCHEDULE, "--from", format_ms(from_ms), "--to", format_ms(to_ms)]

        async def recorder_caught_up() -> object:
            code, out, _err = _cli(settings, *base, "--db", env_db, "--dry-run", "--json")
            if code != 0:
                return None
            lines = [orjson.loads(line) for line in out.splitlines()]
            totals = lines[-1]
            steps = lines[:-1]
            busy = totals["totals"]["unknown"] or any(
                s["reason"].startswith("running") for s in steps
            )
            return None if busy else steps

        steps = await _wait("the recorder caught up", recorder_caught_up, 120, *procs)
        planned = {
            (s["scheduled_at"], s["attempt"])  # type: ignore[index]
            for s in steps  # type: ignore[attr-defined]
            if s["action"] in ("run", "rerun")  # type: ignore[index]
        }
        assert planned == {(format_ms(at), 2) for at in missed_instants}

        runs_before = {(r.run_id, r.attempt) for r in await _runs(settings)}
        code, out, err = _cli(
            settings, *base, "--db", env_db, "--max-parallel", "4", "--backfill-id", "b1"
        )
        assert code == 0, err
        assert "backfill b1 of bf" in out

        async def backfill_started(count: int) -> object:
            fresh = [r for r in await _runs(settings) if (r.run_id, r.attempt) not in runs_before]
            return [r for r in fresh if r.scheduled_ms < to_ms][:count] or None

        await _wait("the backfill under way", lambda: backfill_started(1), 120, *procs)
        scheduler.signal(signal.SIGKILL)  # mid-backfill
        scheduler.stop()
        scheduler = SchedulerProcess(settings, tmp_path, "s3")
        procs = [worker, recorder, scheduler]

        async def ended() -> object:
            doc = await _backfill_doc(settings)
            return doc if doc is not None and "ended" in doc else None

        doc = await _wait("the backfill ended", ended, 240, *procs)
        assert doc["fired"] == len(missed_instants)  # type: ignore[index]

        runs = await _runs(settings)
        pairs = [(r.run_id, r.attempt) for r in runs]
        assert len(pairs) == len(set(pairs)), "a (run_id, attempt) was written twice"
        backfilled = [
            r for r in runs if (r.run_id, r.attempt) not in runs_before and r.scheduled_ms < to_ms
        ]
        assert sorted(r.scheduled_ms for r in backfilled) == sorted(missed_instants)
        assert {r.attempt for r in backfilled} == {2}
        keys = {(r.run_id, r.attempt) for r in backfilled}

        async def all_ended() -> object:
            done = {
                (r.run_id, r.attempt)  # type: ignore[attr-defined]
                for r in await _results(settings)
            }
            return keys <= done or None

        await _wait("the backfill's results", all_ended, 120, *procs)
        lines = marks(tmp_path)
        assert {(run_id, attempt) for e, run_id, attempt, _ in lines if e == "start"} >= keys
        assert 1 <= _max_in_flight(lines, keys) <= 4

        # A second backfill, of everything, cancelled with its runs in flight.
        runs_before = {(r.run_id, r.attempt) for r in await _runs(settings)}
        code, out, err = _cli(
            settings,
            *base,
            "--db",
            env_db,
            "--reprocess",
            "all",
            "--max-parallel",
            "2",
            "--backfill-id",
            "b2",
        )
        assert code == 0, err
        await _wait("the second backfill under way", lambda: backfill_started(2), 120, *procs)
        code, out, err = _cli(settings, "backfill", "cancel", "b2", "--running", "--reason", "test")
        assert code == 0, err

        async def cancelled() -> object:
            doc = await _backfill_doc(settings)
            return doc if doc is not None and doc.get("id") == "b2" and "ended" in doc else None

        doc = await _wait("the second backfill cancelled", cancelled, 120, *procs)
        assert doc["cancelled"] == "test"  # type: ignore[index]
        fired = [
            r
            for r in await _runs(settings)
            if (r.run_id, r.attempt) not in runs_before and r.scheduled_ms < to_ms
        ]
        assert len(fired) == doc["fired"]  # type: ignore[index]
        assert len(fired) < len(steps)  # type: ignore[arg-type]
        await asyncio.sleep(8)
        later = [
            r
            for r in await _runs(settings)
            if (r.run_id, r.attempt) not in runs_before and r.scheduled_ms < to_ms
        ]
        assert later == fired, "a run of the cancelled backfill was fired after the cancel"
        code, out, err = _cli(settings, "backfill", "status", SCHEDULE, "--json", "--db", env_db)
        assert code == 0, err
        [row] = orjson.loads(out)
        assert (row["backfill_id"], row["status"], row["left"]) == ("b2", "cancelled", 0)
    finally:
        for proc in procs:
            proc.stop()


async def _after(settings: Settings, at_ms: int) -> object:
    runs = [r for r in await _runs(settings) if r.attempt == 1 and r.scheduled_ms >= at_ms]
    return runs or None
