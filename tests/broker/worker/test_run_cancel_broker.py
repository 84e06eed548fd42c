"""run.cancel end to end on the real broker: scheduler, workers, the CLI.

Jobs of 60 s are cancelled once they have started; each must stop (its "stopped"
mark), end with one ``cancelled`` result carrying the reason, and never be retried.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from actors.cli.submit_cmd import encode, send_commands
from actors.views.tail import read_to_end
from tests.kit.worker import (
    REPO,
    ChildProcess,
    SchedulerProcess,
    WorkerProcess,
    marks,
    now_ms,
    results,
    wait_for_results,
    wait_marks,
    wait_until_split,
)
from topics.messages import is_cancel, parse_rejected, parse_run, run_id_for
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms

RETRY = {"max_attempts": 3, "initial_s": 1, "jitter": "none"}


async def _once(settings: Settings, schedule_id: str, job: str, at_ms: int) -> str:
    command: dict[str, Any] = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": {"at": format_ms(at_ms)},
        "job": {"name": job, "args": {"seconds": 60}},
        "retry": RETRY,
        "timeout_s": 600,
    }
    await send_commands(settings, [encode(command, now_ms())])
    return run_id_for(schedule_id, at_ms)


def _cli(settings: Settings, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "KAFKRON_NAMESPACE": settings.namespace,
        "KAFKRON_BOOTSTRAP": settings.bootstrap,
    }
    return subprocess.run(
        [sys.executable, "-m", "actors.cli", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def _attempts(settings: Settings) -> list[tuple[str, int]]:
    records = await read_to_end(settings, settings.topic(TopicKind.RUNS))
    return sorted(
        (run.run_id, run.attempt)
        for run in (
            parse_run(r.value) for r in records if r.value is not None and not is_cancel(r.value)
        )
    )


async def test_an_async_and_a_sync_job_are_cancelled_once_and_never_retried(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    children: list[ChildProcess] = [
        SchedulerProcess(kafka_settings, tmp_path),
        WorkerProcess(kafka_settings, tmp_path, "w1"),
    ]
    try:
        at_ms = now_ms() + 1_000
        async_id = await _once(kafka_settings, "cancel-async", "test.stoppable", at_ms)
        sync_id = await _once(kafka_settings, "cancel-sync", "test.stoppable_sync", at_ms)
        await wait_marks(tmp_path, lambda ms: len([m for m in ms if m[0] == "start"]) == 2, 90)
        for run_id in (async_id, sync_id):
            sent = _cli(kafka_settings, "run", "cancel", run_id, "--reason", "bad input file")
            assert sent.returncode == 0, sent.stderr
        found = await wait_for_results(kafka_settings, lambda rs: len(rs) >= 2, workers=children)
        stopped = await wait_marks(
            tmp_path, lambda ms: len([m for m in ms if m[0] == "stopped"]) == 2
        )
        # A cancel of a run that already ended is reported, not applied.
        again = _cli(kafka_settings, "run", "cancel", async_id)
        assert again.returncode == 0, again.stderr
        rejected: list[str] = []
        for _ in range(120):
            records = await read_to_end(kafka_settings, kafka_settings.topic(TopicKind.REJECTED))
            rejected = [parse_rejected(r.value).reason for r in records if r.value is not None]
            if rejected:
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(3)  # room for a retry, were there one
        found = await results(kafka_settings)
        reports = await results(kafka_settings, progress=True)
        attempts = await _attempts(kafka_settings)
    finally:
        for child in children:
            child.stop()
    # The sync job's progress went out as running reports (the first heartbeat's at
    # once, then at most one per 10 s), none of them an outcome.
    assert reports and {(r.run_id, r.attempt, r.status) for r in reports} == {
        (sync_id, 1, "running")
    }
    assert all(r.progress is not None and r.progress["details"]["beats"] >= 1 for r in reports)
    assert sorted((r.run_id, r.attempt, r.status, r.worker) for r in found) == [
        (async_id, 1, "cancelled", "w1"),
        (sync_id, 1, "cancelled", "w1"),
    ]
    assert all(r.error == {"type": "Cancelled", "message": "bad input file"} for r in found)
    assert sorted(m[1] for m in stopped if m[0] == "stopped") == sorted((async_id, sync_id))
    assert not [m for m in marks(tmp_path) if m[0] == "end"]
    assert attempts == sorted([(async_id, 1), (sync_id, 1)])
    assert len(rejected) == 1 and "nothing to cancel" in rejected[0]


async def test_a_cancel_during_a_worker_kill_is_never_started_by_the_new_owner(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """The only worker, running the job, is killed (-9) and the cancel sent; once the
    cancel record is committed a second worker starts and adopts the partition: it
    reads the partition to its end before starting anything, sees the run and then
    its cancel, and writes ``cancelled`` without starting the job again. (Starting
    the second worker only then fixes the order the issue asks about: a cancel
    committed before the new owner adopts the partition.)"""
    victim = WorkerProcess(kafka_settings, tmp_path, "w1")
    children: list[ChildProcess] = [SchedulerProcess(kafka_settings, tmp_path), victim]
    try:
        await wait_until_split([victim], 3)
        run_id = await _once(kafka_settings, "cancel-kill", "test.stoppable", now_ms() + 1_000)
        [start] = await wait_marks(tmp_path, lambda ms: len(ms) == 1, 90)
        assert start[3] == victim.name
        victim.signal(signal.SIGKILL)
        sent = _cli(kafka_settings, "run", "cancel", run_id, "--reason", "operator")
        assert sent.returncode == 0, sent.stderr
        await _wait_cancel_record(kafka_settings, run_id)
        survivor = WorkerProcess(kafka_settings, tmp_path, "w2")
        children.append(survivor)
        [result] = await wait_for_results(
            kafka_settings, lambda rs: len(rs) >= 1, workers=[children[0], survivor]
        )
        await asyncio.sleep(3)  # room for a retry or a second start, were there one
        found = await results(kafka_settings)
        attempts = await _attempts(kafka_settings)
    finally:
        for child in children:
            child.stop()
    assert [(r.run_id, r.attempt, r.status) for r in found] == [(run_id, 1, "cancelled")]
    assert result.worker == "w2" and result.started_ms is None
    assert [m[0] for m in marks(tmp_path)] == ["start"]  # the new owner never started it
    assert attempts == [(run_id, 1)]


async def _wait_cancel_record(settings: Settings, run_id: str, timeout_s: float = 60) -> None:
    """Until the cancel record of ``run_id`` is committed on the runs topic."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        records = await read_to_end(settings, settings.topic(TopicKind.RUNS))
        if any(
            r.value is not None and is_cancel(r.value) and run_id.encode() in r.value
            for r in records
        ):
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no cancel record of {run_id} on the runs topic")
        await asyncio.sleep(0.2)


