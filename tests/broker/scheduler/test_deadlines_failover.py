"""Deadline alerts on the real broker, through a scheduler kill -9.

Fifty schedules fire every second for twenty seconds (1,000 runs), each promising to
start within 2 s and end within 4 s of its instant; two `kafkron worker` processes
run them (a short sleep). Two `kafkron scheduler` processes share the shards, and one
is killed with SIGKILL a few seconds in: the runs of its shards fire late once the
survivor has taken them over (the session timeout), so they start late too, and a
subset of the schedules (every fifth) sleeps 3 s, so those end late. Every run that
started (ended) late must have exactly one ``deadline_missed`` alert for that
deadline on ``{ns}.alerts``, and no run that started (ended) in time any: the
simulation's `deadlines` checker, on the records read back from the broker.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from simulation.checkers import deadlines
from simulation.checkers.evidence import of_topics
from tests.kit.scheduler import SchedulerProcesses, now_ms, produce, read_topic_evidence, upsert
from tests.kit.worker import WorkerProcess
from topics.alerts import AlertType
from topics.names import Settings
from topics.timefmt import format_ms

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SCHEDULES = 50
WINDOW_S = 20
SHARDS = 3


@pytest.mark.kafka_partitions(SHARDS)
@pytest.mark.timeout(600)
async def test_every_late_run_has_one_alert_and_no_punctual_run_any_through_a_kill(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    procs = SchedulerProcesses(kafka_settings, tmp_path, session_timeout_ms=6_000)
    procs.start(2)
    workers = [WorkerProcess(kafka_settings, tmp_path, f"w{i}", concurrency=16) for i in (1, 2)]
    try:
        await procs.wait_stable(SHARDS)
        first_ms = (now_ms() // 1000 + 3) * 1000
        ids = [f"deadline-{i:02d}" for i in range(SCHEDULES)]
        commands = [
            (
                sid.encode(),
                upsert(
                    sid,
                    job={"name": "test.sleep", "args": {"seconds": 3.0 if i % 5 == 0 else 0.1}},
                    spec={"every": "1s", "anchor": format_ms(first_ms)},
                    start=format_ms(first_ms),
                    end=format_ms(first_ms + (WINDOW_S - 1) * 1000),
                    deadline={"start_within_s": 2, "finish_within_s": 4},
                ),
            )
            for i, sid in enumerate(ids)
        ]
        await produce(kafka_settings, commands)
        await asyncio.sleep(max(0.0, (first_ms - now_ms()) / 1000 + 6))
        procs.signal(0, signal.SIGKILL)
        # The window, the takeover's late fires, their runs and every judgement by
        # silence (deadline + 5 s) have passed once the last run has had time to end.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            await asyncio.sleep(5)
            topics = await read_topic_evidence(kafka_settings, ignore_workers=())
            fired = {r.run_id for r in topics.runs if r.schedule_id in set(ids)}
            ended = set(topics.deadlines.ends) & fired
            if len(fired) >= SCHEDULES * WINDOW_S and ended == fired:
                break
        await asyncio.sleep(12)  # the last judgements by silence (grace 5 s) are written
    finally:
        codes = procs.stop_all()
        for worker in workers:
            worker.stop()
    topics = await read_topic_evidence(kafka_settings, ignore_workers=())
    evidence = of_topics(topics, end_ms=now_ms())
    verdict = deadlines.check(evidence)
    missed = [a for a, _ in topics.deadlines.alerts if a.type is AlertType.MISSED]
    alerted = {a.run_id for a in missed}
    runs = {r.run_id for r in topics.runs}
    late_starts = sum(1 for a in missed if a.deadline.value == "start")
    print(
        f"runs {len(runs)}, deadlines judged {verdict.checked}, deadline_missed {len(missed)} "
        f"({late_starts} start), runs with none {len(runs - alerted)}, codes {codes}"
    )
    assert len(runs) == SCHEDULES * WINDOW_S, procs.logs()
    assert verdict.checked == 2 * SCHEDULES * WINDOW_S
    assert verdict.ok, verdict.violations
    assert late_starts > 0, "the kill made no run start late: nothing was judged late"
    assert len(runs - alerted) > 0, "no punctual run: nothing was judged in time"
    assert codes[1] == 0, procs.logs()
