"""The simulation's topic checkers on records as a real broker's reader gets them.

The failover tests on the real broker judge exactly-once, nothing-missed and
never-early with `simulation.checkers.TOPIC_CHECKERS` over `from_topics` (see
tests/kit/scheduler.py: check_runs). These tests hand `from_topics` records built
the way the broker holds them and check each rule catches its violation, judged by
the broker's append time, not by what the scheduler wrote in the run.
"""

from __future__ import annotations

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from simulation.checkers import TOPIC_CHECKERS
from simulation.checkers.evidence import TopicRecord, from_topics, of_topics
from tests.kit.scheduler import check_runs, now_ms
from topics.command_types import Job
from topics.messages import idempotency_key, result_value, run_id_for, run_value
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms, parse_instant
from topics.vocabulary import RunStatus

T0 = parse_instant("2026-12-02T00:00:00Z")
SID = "every-second"
ACKER = "test-acker"


def _upsert(anchor_ms: int = T0) -> tuple[bytes, bytes, int]:
    command = {
        "v": 1,
        "type": "schedule.upsert",
        "id": SID,
        "spec": {"every": "1s", "anchor": format_ms(anchor_ms)},
        "job": {"name": "test.noop", "args": {}},
        "misfire": {"policy": "run_once", "grace_s": 300},
    }
    return SID.encode(), orjson.dumps(command), anchor_ms - 1_000


def _run(
    scheduled_ms: int, append_ms: int, offset: int, *, fired_ms: int | None = None
) -> TopicRecord:
    run_id = run_id_for(SID, scheduled_ms)
    value = run_value(
        run_id=run_id,
        schedule_id=SID,
        task=None,
        scheduled_ms=scheduled_ms,
        fired_ms=scheduled_ms if fired_ms is None else fired_ms,
        attempt=1,
        job=Job("test.noop", {}),
        idempotency_key=idempotency_key(run_id),
        deadline_ms=scheduled_ms + 60_000,
    )
    return TopicRecord(0, offset, append_ms, SID.encode(), value)


def _result(scheduled_ms: int, offset: int, worker: str) -> TopicRecord:
    value = result_value(
        run_id=run_id_for(SID, scheduled_ms),
        schedule_id=SID,
        task=None,
        attempt=1,
        status=RunStatus.SUCCEEDED,
        scheduled_ms=scheduled_ms,
        started_ms=scheduled_ms,
        finished_ms=scheduled_ms + 1,
        worker=worker,
        error=None,
    )
    return TopicRecord(0, offset, scheduled_ms + 5, SID.encode(), value)


def _changelog() -> list[TopicRecord]:
    first = orjson.dumps({"v": 2, "id": SID, "next": format_ms(T0)})
    return [TopicRecord(0, 0, T0 - 500, SID.encode(), first)]


def _judge(runs: list[TopicRecord], results: tuple[TopicRecord, ...] = ()) -> dict[str, list[str]]:
    topics = from_topics(
        runs=runs,
        results=results,
        dlq=[],
        schedules=_changelog(),
        commands=[_upsert()],
        ignore_workers=frozenset({ACKER}),
    )
    evidence = of_topics(topics, end_ms=T0 + 4_000)
    return {v.name: v.violations for v in (check(evidence) for check in TOPIC_CHECKERS)}


def _every_second(count: int = 5) -> list[TopicRecord]:
    return [_run(T0 + i * 1_000, T0 + i * 1_000 + 20, i) for i in range(count)]


def test_a_clean_log_holds_every_rule() -> None:
    verdicts = _judge(_every_second())
    assert verdicts == {
        "exactly-once": [],
        "nothing-missed": [],
        "never-early": [],
        "deadlines": [],
    }


def test_early_is_judged_by_the_brokers_append_time_not_by_the_run_s_fired_at() -> None:
    runs = _every_second()
    # The run says it fired on time; the broker appended it 3 s before it was due.
    runs[3] = _run(T0 + 3_000, T0, 3, fired_ms=T0 + 3_000)
    verdicts = _judge(runs)
    assert len(verdicts["never-early"]) == 1 and "every-second@" in verdicts["never-early"][0]


def test_an_occurrence_neither_fired_nor_reported_is_a_gap() -> None:
    runs = _every_second()
    del runs[2]
    (gap,) = _judge(runs)["nothing-missed"]
    assert run_id_for(SID, T0 + 2_000) in gap


def test_a_run_appended_twice_breaks_exactly_once() -> None:
    runs = [*_every_second(), _run(T0 + 1_000, T0 + 1_500, 9)]
    (twice,) = _judge(runs)["exactly-once"]
    assert "emitted twice" in twice


def test_the_stand_in_worker_s_double_answers_are_left_out_but_a_real_worker_s_count() -> None:
    acked_twice = (_result(T0, 0, ACKER), _result(T0, 1, ACKER))
    assert _judge(_every_second(), acked_twice)["exactly-once"] == []
    answered_twice = (_result(T0, 0, "w1"), _result(T0, 1, "w2"))
    (two,) = _judge(_every_second(), answered_twice)["exactly-once"]
    assert "two results" in two


@pytest.mark.broker
async def test_check_runs_on_the_real_broker_judges_early_by_log_append_time(
    kafka_settings: Settings,
) -> None:
    """Runs that claim to fire on time but reach the broker a minute early are early:
    `check_runs` reads the runs topic's LogAppendTime, not the run's ``fired_at``."""
    due_ms = now_ms() + 60_000
    key, command, _ = _upsert()
    command = orjson.dumps(
        {**orjson.loads(command), "spec": {"every": "1s", "anchor": format_ms(due_ms)}}
    )
    changelog = orjson.dumps({"v": 2, "id": SID, "next": format_ms(due_ms)})
    records = [(TopicKind.COMMANDS, command), (TopicKind.SCHEDULES, changelog)]
    records += [(TopicKind.RUNS, _run(due_ms + i * 1_000, 0, i).value) for i in range(3)]
    producer = AIOKafkaProducer(bootstrap_servers=kafka_settings.bootstrap, acks="all")
    await producer.start()
    try:
        for kind, value in records:  # one partition each: the key's
            await (await producer.send(kafka_settings.topic(kind), key=key, value=value))
    finally:
        await producer.stop()
    report = await check_runs(kafka_settings, [SID], window_end_ms=due_ms + 2_000)
    assert len(report.early) == 3, report.summary()
    assert report.gaps == [] and report.duplicates == [], report.summary()
    assert report.occurrences_checked == 3