async def test_cancel_other_really_stops_the_old_job(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """Every 10 s, a job of 25 s, ``overlap: cancel_other``: when the next occurrence
    fires, the job of the previous one stops (its "stopped" mark) and its one result
    is ``cancelled``."""
    children: list[ChildProcess] = [
        SchedulerProcess(kafka_settings, tmp_path),
        WorkerProcess(kafka_settings, tmp_path, "w1"),
    ]
    command: dict[str, Any] = {
        "v": 1,
        "type": "schedule.upsert",
        "id": "cancel-other",
        "spec": {"every": "10s"},
        "job": {"name": "test.stoppable", "args": {"seconds": 25}},
        "overlap": "cancel_other",
        "retry": RETRY,
    }
    try:
        await send_commands(kafka_settings, [encode(command, now_ms())])
        found_marks = await wait_marks(tmp_path, lambda ms: any(m[0] == "stopped" for m in ms), 90)
        [first_stopped] = [m[1] for m in found_marks if m[0] == "stopped"][:1]
        found = await wait_for_results(
            kafka_settings,
            lambda rs: any(r.run_id == first_stopped for r in rs),
            workers=children,
        )
    finally:
        children[1].signal(signal.SIGKILL)  # a stopping worker would let the newest job finish
        for child in children:
            child.stop()
    [result] = [r for r in found if r.run_id == first_stopped]
    assert (result.status, result.worker) == ("cancelled", "w1")
    assert result.error is not None and "cancel_other" in result.error["message"]
    assert not [m for m in marks(tmp_path) if m[0] == "end" and m[1] == first_stopped]
