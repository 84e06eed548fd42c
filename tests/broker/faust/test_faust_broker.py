"""The Faust example's agents, in-process, on a namespace where a job dead-letters.

A scheduler and a worker run for real; the job fails while its upstream is down.
Checked: one alert per dead letter, none repeated after the app restarts; the
failure table counts exactly the failures the results topic holds; the replay
agent's ``dlq.replay`` makes both runs succeed once the upstream is back; records
of an aborted transaction reach no agent (while a read_uncommitted reader does
see them, so that part of the test is not vacuous).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from actors.examples.faust_alerts import FAILURE_STATUSES, WINDOW_S, AlertsApp, build
from actors.faust.records import DeadLetterRecord
from actors.sending import encode, send_commands
from actors.views.tail import read_to_end
from tests.kit.worker import ChildProcess, SchedulerProcess, WorkerProcess, now_ms, wait_for_results
from topics.admin import admin_client
from topics.command_types import Job
from topics.messages import dlq_value, parse_result, result_value, run_id_for
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms

JOB = "test.call_upstream"
SCHEDULES = ("pay-a", "pay-b")
GHOST = "ghost"  # written only in an aborted transaction
MAX_ATTEMPTS = 2
PARTITIONS = 3  # the kafka_settings fixture's shard count


async def _schedule_once(settings: Settings, schedule_id: str) -> None:
    command = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": {"at": format_ms(now_ms() + 1_000)},
        "job": {"name": JOB, "args": {}},
        "retry": {"max_attempts": MAX_ATTEMPTS, "initial_s": 1, "jitter": "none"},
    }
    await send_commands(settings, [encode(command, now_ms())])


async def _abort_ghost_records(settings: Settings) -> None:
    """A failed result and a dead letter of GHOST, in a transaction that is aborted."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap, transactional_id=f"{settings.namespace}-ghost"
    )
    await producer.start()
    try:
        run_id = run_id_for(GHOST, now_ms())
        await producer.begin_transaction()
        await producer.send_and_wait(
            settings.topic(TopicKind.RESULTS),
            key=GHOST.encode(),
            value=result_value(
                run_id=run_id,
                schedule_id=GHOST,
                task=None,
                attempt=1,
                status="failed",
                scheduled_ms=now_ms(),
                started_ms=now_ms(),
                finished_ms=now_ms(),
                worker="ghost",
                error={"type": "Ghost", "message": "aborted"},
            ),
        )
        await producer.send_and_wait(
            settings.topic(TopicKind.DLQ),
            key=GHOST.encode(),
            value=dlq_value(
                run_id=run_id,
                schedule_id=GHOST,
                task=None,
                job=Job(JOB, {}),
                last_error={"type": "Ghost", "message": "aborted"},
                attempts=[{"attempt": 1, "status": "failed"}],
                dead_at_ms=now_ms(),
            ),
        )
        await producer.abort_transaction()
    finally:
        await producer.stop()


async def _uncommitted_keys(settings: Settings, kind: TopicKind) -> list[bytes | None]:
    """Keys of every record of the topic as a read_uncommitted reader sees them."""
    topic = settings.topic(kind)
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=settings.bootstrap,
        isolation_level="read_uncommitted",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        keys: list[bytes | None] = []
        while True:
            batch = await consumer.getmany(timeout_ms=1_000)
            if not batch:
                return keys
            keys += [record.key for records in batch.values() for record in records]
    finally:
        await consumer.stop()


async def _until(what: str, check: Callable[[], Awaitable[bool]], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.3)


async def _rewind(settings: Settings, group_id: str, kind: TopicKind, partitions: int) -> None:
    """Set the group's committed offsets of the topic back to 0 (the group is empty)."""
    topic = settings.topic(kind)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap, group_id=group_id, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.commit({tp: 0 for tp in tps})
    finally:
        await consumer.stop()


async def _expected_failures(settings: Settings) -> dict[tuple[str, int], int]:
    """Failed attempts per (schedule, hour window start in s), read from the results topic."""
    counts: Counter[tuple[str, int]] = Counter()
    for record in await read_to_end(settings, settings.topic(TopicKind.RESULTS)):
        assert record.value is not None
        result = parse_result(record.value)
        if result.status in FAILURE_STATUSES:
            window_s = record.timestamp_ms // 1000 // WINDOW_S * WINDOW_S
            counts[(result.schedule_id, window_s)] += 1
    return dict(counts)


