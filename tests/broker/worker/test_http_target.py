"""HTTP targets end to end on the real broker: a scheduler fires them, a worker calls
a local server (tests.kit.http_server) that answers as an idempotent API does.

The server runs in the test's own loop on 127.0.0.1, which the default egress rule
refuses: the workers that must reach it are started with ``--http-allow 127.0.0.1``.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from actors.cli.submit_cmd import encode, send_commands
from actors.views.tail import read_to_end
from tests.kit.http_server import Reply, TargetServer
from tests.kit.worker import (
    ChildProcess,
    SchedulerProcess,
    WorkerProcess,
    now_ms,
    produce,
    results,
    run_record,
    wait_for_results,
    wait_until_split,
)
from topics.messages import DeadLetter, idempotency_key, parse_dlq, parse_run
from topics.names import Settings, TopicKind
from topics.targets import HTTP_JOB, target_job
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus

ALLOW_LOOPBACK = ("--http-allow", "127.0.0.1")
# Backoff of exactly 1 s: a Retry-After of 4 s must be what delays the retry.
RETRY = {"max_attempts": 4, "initial_s": 1, "coefficient": 1, "max_interval_s": 1, "jitter": "none"}


async def _schedule_target(settings: Settings, schedule_id: str, http: dict[str, Any]) -> None:
    command = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": {"at": format_ms(now_ms() + 1_000)},
        "target": {"http": http},
        "retry": RETRY,
    }
    await send_commands(settings, [encode(command, now_ms())])


async def _dead_letters(settings: Settings) -> list[DeadLetter]:
    records = await read_to_end(settings, settings.topic(TopicKind.DLQ))
    return [parse_dlq(r.value) for r in records if r.value is not None]


def _succeeded(count: int) -> Any:
    return lambda rs: sum(r.status == RunStatus.SUCCEEDED for r in rs) >= count


async def test_retries_reuse_the_key_and_each_key_succeeds_once(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """A 500 then a 200, a timeout then the stored 200, a 429 with Retry-After: 4
    then a 200: every run succeeds on its second attempt, every request of a run
    carries the run's key, each key is applied once, the 429's retry waits 4 s."""
    scripts = {
        "/flaky": [Reply(500, b"database down"), Reply(200, b"charged")],
        "/slow": [Reply(200, b"done", delay_s=5), Reply(200, b"done")],
        "/busy": [Reply(429, headers=(("Retry-After", "4"),)), Reply(200)],
    }
    async with TargetServer(scripts) as server:
        children: list[ChildProcess] = [
            SchedulerProcess(kafka_settings, tmp_path),
            WorkerProcess(kafka_settings, tmp_path, "w1", extra_args=ALLOW_LOOPBACK),
        ]
        try:
            for path in scripts:
                http = {"url": server.url(path), "body": {"run": "{run_id}"}, "timeout_s": 1}
                await _schedule_target(kafka_settings, f"hook{path.replace('/', '-')}", http)
            found = await wait_for_results(kafka_settings, _succeeded(3), workers=children)
            await asyncio.sleep(1)  # nothing more may come
            found = await results(kafka_settings)
            runs = [
                parse_run(r.value)
                for r in await read_to_end(kafka_settings, kafka_settings.topic(TopicKind.RUNS))
                if r.value is not None
            ]
        finally:
            for child in children:
                child.stop()

    by_schedule = {
        s: sorted((r for r in found if r.schedule_id == s), key=lambda r: r.attempt)
        for s in ("hook-flaky", "hook-slow", "hook-busy")
    }
    for schedule_id, attempts in by_schedule.items():
        assert [(r.attempt, r.status) for r in attempts] == [
            (1, RunStatus.FAILED),
            (2, RunStatus.SUCCEEDED),
        ], schedule_id
        run_id = attempts[0].run_id
        requests = server.on("/" + schedule_id.removeprefix("hook-"))
        assert [r.key for r in requests] == [idempotency_key(run_id)] * 2
        assert server.applied[idempotency_key(run_id)] == 1
        ok = attempts[1].target
        assert ok is not None and ok["http"]["status"] == 200
        assert isinstance(ok["http"]["duration_ms"], int)
    flaky, slow, busy = (by_schedule[s][0] for s in ("hook-flaky", "hook-slow", "hook-busy"))
    assert flaky.error is not None and flaky.error["type"] == "HttpStatus"
    assert flaky.target is not None and flaky.target["http"]["status"] == 500
    assert flaky.target["http"]["body"] == "database down"
    charged = by_schedule["hook-flaky"][1].target
    assert charged is not None and charged["http"]["body"] == "charged"
    assert slow.error is not None and slow.error["type"] == "HttpTimeout"
    assert busy.error is not None and busy.error["retry_after_s"] == "4"
    # The shard waited the Retry-After, not its 1 s backoff.
    [second] = [r for r in runs if r.schedule_id == "hook-busy" and r.attempt == 2]
    assert busy.finished_ms is not None and second.fired_ms - busy.finished_ms >= 4_000
    assert all(r.job.name == HTTP_JOB for r in runs)


async def test_loopback_is_refused_without_http_allow_by_address_and_by_name(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """A worker started without --http-allow (and with --http-only: no job module)
    refuses the local server, named by address and by "localhost": one attempt
    each, NonRetryable, dead-lettered; the server never hears a request."""
    async with TargetServer() as server:
        children: list[ChildProcess] = [
            SchedulerProcess(kafka_settings, tmp_path),
            ChildProcess(
                kafka_settings,
                tmp_path,
                "w-http",
                ["worker", "--http-only", "--worker-id", "w-http", "--session-timeout-ms", "6000"],
            ),
        ]
        try:
            await _schedule_target(kafka_settings, "by-address", {"url": server.url("/x")})
            await _schedule_target(
                kafka_settings, "by-name", {"url": server.url("/x", host="localhost")}
            )
            deadline = asyncio.get_running_loop().time() + 120
            while len(dead := await _dead_letters(kafka_settings)) < 2:
                for child in children:
                    child.check_alive()
                assert asyncio.get_running_loop().time() < deadline, [c.log() for c in children]
                await asyncio.sleep(0.5)
            found = await results(kafka_settings)
        finally:
            for child in children:
                child.stop()
    assert server.requests == []
    assert sorted((r.schedule_id, r.attempt, r.status) for r in found) == [
        ("by-address", 1, RunStatus.FAILED),
        ("by-name", 1, RunStatus.FAILED),
    ]
    for letter in dead:
        assert letter.job.name == HTTP_JOB and letter.last_error is not None
        assert letter.last_error["type"] == "NonRetryable"
        message = letter.last_error["message"]
        assert message.startswith("EgressRefused: egress refused") and "loopback" in message
    [by_name] = [d.last_error for d in dead if d.schedule_id == "by-name"]
    assert by_name is not None and "localhost resolves to" in by_name["message"]


async def test_a_worker_killed_mid_request_ends_in_one_success_per_run(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    """The server takes each request's effect at once and answers 30 s later; the
    worker is killed (-9) while every request waits. The next owner sends each run
    again with the same key, gets the stored answer, and exactly one succeeded
    result per run id reaches the results topic; each key was applied once."""
    ids = [f"hang-{i}" for i in range(6)]
    async with TargetServer({"/hang": [Reply(200, b"applied", delay_s=30)]}) as server:
        _, args = target_job({"http": {"url": server.url("/hang"), "timeout_s": 60}})
        # Slots for every run at once: all requests wait on the server when w1 dies.
        slots = len(ids) + 2
        w1 = WorkerProcess(
            kafka_settings, tmp_path, "w1", concurrency=slots, extra_args=ALLOW_LOOPBACK
        )
        w2: WorkerProcess | None = None
        try:
            await wait_until_split([w1], 3)
            await produce(kafka_settings, [run_record(i, HTTP_JOB, args) for i in ids])
            deadline = asyncio.get_running_loop().time() + 60
            while len({r.key for r in server.requests}) < len(ids):
                w1.check_alive()
                assert asyncio.get_running_loop().time() < deadline, server.requests
                await asyncio.sleep(0.1)
            w1.signal(signal.SIGKILL)
            w2 = WorkerProcess(
                kafka_settings, tmp_path, "w2", concurrency=slots, extra_args=ALLOW_LOOPBACK
            )
            found = await wait_for_results(
                kafka_settings, _succeeded(len(ids)), workers=[w2], timeout_s=120
            )
            await asyncio.sleep(2)  # a second result would be visible by now
            found = await results(kafka_settings)
        finally:
            w1.stop()
            if w2 is not None:
                w2.stop()
    assert sorted(r.schedule_id for r in found if r.status == RunStatus.SUCCEEDED) == ids
    assert len(found) == len(ids)  # nothing but the one success each
    for result in found:
        key = idempotency_key(result.run_id)
        assert server.applied[key] == 1
        assert [r.key for r in server.requests].count(key) == 2  # sent twice, applied once
        assert result.worker == "w2"
        assert result.target is not None and result.target["http"]["body"] == "applied"
