"""Priority lanes on a real broker (docs/DESIGN.md §8.4): a worker saturated by a herd of
20,000 low runs on {ns}.runs starts 100 high runs written to the default queue's high
lane within p99 <= 1 s of being due, and still starts low runs meanwhile (the
starvation bound); a schedule of priority 7 is routed to the lane by the scheduler.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiokafka import AIOKafkaProducer

from actors.sending import encode, send_commands
from actors.views.tail import read_to_end
from tests.kit.worker import SchedulerProcess, WorkerProcess, now_ms, results, wait_for_results
from topics.command_types import Job
from topics.messages import Result, idempotency_key, parse_run, run_id_for, run_value
from topics.names import Settings, TopicKind
from topics.queue_topics import check_with_queues, create_queue_topics
from topics.timefmt import format_ms

HERD = 20_000
HIGH = 100
CONCURRENCY = 8
LOW_JOB_S = 0.25  # long enough that the herd holds every slot for the whole test
HIGH_JOB_S = 0.05


def _run(schedule_id: str, due_ms: int, priority: int, seconds: float) -> tuple[bytes, bytes]:
    run_id = run_id_for(schedule_id, due_ms)
    value = run_value(
        run_id=run_id,
        schedule_id=schedule_id,
        task=None,
        scheduled_ms=due_ms,
        fired_ms=due_ms,
        attempt=1,
        job=Job("test.sleep", {"seconds": seconds}, priority=priority),
        idempotency_key=idempotency_key(run_id),
        deadline_ms=due_ms + 3_600_000,
    )
    return schedule_id.encode(), value


async def _produce(
    producer: AIOKafkaProducer, topic: str, records: list[tuple[bytes, bytes]]
) -> None:
    futures = [await producer.send(topic, value=v, key=k) for k, v in records]
    await asyncio.gather(*futures)


def _p99(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, (len(ordered) * 99 + 99) // 100 - 1)]


async def test_high_runs_start_within_a_second_through_a_saturating_herd(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    lane = settings.for_lane().topic(TopicKind.RUNS)
    assert await create_queue_topics(settings, ["default.hi"], 3) == [lane]
    assert await check_with_queues(settings, queues=["default.hi"]) == []
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all", linger_ms=5)
    await producer.start()
    herd_due = now_ms()
    herd = [_run(f"low-{i}", herd_due, i % 5, LOW_JOB_S) for i in range(HERD)]
    await _produce(producer, settings.topic(TopicKind.RUNS), herd)
    worker = WorkerProcess(
        settings, tmp_path, "w1", concurrency=CONCURRENCY, extra_args=("--lanes",)
    )
    try:
        # Saturated: the herd holds every slot (a low result at least per slot), and the
        # lane's group has its partitions (a first high run has run through it).
        await _produce(producer, lane, [_run("warm-high", now_ms(), 9, HIGH_JOB_S)])
        await wait_for_results(
            settings,
            lambda found: (
                len(found) >= 2 * CONCURRENCY and any(r.schedule_id == "warm-high" for r in found)
            ),
            timeout_s=90,
            workers=[worker],
        )
        high_due: dict[str, int] = {}
        for burst in range(HIGH // 10):  # a trickle: 10 every 0.3 s
            due = now_ms()
            batch = [_run(f"high-{burst}-{i}", due, 5 + i % 5, HIGH_JOB_S) for i in range(10)]
            high_due.update({f"high-{burst}-{i}": due for i in range(10)})
            await _produce(producer, lane, batch)
            await asyncio.sleep(0.3)

        def high_done(found: list[Result]) -> bool:
            return sum(1 for r in found if r.schedule_id.startswith("high-")) >= HIGH

        found = await wait_for_results(settings, high_done, timeout_s=120, workers=[worker])
    finally:
        worker.stop()
        await producer.stop()
    high = [r for r in found if r.schedule_id.startswith("high-")]
    assert len(high) == HIGH and all(r.status == "succeeded" for r in high)
    late = [int(r.started_ms or 0) - high_due[r.schedule_id] for r in high]
    print(f"high start lateness: p50 {sorted(late)[HIGH // 2]} ms, p99 {_p99(late)} ms")
    assert _p99(late) <= 1_000, sorted(late)[-10:]
    # The herd was still there (saturated to the end) and kept starting meanwhile.
    low = [r for r in found if r.schedule_id.startswith("low-")]
    first_due, last_start = min(high_due.values()), max(int(r.started_ms or 0) for r in high)
    assert len(low) < HERD
    assert any(first_due <= int(r.started_ms or 0) <= last_start for r in low)


async def test_the_scheduler_routes_a_priority_7_schedule_to_the_high_lane(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    lane = settings.for_lane().topic(TopicKind.RUNS)
    await create_queue_topics(settings, ["default.hi"], 3)
    children = [
        SchedulerProcess(settings, tmp_path),
        WorkerProcess(settings, tmp_path, "w1", extra_args=("--lanes",)),
    ]
    try:
        command = {
            "v": 1,
            "type": "schedule.upsert",
            "id": "urgent",
            "spec": {"at": format_ms(now_ms() + 2_000)},
            "job": {"name": "test.sleep", "args": {"seconds": 0.05}, "priority": 7},
        }
        await send_commands(settings, [encode(command, now_ms())])
        await wait_for_results(
            settings,
            lambda found: any(r.schedule_id == "urgent" for r in found),
            timeout_s=90,
            workers=children,
        )
    finally:
        for child in children:
            child.stop()
    on_lane = [parse_run(r.value) for r in await read_to_end(settings, lane) if r.value]
    assert [(r.schedule_id, r.job.priority) for r in on_lane] == [("urgent", 7)]
    on_runs = await read_to_end(settings, settings.topic(TopicKind.RUNS))
    assert on_runs == []
    (result,) = [r for r in await results(settings) if r.schedule_id == "urgent"]
    assert result.status == "succeeded" and result.worker == "w1"
