"""`kafkron.Client` and `SyncClient` end to end on the real broker: every method.

A scheduler and a worker run in a fresh namespace (`tests.kit.worker`); the tests
drive them only through the client: schedules created, fired and waited for,
triggered, paused, resumed, updated and deleted; a run dead-lettered and replayed; a
run cancelled; a DAG upserted, waited for and cleared; results followed; and a bad
field refused before anything reaches the commands topic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actors.views.tail import read_to_end
from kafkron import (
    CANCELLED_ERROR,
    At,
    Client,
    Cron,
    Every,
    InvalidCommand,
    Retry,
    RunStatus,
    Schedule,
    SyncClient,
    Task,
)
from tests.kit.worker import ChildProcess, SchedulerProcess, WorkerProcess, wait_marks
from topics.messages import run_id_for
from topics.names import Settings, TopicKind

RETRY_FAST = Retry(max_attempts=2, initial_s=1, jitter="none")


def _soon(seconds: float = 2.0) -> datetime:
    """A whole-millisecond instant ``seconds`` from now (run ids carry milliseconds)."""
    now = datetime.now(UTC) + timedelta(seconds=seconds)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def _run_id(schedule_id: str, at: datetime) -> str:
    return run_id_for(schedule_id, round(at.timestamp() * 1000))


def _children(settings: Settings, tmp_path: Path) -> list[ChildProcess]:
    return [SchedulerProcess(settings, tmp_path), WorkerProcess(settings, tmp_path, "w1")]


async def test_a_created_schedule_fires_and_every_schedule_method_reaches_its_shard(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    children = _children(kafka_settings, tmp_path)
    try:
        async with Client(kafka_settings) as client:
            at = _soon()
            followed = client.results(schedule="once", since=datetime.now(UTC))
            assert await client.create_schedule("once", At(at), "test.noop") == "once"
            outcome = await client.wait_for(_run_id("once", at), timeout=120)
            assert outcome.status == RunStatus.SUCCEEDED and outcome.succeeded
            assert outcome.dead_letter is None and outcome.error is None
            assert outcome.result.worker == "w1" and outcome.attempt == 1
            first = await asyncio.wait_for(anext(followed), 30)
            assert (first.run_id, first.status) == (_run_id("once", at), "succeeded")
            await followed.aclose()

            await client.create_schedule(
                "hourly", Cron("0 * * * *", tz="Europe/London"), "test.noop", timeout_s=60
            )
            hourly = await _present(client, "hourly", lambda s: True)
            assert hourly.job == "test.noop" and hourly.kind == "schedule"
            assert hourly.spec == {"cron": "0 * * * *", "tz": "Europe/London"}
            assert len(hourly.next_fires) == 5 and not hourly.paused
            assert hourly.next_fires == tuple(
                Client.next_fires(
                    Cron("0 * * * *", tz="Europe/London"),
                    5,
                    after=hourly.next_fires[0] - timedelta(milliseconds=1),
                )
            )
            assert hourly.next_fires[0].minute == 0 and hourly.next_fire == hourly.next_fires[0]

            await client.pause("hourly")
            assert (await _present(client, "hourly", lambda s: s.paused)).paused
            await client.resume("hourly")
            await _present(client, "hourly", lambda s: not s.paused)
            await client.update("hourly", timeout_s=120, retry=Retry(max_attempts=2))
            updated = await _present(client, "hourly", lambda s: s.definition["timeout_s"] == 120)
            assert updated.definition["retry"]["max_attempts"] == 2
            assert updated.spec == hourly.spec and updated.job == "test.noop"

            before = datetime.now(UTC)
            await client.trigger("hourly")
            triggered = await _present(client, "hourly", lambda s: s.last_fired is not None)
            assert triggered.last_fired is not None and triggered.last_fired >= before - timedelta(
                seconds=1
            )
            run_id = _run_id("hourly", triggered.last_fired)
            assert (await client.wait_for(run_id, timeout=120)).status == "succeeded"

            assert sorted(s.id for s in await client.list_schedules()) == ["hourly", "once"]
            await client.delete("hourly")
            await _until(client, "hourly", lambda s: s is None)
            assert [s.id for s in await client.list_schedules()] == ["once"]
    finally:
        for child in children:
            child.stop()


async def test_a_dead_lettered_run_is_waited_for_and_replayed(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    children = _children(kafka_settings, tmp_path)
    try:
        async with Client(kafka_settings) as client:
            at = _soon()
            await client.create_schedule(
                "flaky", At(at), "test.fail_until_attempt", args={"succeed_at": 3}, retry=RETRY_FAST
            )
            run_id = _run_id("flaky", at)
            dead = await client.wait_for(run_id, timeout=120)
            assert dead.status == "failed" and dead.attempt == 2
            assert dead.dead_letter is not None and dead.dead_letter.run_id == run_id
            assert dead.error is not None and dead.error["type"] == "RuntimeError"
            replayed_at = datetime.now(UTC)
            await client.replay(run_id)
            again = await client.wait_for(run_id, timeout=120, since=replayed_at)
            assert (again.status, again.attempt, again.dead_letter) == ("succeeded", 3, None)
    finally:
        for child in children:
            child.stop()


async def test_a_cancelled_run_ends_cancelled_with_the_reason(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    children = _children(kafka_settings, tmp_path)
    try:
        async with Client(kafka_settings) as client:
            at = _soon()
            await client.create_schedule("long", At(at), "test.stoppable", args={"seconds": 60})
            await wait_marks(tmp_path, lambda marks: len(marks) == 1, 90)
            await client.cancel(_run_id("long", at), "bad input file")
            outcome = await client.wait_for(_run_id("long", at), timeout=120)
    finally:
        for child in children:
            child.stop()
    assert outcome.status == "cancelled"
    assert outcome.error == {"type": CANCELLED_ERROR, "message": "bad input file"}


async def test_a_dag_run_is_waited_for_and_a_cleared_task_runs_again(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    children = _children(kafka_settings, tmp_path)
    try:
        async with Client(kafka_settings) as client:
            at = _soon()
            tasks = {"extract": Task("test.noop"), "load": Task("test.noop", after=["extract"])}
            await client.upsert_dag("etl", At(at), tasks, max_active_runs=1)
            dag_run = _run_id("etl", at)
            ended = await client.wait_for(dag_run, timeout=120)
            assert ended.status == "succeeded" and ended.counts == {"succeeded": 2}
            task_run = await client.wait_for(f"{dag_run}/load", timeout=30)
            assert task_run.status == "succeeded" and task_run.result.task == "load"
            etl = await client.get_schedule("etl")
            assert etl is not None and etl.kind == "dag" and etl.job is None
            cleared_at = datetime.now(UTC)
            await client.clear_dag(dag_run, "load")
            again = await client.wait_for(dag_run, timeout=120, since=cleared_at)
            assert again.status == "succeeded" and again.attempt == 2
    finally:
        for child in children:
            child.stop()


async def test_a_bad_field_raises_naming_it_and_sends_nothing(kafka_settings: Settings) -> None:
    async with Client(kafka_settings) as client:
        with pytest.raises(InvalidCommand) as cron:
            await client.create_schedule("bad", Cron("0 25 * * *"), "test.noop")
        with pytest.raises(InvalidCommand) as retry:
            await client.create_schedule("bad", Every("1m"), "test.noop", retry=Retry(initial_s=0))
        with pytest.raises(InvalidCommand) as past:
            await client.create_schedule("bad", At("2020-01-01T00:00:00Z"), "test.noop")
        with pytest.raises(InvalidCommand) as task:
            await client.upsert_dag("bad", Every("1h"), {"a": Task("j", after=["nope"])})
        with pytest.raises(InvalidCommand) as run_id:
            await client.cancel("not-a-run-id")
        with pytest.raises(InvalidCommand) as ident:
            await client.pause("a/b")
    assert [e.value.field for e in (cron, retry, past, task, run_id, ident)] == [
        "spec.cron",
        "retry.initial_s",
        "spec.at",
        "tasks.a.after",
        "run_id",
        "id",
    ]
    assert cron.value.reason.startswith("spec.cron: ")
    commands = await read_to_end(kafka_settings, kafka_settings.topic(TopicKind.COMMANDS))
    assert commands == []


async def test_the_sync_client_schedules_waits_and_lists(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    children = _children(kafka_settings, tmp_path)

    def script() -> tuple[str, list[str], list[str]]:
        with SyncClient(kafka_settings) as client:
            at = _soon()
            client.create_schedule("sync-once", At(at), "test.noop")
            outcome = client.wait_for(_run_id("sync-once", at), timeout=120)
            seen: list[str] = []
            for result in client.results(schedule="sync-once", since=at - timedelta(minutes=1)):
                seen.append(result.status)
                break
            schedules = [s.id for s in client.list_schedules()]
            return str(outcome.status), seen, schedules

    try:
        status, seen, schedules = await asyncio.to_thread(script)
    finally:
        for child in children:
            child.stop()
    assert (status, seen, schedules) == ("succeeded", ["succeeded"], ["sync-once"])


async def _until(
    client: Client,
    schedule_id: str,
    holds: Callable[[Schedule | None], bool],
    timeout_s: float = 60,
) -> Schedule | None:
    """The schedule as the changelog has it once ``holds`` says so."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        found = await client.get_schedule(schedule_id)
        if holds(found):
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{schedule_id} never reached the state asked: {found}")
        await asyncio.sleep(0.3)


async def _present(client: Client, schedule_id: str, holds: Callable[[Schedule], bool]) -> Schedule:
    found = await _until(client, schedule_id, lambda s: s is not None and holds(s))
    assert found is not None
    return found
