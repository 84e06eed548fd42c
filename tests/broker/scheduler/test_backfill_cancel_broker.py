"""A cancelled backfill starts nothing after the cancel, judged by the jobs' own start
instants (docs/DESIGN.md §6.9), on the real broker.

A schedule runs its six occurrences (``max_runs``); then ``--reprocess all``
backfills of them run with ``--max-parallel 2``, their jobs held by a gate file
(`tests.jobs.backfill`: ``test.timed`` writes when it starts and ends). Once both
runs in flight have started, the backfill is cancelled:

- without ``--running``: the two run to their end once the gate opens, and no other
  job of the backfill starts, although the backfill then has room and four instants
  it had planned;
- with ``--running``: the two are stopped (their results ``cancelled``), and again
  nothing else starts.

"After the cancel" is the test's clock just before it sends the cancel, the same
machine's wall clock the jobs stamp their starts with.
"""

from __future__ import annotations

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
    runs_of,
    timed_marks,
    wait_for,
)
from tests.kit.scheduler import produce
from tests.kit.worker import ChildProcess, SchedulerProcess, WorkerProcess, now_ms
from topics.messages import run_id_for
from topics.names import Settings
from topics.timefmt import format_ms, parse_instant

pytestmark = pytest.mark.broker

SCHEDULE = "hourly"
OCCURRENCES = 6
MAX_PARALLEL = 2


@pytest.mark.kafka_partitions(1)
async def test_a_cancelled_backfill_starts_no_job_after_the_cancel(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    db = str(tmp_path / "h.db")
    log = tmp_path / "times.log"
    gate = tmp_path / "gate"
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
            "job": {"name": "test.timed", "args": {"log": str(log), "gate": str(gate)}},
            "overlap": "allow",
            "max_runs": OCCURRENCES,
            "timeout_s": 120,
        }
        await produce(settings, [(SCHEDULE.encode(), orjson.dumps(command))])

        async def live_done() -> Any:
            live = [r for r in await runs_of(settings) if r.attempt == 1]
            ended = {(r.run_id, r.attempt) for r in await outcomes_of(settings)}
            if len(live) < OCCURRENCES or not {(r.run_id, 1) for r in live} <= ended:
                return None
            return live

        live = await wait_for("the live runs", live_done, 120, *procs)
        instants = sorted(r.scheduled_ms for r in live)
        window = ["--from", format_ms(instants[0]), "--to", format_ms(instants[-1] + 1)]
        window += ["--db", db]
        attempts = dict.fromkeys(instants, 1)  # each instant's latest attempt so far

        async def cancelled_midway(name: str, *, running: bool) -> None:
            async def planned() -> Any:
                lines = dry_run(settings, SCHEDULE, *window, "--reprocess", "all")
                if lines is None:
                    return None
                got = {
                    (parse_instant(s["scheduled_at"]), s["action"], s["attempt"])
                    for s in lines[:-1]
                }
                want = {(at, "rerun", n + 1) for at, n in attempts.items()}
                return got == want or None

            await wait_for(f"{name}'s plan (the recorder caught up)", planned, 120, *procs)
            keys = {(run_id_for(SCHEDULE, at), n + 1) for at, n in attempts.items()}
            before = {(r.run_id, r.attempt) for r in await runs_of(settings)}
            gate.touch()
            code, out, err = cli(
                settings,
                "backfill",
                SCHEDULE,
                *window,
                "--reprocess",
                "all",
                "--max-parallel",
                str(MAX_PARALLEL),
                "--backfill-id",
                name,
            )
            assert code == 0, err

            async def both_started() -> Any:
                started = {m.key for m in timed_marks(log) if m.event == "start" and m.key in keys}
                assert len(started) <= MAX_PARALLEL, f"{started} started at once"
                return started if len(started) == MAX_PARALLEL else None

            started = await wait_for(f"{name}'s first runs started", both_started, 120, *procs)
            cancel_ms = now_ms()
            argv = ["backfill", "cancel", name, "--reason", f"stop {name}"]
            code, out, err = cli(settings, *argv, *(["--running"] if running else []))
            assert code == 0, err

            async def recorded() -> Any:
                doc = await backfill_doc(settings, SCHEDULE)
                if doc is None or doc["id"] != name:
                    return None
                return doc if doc.get("cancelled") == f"stop {name}" else None

            doc = await wait_for(f"{name}'s cancel applied", recorded, 120, *procs)
            assert "ranges" not in doc, "nothing is left to fire after a cancel"
            if not running:
                gate.unlink()  # the two in flight go on to their end

            async def ended() -> Any:
                doc = await backfill_doc(settings, SCHEDULE)
                return doc if doc is not None and doc["id"] == name and "ended" in doc else None

            doc = await wait_for(f"{name} ended", ended, 120, *procs)
            fresh = {(r.run_id, r.attempt) for r in await runs_of(settings)} - before

            async def results_in() -> Any:
                done = {(r.run_id, r.attempt): r.status for r in await outcomes_of(settings)}
                return {k: done[k] for k in fresh} if fresh <= set(done) else None

            # Every run the backfill fired has ended, so every job of it that started
            # has written its start. The jobs' own word first: each attempt of the
            # backfill that ever started began before the cancel was sent.
            statuses = await wait_for(f"{name}'s results", results_in, 120, *procs)
            marks = [m for m in timed_marks(log) if m.key in keys]
            starts = [m for m in marks if m.event == "start"]
            late = [m for m in starts if m.at_ms >= cancel_ms]
            assert not late, f"started after the cancel ({cancel_ms}): {late}"
            assert Counter(m.key for m in starts) == dict.fromkeys(started, 1)
            # ... and ended as the cancel says: run to their end, or stopped.
            last = {m.key: m.event for m in marks}
            assert last == dict.fromkeys(started, "stopped" if running else "end")
            assert set(statuses.values()) == {"cancelled" if running else "succeeded"}
            assert fresh == started, "the run records of the backfill are the two started"
            assert doc["fired"] == MAX_PARALLEL
            code, out, err = cli(settings, "backfill", "status", SCHEDULE, "--json", "--db", db)
            assert code == 0, err
            [row] = orjson.loads(out)
            assert (row["backfill_id"], row["status"], row["done"], row["left"]) == (
                name,
                "cancelled",
                MAX_PARALLEL,
                0,
            )
            for run_id, attempt in started:
                _, _, at = run_id.partition("@")
                attempts[parse_instant(at)] = attempt

        await cancelled_midway("let-run", running=False)
        await cancelled_midway("stop-running", running=True)
    finally:
        gate.unlink(missing_ok=True)
        for proc in procs:
            proc.stop()
