"""Scheduler and worker processes together: retries with backoff, the DLQ, replay."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from actors.cli.submit_cmd import encode, send_commands
from actors.shard.retry import backoff_ms
from actors.views.tail import read_to_end
from tests.kit.worker import (
    REPO,
    ChildProcess,
    SchedulerProcess,
    WorkerProcess,
    now_ms,
    results,
    wait_for_results,
)
from topics.commands import RetryPolicy
from topics.messages import DeadLetter, parse_dlq, parse_run
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms

# Generous: firing and committing on a loaded 2-core machine. Only an upper bound;
# retries are never early, which is checked exactly.
LATE_TOLERANCE_MS = 5_000


async def _schedule_once(settings: Settings, schedule_id: str, **fields: Any) -> None:
    command = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": {"at": format_ms(now_ms() + 1_000)},
        **fields,
    }
    await send_commands(settings, [encode(command, now_ms())])


async def _dead_letters(settings: Settings) -> list[DeadLetter]:
    records = await read_to_end(settings, settings.topic(TopicKind.DLQ))
    return [parse_dlq(r.value) for r in records if r.value is not None]


async def _wait_dead(
    settings: Settings, count: int, children: list[ChildProcess], timeout_s: float = 120
) -> list[DeadLetter]:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        dead = await _dead_letters(settings)
        if len(dead) >= count:
            return dead
        for child in children:
            child.check_alive()
        assert asyncio.get_running_loop().time() < deadline, [c.log() for c in children]
        await asyncio.sleep(0.5)


async def test_a_failing_job_is_retried_with_backoff_then_dead_lettered_then_replayed(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    policy = RetryPolicy(max_attempts=4, initial_s=1.0, coefficient=2.0, max_interval_s=100)
    children: list[ChildProcess] = [
        SchedulerProcess(kafka_settings, tmp_path),
        WorkerProcess(kafka_settings, tmp_path, "w1"),
    ]
    try:
        await _schedule_once(
            kafka_settings,
            "always-fails",
            job={"name": "test.fail", "args": {"message": "card network down"}},
            retry={"max_attempts": 4, "initial_s": 1, "coefficient": 2, "jitter": "full"},
        )
        [dead] = await _wait_dead(kafka_settings, 1, children)
        found = await results(kafka_settings)
        runs = [
            parse_run(r.value)
            for r in await read_to_end(kafka_settings, kafka_settings.topic(TopicKind.RUNS))
            if r.value is not None
        ]

        # Replay: the same run id runs again, attempts numbered on.
        replay = subprocess.run(
            [sys.executable, "-m", "actors.cli", "dlq", "replay", dead.run_id],
            cwd=REPO,
            env=_env(kafka_settings),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert replay.returncode == 0, replay.stderr
        replayed = await wait_for_results(
            kafka_settings, lambda rs: any(r.attempt == 5 for r in rs), workers=children
        )
        listing = subprocess.run(
            [sys.executable, "-m", "actors.cli", "dlq", "list", "--json"],
            cwd=REPO,
            env=_env(kafka_settings),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        for child in children:
            child.stop()

    assert [(r.attempt, r.status) for r in sorted(found, key=lambda r: r.attempt)] == [
        (1, "failed"),
        (2, "failed"),
        (3, "failed"),
        (4, "failed"),
    ]
    assert dead.run_id == found[0].run_id and dead.job.name == "test.fail"
    assert dead.last_error == {"type": "ValueError", "message": "card network down on attempt 4"}
    assert len(dead.attempts) == 4
    # Delays between attempts: never before the policy's (deterministic, jittered)
    # backoff after the failure, never much after; each within the policy's cap.
    finished = {r.attempt: r.finished_ms for r in found}
    fired = {r.attempt: r.fired_ms for r in runs}
    for attempt in (1, 2, 3):
        expected_ms = backoff_ms(
            policy, run_id=dead.run_id, attempt=attempt, failures_in_series=attempt
        )
        cap_ms = min(100_000, 1_000 * 2 ** (attempt - 1))
        assert 0 <= expected_ms <= cap_ms
        finished_ms = finished[attempt]
        assert finished_ms is not None
        delay_ms = fired[attempt + 1] - finished_ms
        assert expected_ms <= delay_ms + 5  # not early (ms rounding of two clocks)
        assert delay_ms <= cap_ms + LATE_TOLERANCE_MS
    again = [r for r in replayed if r.attempt == 5]
    assert [(r.run_id, r.status) for r in again] == [(dead.run_id, "failed")]
    assert listing.returncode == 0 and dead.run_id in listing.stdout


async def test_a_timed_out_attempt_is_retried(kafka_settings: Settings, tmp_path: Path) -> None:
    children: list[ChildProcess] = [
        SchedulerProcess(kafka_settings, tmp_path),
        WorkerProcess(kafka_settings, tmp_path, "w1"),
    ]
    try:
        await _schedule_once(
            kafka_settings,
            "too-slow",
            job={"name": "test.sleep", "args": {"seconds": 60}},
            timeout_s=2,
            retry={"max_attempts": 2, "initial_s": 1, "jitter": "none"},
        )
        [dead] = await _wait_dead(kafka_settings, 1, children)
        found = await results(kafka_settings)
    finally:
        for child in children:
            child.stop()
    assert sorted((r.attempt, r.status, r.worker) for r in found) == [
        (1, "timed_out", "w1"),
        (2, "timed_out", "w1"),
    ]
    assert dead.last_error is not None and dead.last_error["type"] == "Timeout"


def _env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "KAFKRON_NAMESPACE": settings.namespace,
        "KAFKRON_BOOTSTRAP": settings.bootstrap,
    }
