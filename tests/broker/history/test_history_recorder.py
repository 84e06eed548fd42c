"""The recorder against the real broker: read_committed, redelivery, rebuild."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from aiokafka import AIOKafkaProducer

from actors.history.recorder import caught_up, run_recorder
from actors.history.store import DEAD_LETTERED, HistoryError, HistoryStore, RunView
from topics import messages
from topics.command_types import Job
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms

T0 = 1_790_000_000_000
JOB = Job(name="billing.fx_rates", args={})
FAIL = Job(name="billing.always_fails", args={})


def run_record(schedule_id: str, job: Job, attempt: int, fired_ms: int) -> bytes:
    run_id = messages.run_id_for(schedule_id, T0)
    return messages.run_value(
        run_id=run_id,
        schedule_id=schedule_id,
        task=None,
        scheduled_ms=T0,
        fired_ms=fired_ms,
        attempt=attempt,
        job=job,
        idempotency_key=messages.idempotency_key(run_id),
        deadline_ms=fired_ms + 3_600_000,
    )


def result_record(schedule_id: str, attempt: int, status: str, started_ms: int) -> bytes:
    return messages.result_value(
        run_id=messages.run_id_for(schedule_id, T0),
        schedule_id=schedule_id,
        task=None,
        attempt=attempt,
        status=status,
        scheduled_ms=T0,
        started_ms=started_ms,
        finished_ms=started_ms + 250,
        worker="worker-a",
        error=None
        if status == "succeeded"
        else {"type": "RuntimeError", "message": "card declined"},
    )


def history_records(settings: Settings) -> list[tuple[str, bytes, bytes]]:
    runs, results = settings.topic(TopicKind.RUNS), settings.topic(TopicKind.RESULTS)
    return [
        (runs, b"fx", run_record("fx", JOB, 1, T0 + 12)),
        (results, b"fx", result_record("fx", 1, "succeeded", T0 + 20)),
        (runs, b"pay", run_record("pay", FAIL, 1, T0 + 3)),
        (results, b"pay", result_record("pay", 1, "failed", T0 + 5)),
        (runs, b"pay", run_record("pay", FAIL, 2, T0 + 1_000)),
        (results, b"pay", result_record("pay", 2, "failed", T0 + 1_001)),
        (
            settings.topic(TopicKind.DLQ),
            b"pay",
            messages.dlq_value(
                run_id=messages.run_id_for("pay", T0),
                schedule_id="pay",
                task=None,
                job=FAIL,
                last_error={"type": "RuntimeError", "message": "card declined"},
                attempts=[{"attempt": 1}, {"attempt": 2}],
                dead_at_ms=T0 + 1_300,
            ),
        ),
        (
            settings.topic(TopicKind.REJECTED),
            b"bad",
            messages.rejected_value(
                reason="spec.cron: 'every day' is not a cron expression",
                original=b'{"v":1}',
                topic=settings.topic(TopicKind.COMMANDS),
                partition=0,
                offset=7,
            ),
        ),
    ]


async def produce(settings: Settings, records: list[tuple[str, bytes, bytes]], txn: str) -> None:
    """Write ``records`` in one committed transaction, then one aborted transaction."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, transactional_id=txn)
    await producer.start()
    try:
        async with producer.transaction():
            for topic, key, value in records:
                await producer.send(topic, key=key, value=value)
        # A fenced shard's aborted write: read_committed must never show it.
        await producer.begin_transaction()
        await producer.send(
            settings.topic(TopicKind.RUNS), key=b"ghost", value=run_record("ghost", JOB, 1, T0)
        )
        await producer.abort_transaction()
    finally:
        await producer.stop()


async def record_until_caught_up(settings: Settings, db: Path, *, rebuild: bool = False) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(run_recorder(settings, db, stop, rebuild=rebuild))
    reader = await HistoryStore.open(db, readonly=True) if db.exists() else None
    try:
        for _ in range(600):
            await asyncio.sleep(0.1)
            if task.done():
                task.result()  # raises what killed it
            if reader is None and db.exists():
                try:
                    reader = await HistoryStore.open(db, readonly=True)
                except HistoryError:
                    continue  # the recorder has created the file, not its tables yet
            if reader is not None and await caught_up(settings, reader):
                break
        else:
            raise AssertionError("the recorder did not catch up with the topics")
    finally:
        if reader is not None:
            await reader.close()
        stop.set()
        await task


async def answers(db: Path) -> tuple[list[RunView], dict[str, int], list[tuple[str, int]]]:
    async with await HistoryStore.open(db, readonly=True) as store:
        latest = await store.latest_per_schedule()
        counts = await store.status_counts()
        rejected = [(r.reason, r.original_offset or 0) for r in await store.rejections()]
        return latest, counts, rejected


def check(latest: list[RunView], counts: dict[str, int], rejected: list[tuple[str, int]]) -> None:
    assert [(v.schedule_id, v.status, v.attempts) for v in latest] == [
        ("pay", DEAD_LETTERED, 2),
        ("fx", "succeeded", 1),
    ]
    pay, fx = latest
    assert pay.run_id == f"pay@{format_ms(T0)}"
    assert pay.error_message == "card declined"
    assert fx.lateness_ms == 12 and fx.duration_ms == 250 and fx.worker == "worker-a"
    assert fx.job_name == "billing.fx_rates"
    assert counts == {"succeeded": 1, DEAD_LETTERED: 1, "retried": 1}
    assert rejected == [("spec.cron: 'every day' is not a cron expression", 7)]


async def test_recorder_answers_after_redelivery_and_rebuild(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    db = tmp_path / "history.db"
    records = history_records(kafka_settings)
    await produce(kafka_settings, records, f"{kafka_settings.namespace}-test-a")
    await record_until_caught_up(kafka_settings, db)
    first = await answers(db)
    check(*first)

    # Redelivery 1: the same records again on the topics (a producer retry).
    await produce(kafka_settings, records, f"{kafka_settings.namespace}-test-b")
    # Redelivery 2: the recorder lost its positions (crash before its commit) and
    # re-reads every partition from the start.
    with sqlite3.connect(db) as raw:
        raw.execute("DELETE FROM offsets")
    await record_until_caught_up(kafka_settings, db)
    assert await answers(db) == first

    # Rebuild in place, and into a brand-new database: the same answers.
    await record_until_caught_up(kafka_settings, db, rebuild=True)
    assert await answers(db) == first
    fresh = tmp_path / "rebuilt.db"
    await record_until_caught_up(kafka_settings, fresh)
    assert await answers(fresh) == first


async def test_recorder_resumes_where_its_database_stopped(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    db = tmp_path / "history.db"
    records = history_records(kafka_settings)
    await produce(kafka_settings, records[:2], f"{kafka_settings.namespace}-test-a")
    await record_until_caught_up(kafka_settings, db)
    latest, _, _ = await answers(db)
    assert [(v.schedule_id, v.status) for v in latest] == [("fx", "succeeded")]

    await produce(kafka_settings, records[2:], f"{kafka_settings.namespace}-test-b")
    await record_until_caught_up(kafka_settings, db)
    check(*await answers(db))