async def _delete_app_topics(settings: Settings, app_id: str) -> None:
    async with admin_client(settings) as admin:
        names = [name for name in await admin.list_topics() if name.startswith(app_id)]
        if names:
            await admin.delete_topics(names)


async def test_alerts_counts_and_replay_through_faust_agents(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    upstream = tmp_path / "upstream-up"
    alerts: list[str] = []

    async def alert(letter: DeadLetterRecord) -> None:
        alerts.append(letter.letter_id)

    async def healthy() -> bool:
        return upstream.exists()

    app_id = f"{settings.namespace}-alerts"

    def new_app() -> AlertsApp:
        return build(
            settings,
            partitions=PARTITIONS,
            app_id=app_id,
            alert=alert,
            replay_job=JOB,
            healthy=healthy,
            health_poll_s=0.2,
            data_dir=tmp_path / "faust",
            web_enabled=False,
        )

    await _abort_ghost_records(settings)
    assert GHOST.encode() in await _uncommitted_keys(settings, TopicKind.DLQ)
    assert GHOST.encode() in await _uncommitted_keys(settings, TopicKind.RESULTS)

    env = {"KAFKRON_TEST_UPSTREAM": str(upstream)}
    children: list[ChildProcess] = [
        SchedulerProcess(settings, tmp_path),
        WorkerProcess(settings, tmp_path, "w1", jobs="tests.jobs.faust", env=env),
    ]
    first: AlertsApp | None = None
    second: AlertsApp | None = None
    try:
        for schedule_id in SCHEDULES:
            await _schedule_once(settings, schedule_id)

        first = new_app()
        await first.app.start()

        async def both_alerted() -> bool:
            for child in children:
                child.check_alive()
            return len(alerts) >= len(SCHEDULES)

        await _until("an alert per dead letter", both_alerted)
        # The replay agent now waits for the upstream, holding its letter unacknowledged.
        await first.app.stop()
        seen_by_first = list(first.letters_seen)
        # A crash between alerting and committing (Faust commits every few seconds):
        # the group's dlq offsets go back to the start, so the next app reads every
        # letter again and must not alert twice.
        await _rewind(settings, app_id, TopicKind.DLQ, PARTITIONS)

        second = new_app()
        await second.app.start()
        upstream.touch()
        found = await wait_for_results(
            settings,
            lambda rs: all(
                any(r.schedule_id == s and r.status == "succeeded" for r in rs) for s in SCHEDULES
            ),
            workers=children,
            timeout_s=60,
        )
        expected = await _expected_failures(settings)
        app = second

        async def table_matches() -> bool:
            return app.failure_counts() == expected

        await _until(f"failure table {expected}", table_matches, timeout_s=30)
        seen_by_second = list(second.letters_seen)
        replays = list(second.replays_sent) + list(first.replays_sent)
    finally:
        for faust_app in (first, second):
            if faust_app is not None and faust_app.app.started:
                await faust_app.app.stop()
        for child in children:
            child.stop()
        await _delete_app_topics(settings, app_id)

    by_schedule = {
        s: sorted((r.attempt, r.status) for r in found if r.schedule_id == s) for s in SCHEDULES
    }
    assert by_schedule == {
        s: [(1, "failed"), (2, "failed"), (3, "succeeded")] for s in SCHEDULES
    }, by_schedule
    letters = {f"{run_id}#{MAX_ATTEMPTS}" for run_id in {r.run_id for r in found}}
    assert sorted(alerts) == sorted(letters)  # once each, across the restart
    assert sorted(replays) == sorted(letters)  # each replayed once
    assert sum(expected.values()) == len(SCHEDULES) * MAX_ATTEMPTS
    assert {job for job, _ in expected} == set(SCHEDULES)
    # The restart was a real test of "once": the second app read every letter again.
    assert sorted(seen_by_first) == sorted(letters)
    assert sorted(seen_by_second) == sorted(letters)
    assert not any(GHOST in letter for letter in seen_by_first + seen_by_second + alerts)
