"""`kafkron backfill` on the real broker (docs/DESIGN.md §6.9).

A schedule runs, loses its scheduler for longer than its misfire grace (a planted
outage: its occurrences are reported missed), runs again; the recorder records it
all. A ``missing`` backfill over the whole range then runs exactly the missed
occurrences, each once at attempt 2, with the scheduler killed (``kill -9``) in the
middle, never more than ``--max-parallel 4`` at once by the jobs' own start and end
marks. Completed ``all`` passes are `test_backfill_all_broker.py`, a cancel judged
by the jobs' start instants `test_backfill_cancel_broker.py`, a dry run against a
brute-force walk of the rule over DST days `test_backfill_dst_broker.py`.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import orjson
import pytest

from tests.kit.backfill import (
    backfill_doc,
    cli,
    max_in_flight,
    outcomes_of,
    runs_of,
    wait_for,
)
from tests.kit.scheduler import produce
from tests.kit.worker import ChildProcess, SchedulerProcess, WorkerProcess, marks, now_ms
from topics.messages import parse_run_id
from topics.names import Settings
from topics.timefmt import format_ms

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SCHEDULE = "bf"
EVERY_MS = 2000


@pytest.mark.kafka_partitions(1)
async def test_a_missing_backfill_runs_exactly_the_missed_across_a_kill_9(
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
            runs = [r for r in await runs_of(settings) if r.attempt == 1]
            return runs if len(runs) >= count else None

        first = await wait_for("the first live runs", lambda: live_runs(4), 120, *procs)
        from_ms = min(r.scheduled_ms for r in first)  # type: ignore[attr-defined]
        # The planted outage: no scheduler for about 20 s (its session is 6 s).
        scheduler.signal(signal.SIGKILL)
        scheduler.stop()
        await asyncio.sleep(20)
        scheduler = SchedulerProcess(settings, tmp_path, "s2")
        procs = [worker, recorder, scheduler]

        async def missed_reported() -> object:
            missed = [r for r in await outcomes_of(settings) if r.status == "missed"]  # type: ignore[attr-defined]
            return missed or None

        await wait_for("the outage's missed results", missed_reported, 120, *procs)
        back_ms = now_ms()
        await wait_for(
            "live runs after the outage",
            lambda: _after(settings, back_ms + 3 * EVERY_MS),
            120,
            *procs,
        )
        to_ms = now_ms()

        # Brute force: what the topics say was missed in [from, to) (the shard reports
        # each of these few individually: no folded range).
        missed_instants: set[int] = set()
        for result in await outcomes_of(settings):
            if result.status in ("missed", "skipped"):  # type: ignore[attr-defined]
                _, at, _ = parse_run_id(result.run_id)  # type: ignore[attr-defined]
                assert result.covers is None  # type: ignore[attr-defined]
                if from_ms <= at < to_ms:
                    missed_instants.add(at)
        assert missed_instants

        base = ["backfill", SCHEDULE, "--from", format_ms(from_ms), "--to", format_ms(to_ms)]

        async def recorder_caught_up() -> object:
            code, out, _err = cli(settings, *base, "--db", env_db, "--dry-run", "--json")
            if code != 0:
                return None
            lines = [orjson.loads(line) for line in out.splitlines()]
            totals = lines[-1]
            steps = lines[:-1]
            busy = totals["totals"]["unknown"] or any(
                s["reason"].startswith("running") for s in steps
            )
            return None if busy else steps

        steps = await wait_for("the recorder caught up", recorder_caught_up, 120, *procs)
        planned = {
            (s["scheduled_at"], s["attempt"])  # type: ignore[index]
            for s in steps  # type: ignore[attr-defined]
            if s["action"] in ("run", "rerun")  # type: ignore[index]
        }
        assert planned == {(format_ms(at), 2) for at in missed_instants}

        runs_before = {(r.run_id, r.attempt) for r in await runs_of(settings)}
        code, out, err = cli(
            settings, *base, "--db", env_db, "--max-parallel", "4", "--backfill-id", "b1"
        )
        assert code == 0, err
        assert "backfill b1 of bf" in out

        async def backfill_started(count: int) -> object:
            fresh = [r for r in await runs_of(settings) if (r.run_id, r.attempt) not in runs_before]
            return [r for r in fresh if r.scheduled_ms < to_ms][:count] or None

        await wait_for("the backfill under way", lambda: backfill_started(1), 120, *procs)
        scheduler.signal(signal.SIGKILL)  # mid-backfill
        scheduler.stop()
        scheduler = SchedulerProcess(settings, tmp_path, "s3")
        procs = [worker, recorder, scheduler]

        async def ended() -> object:
            doc = await backfill_doc(settings, SCHEDULE)
            return doc if doc is not None and "ended" in doc else None

        doc = await wait_for("the backfill ended", ended, 240, *procs)
        assert doc["fired"] == len(missed_instants)  # type: ignore[index]

        runs = await runs_of(settings)
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
                for r in await outcomes_of(settings)
            }
            return keys <= done or None

        await wait_for("the backfill's results", all_ended, 120, *procs)
        lines = marks(tmp_path)
        assert {(run_id, attempt) for e, run_id, attempt, _ in lines if e == "start"} >= keys
        assert 1 <= max_in_flight(lines, keys) <= 4

    finally:
        for proc in procs:
            proc.stop()


async def _after(settings: Settings, at_ms: int) -> object:
    runs = [r for r in await runs_of(settings) if r.attempt == 1 and r.scheduled_ms >= at_ms]
    return runs or None
