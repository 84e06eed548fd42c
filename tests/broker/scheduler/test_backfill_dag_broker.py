"""A DAG's backfill on the real broker (docs/DESIGN.md §6.9).

A DAG firing every second is paused for a few seconds; its resume reports the
occurrences that came due meanwhile ``skipped`` (attempt 1 of each DAG run id). A
``missing`` backfill then starts one DAG run per skipped occurrence, beside the live
runs: its tasks at attempt 1 with the occurrence's own logical date and data
interval, the DAG run's own result at attempt 2, so every ``(run_id, attempt)`` on
the results topic is unique.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.kit.backfill import backfill_doc, cli, dry_run, outcomes_of, runs_of, wait_for
from tests.kit.scheduler import produce
from tests.kit.worker import ChildProcess, SchedulerProcess, WorkerProcess
from topics.messages import run_id_for
from topics.names import Settings
from topics.timefmt import format_ms, parse_instant

pytestmark = pytest.mark.broker

DAG = "etl"
EVERY_MS = 1000


def _command(kind: str, **fields: Any) -> tuple[bytes, bytes]:
    return DAG.encode(), orjson.dumps({"v": 1, "type": kind, "id": DAG, **fields})


@pytest.mark.kafka_partitions(1)
async def test_a_dag_backfill_starts_a_dag_run_per_skipped_occurrence_with_its_dates(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    db = str(tmp_path / "h.db")
    worker = WorkerProcess(settings, tmp_path, "w1", concurrency=8)
    recorder = ChildProcess(settings, tmp_path, "recorder", ["recorder", "--db", db])
    scheduler = SchedulerProcess(settings, tmp_path, "s1")
    procs: list[ChildProcess] = [worker, recorder, scheduler]
    try:
        noop = {"name": "test.noop", "args": {}}
        await produce(
            settings,
            [
                _command(
                    "dag.upsert",
                    spec={"every": "1s"},
                    tasks={"extract": {"job": noop}, "load": {"job": noop, "after": ["extract"]}},
                ),
                _command("schedule.pause"),
            ],
        )

        await wait_for("the DAG applied", lambda: _dag_known(settings), 120, *procs)
        await asyncio.sleep(4)  # occurrences come due while it is paused
        await produce(settings, [_command("schedule.resume")])

        async def skipped() -> Any:
            found = [
                r for r in await outcomes_of(settings) if r.task is None and r.status == "skipped"
            ]
            return found or None

        reported = await wait_for("the paused occurrences reported", skipped, 120, *procs)
        assert all(r.attempt == 1 and r.covers is None for r in reported)
        instants = sorted(r.scheduled_ms for r in reported)
        window = ["--from", format_ms(instants[0]), "--to", format_ms(instants[-1] + 1)]
        window += ["--db", db]

        async def planned() -> Any:
            lines = dry_run(settings, DAG, *window)
            if lines is None:
                return None
            got = {
                (parse_instant(s["scheduled_at"]), s["action"], s["attempt"]) for s in lines[:-1]
            }
            return got == {(at, "rerun", 2) for at in instants} or None

        await wait_for("the plan (the recorder caught up)", planned, 120, *procs)
        code, out, err = cli(settings, "backfill", DAG, *window, "--backfill-id", "fill")
        assert code == 0, err
        assert f"backfill fill of {DAG}" in out

        async def ended() -> Any:
            doc = await backfill_doc(settings, DAG)
            return doc if doc is not None and doc["id"] == "fill" and "ended" in doc else None

        doc = await wait_for("the backfill ended", ended, 120, *procs)
        assert doc["fired"] == len(instants) and doc.get("passed", 0) == 0

        run_ids = {run_id_for(DAG, at) for at in instants}

        async def dag_runs_ended() -> Any:
            ends = [r for r in await outcomes_of(settings) if r.task is None]
            mine = [r for r in ends if r.run_id in run_ids and r.status != "skipped"]
            return (ends, mine) if len(mine) >= len(instants) else None

        ends, mine = await wait_for("the DAG runs' own results", dag_runs_ended, 120, *procs)
        assert sorted((r.run_id, r.attempt, r.status) for r in mine) == sorted(
            (rid, 2, "succeeded") for rid in run_ids
        )
        counts = Counter((r.run_id, r.attempt) for r in ends)
        assert set(counts.values()) == {1}, "a DAG run's own result took an attempt twice"
        tasks = [r for r in await runs_of(settings) if r.scheduled_ms in set(instants)]
        assert sorted((r.scheduled_ms, r.task, r.attempt) for r in tasks) == sorted(
            (at, task, 1) for at in instants for task in ("extract", "load")
        )
        for run in tasks:  # an every-second DAG: the interval ends at its occurrence
            assert run.data_interval == (run.scheduled_ms - EVERY_MS, run.scheduled_ms)
            assert run.logical_date_ms == run.scheduled_ms - EVERY_MS
    finally:
        for proc in procs:
            proc.stop()


async def _dag_known(settings: Settings) -> bool:
    code, out, _err = await asyncio.to_thread(cli, settings, "ls", "--json")
    return code == 0 and DAG in out
