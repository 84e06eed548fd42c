"""Completed ``--reprocess all`` passes on the real broker (docs/DESIGN.md §6.9).

A schedule runs its six occurrences (``max_runs``) and the recorder records them. A
first ``all`` backfill re-runs every one of them with the scheduler killed
(``kill -9``) in the middle; a second ``all`` backfill runs them all again. Each
pass gives each instant exactly one more attempt, the next one, under the instant's
one run id: the runs topic shows one record per instant and pass, and the jobs' own
start marks (`tests.jobs.backfill`) show each of those attempts started once, never
more than ``--max-parallel`` at a time.
"""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.kit.backfill import (
    backfill_doc,
    cli,
    dry_run,
    outcomes_of,
    peak_in_flight,
    runs_of,
    timed_marks,
    wait_for,
)
from tests.kit.scheduler import produce
from tests.kit.worker import ChildProcess, SchedulerProcess, WorkerProcess
from topics.messages import run_id_for
from topics.names import Settings
from topics.timefmt import format_ms, parse_instant

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SCHEDULE = "nightly"
OCCURRENCES = 6
JOB_S = 1.0  # long enough that a kill lands while the first pass has some left


@pytest.mark.kafka_partitions(1)
async def test_each_all_pass_reruns_every_instant_once_across_a_kill_9(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    db = str(tmp_path / "h.db")
    log = tmp_path / "times.log"
    worker = WorkerProcess(settings, tmp_path, "w1", jobs="tests.jobs.backfill", concurrency=8)
    recorder = ChildProcess(settings, tmp_path, "recorder", ["recorder", "--db", db])
    scheduler = SchedulerProcess(settings, tmp_path, "s1")
    procs: list[ChildProcess] = [worker, recorder, scheduler]
    try:
        command = {
            "v": 1,
            "type": "schedule.upsert",
            "id": SCHEDULE,
            "spec": {"every": "1s"},
            "job": {"name": "test.timed", "args": {"log": str(log), "seconds": JOB_S}},
            "overlap": "allow",
            "max_runs": OCCURRENCES,
            "timeout_s": 60,
        }
        await produce(settings, [(SCHEDULE.encode(), orjson.dumps(command))])

        async def live_done() -> Any:
            runs = await runs_of(settings)
            ended = {(r.run_id, r.attempt) for r in await outcomes_of(settings)}
            live = [r for r in runs if r.attempt == 1]
            if len(live) < OCCURRENCES or not {(r.run_id, 1) for r in live} <= ended:
                return None
            return live

        live = await wait_for("the live runs", live_done, 120, *procs)
        instants = sorted(r.scheduled_ms for r in live)
        assert len(instants) == OCCURRENCES
        window = ["--from", format_ms(instants[0]), "--to", format_ms(instants[-1] + 1)]
        window += ["--db", db]
        run_ids = {at: run_id_for(SCHEDULE, at) for at in instants}

        async def planned_at(attempt: int) -> Any:
            """The ``all`` plan once the recorder holds every attempt so far as ended."""
            lines = dry_run(settings, SCHEDULE, *window, "--reprocess", "all")
            if lines is None:
                return None
            steps = lines[:-1]
            fires = {(parse_instant(s["scheduled_at"]), s["action"], s["attempt"]) for s in steps}
            return steps if fires == {(at, "rerun", attempt) for at in instants} else None

        async def one_pass(
            name: str, attempt: int, max_parallel: int, *, kill_midway: bool
        ) -> dict[str, Any]:
            nonlocal scheduler, procs
            await wait_for(
                f"{name}'s plan: every instant at attempt {attempt}",
                lambda: planned_at(attempt),
                120,
                *procs,
            )
            before = {(r.run_id, r.attempt) for r in await runs_of(settings)}
            code, out, err = cli(
                settings,
                "backfill",
                SCHEDULE,
                *window,
                "--reprocess",
                "all",
                "--max-parallel",
                str(max_parallel),
                "--backfill-id",
                name,
            )
            assert code == 0, err
            assert f"backfill {name} of {SCHEDULE}" in out
            if kill_midway:

                async def first_started() -> Any:
                    return any(m.attempt == attempt for m in timed_marks(log)) or None

                await wait_for(f"{name} under way", first_started, 120, *procs)
                scheduler.signal(signal.SIGKILL)
                scheduler.stop()
                # Nothing fires now until the next owner: what the dead one had fired.
                fired_then = [
                    r for r in await runs_of(settings) if (r.run_id, r.attempt) not in before
                ]
                assert 0 < len(fired_then) < OCCURRENCES, "the kill must land mid-pass"
                scheduler = SchedulerProcess(settings, tmp_path, f"s-after-{name}")
                procs = [worker, recorder, scheduler]

            async def ended() -> Any:
                doc = await backfill_doc(settings, SCHEDULE)
                return doc if doc is not None and doc["id"] == name and "ended" in doc else None

            doc: dict[str, Any] = await wait_for(f"{name} ended", ended, 240, *procs)
            assert "cancelled" not in doc and doc["fired"] == OCCURRENCES
            assert doc.get("passed", 0) == 0

            runs = await runs_of(settings)
            fresh = [r for r in runs if (r.run_id, r.attempt) not in before]
            # One record per instant, at the pass's attempt, under the instant's run id.
            assert sorted((r.scheduled_ms, r.run_id, r.attempt) for r in fresh) == [
                (at, run_ids[at], attempt) for at in instants
            ]
            keys = {(r.run_id, r.attempt) for r in fresh}

            async def results_in() -> Any:
                done = {(r.run_id, r.attempt): r.status for r in await outcomes_of(settings)}
                return {k: done[k] for k in keys} if keys <= set(done) else None

            statuses = await wait_for(f"{name}'s results", results_in, 120, *procs)
            assert set(statuses.values()) == {"succeeded"}
            marks = timed_marks(log)
            starts = Counter(m.key for m in marks if m.event == "start" and m.key in keys)
            assert starts == dict.fromkeys(keys, 1), "each attempt started exactly once"
            assert 1 <= peak_in_flight(marks, keys) <= max_parallel
            return doc

        await one_pass("pass-1", 2, 2, kill_midway=True)
        await one_pass("pass-2", 3, 4, kill_midway=False)

        # Over everything: one run id per instant, one record per (run id, attempt).
        runs = await runs_of(settings)
        pairs = Counter((r.run_id, r.attempt) for r in runs)
        assert set(pairs.values()) == {1}, "a (run_id, attempt) was written twice"
        assert {r.run_id for r in runs} == set(run_ids.values())
        assert sorted(pairs) == sorted((rid, n) for rid in run_ids.values() for n in (1, 2, 3))
        code, out, err = cli(settings, "backfill", "status", SCHEDULE, "--json", "--db", db)
        assert code == 0, err
        [row] = orjson.loads(out)
        assert (row["backfill_id"], row["status"], row["done"], row["left"]) == (
            "pass-2",
            "ended",
            OCCURRENCES,
            0,
        )
    finally:
        for proc in procs:
            proc.stop()
