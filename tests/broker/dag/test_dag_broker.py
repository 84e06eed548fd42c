"""DAGs on the real broker: scheduler and worker processes, dependency order, kill -9, clear.

Everything is checked from the topics (read_committed) and from what the jobs
wrote: results' started/finished instants for the order, the runs topic for
"no task lost, none repeated", `kafkron dag show --json` for the run's state.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from actors.cli.submit_cmd import encode, send_commands
from actors.examples.billing.dag import DAG_ID, nightly_billing
from actors.views.tail import read_to_end
from tests.kit.worker import (
    REPO,
    ChildProcess,
    SchedulerProcess,
    WorkerProcess,
    marks,
    now_ms,
    wait_for_results,
    wait_marks,
)
from topics.messages import Result, Run, parse_run, run_id_for
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms

DAY_MS = 86_400_000
BILLING_EDGES = (
    ("usage-rollup", "invoice-nightly"),
    ("fx-rates", "invoice-nightly"),
    ("invoice-nightly", "send-invoices"),
)


def _env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "KAFKRON_NAMESPACE": settings.namespace,
        "KAFKRON_BOOTSTRAP": settings.bootstrap,
    }


async def _submit(settings: Settings, *commands: Mapping[str, Any]) -> None:
    at_ms = now_ms()
    await send_commands(settings, [encode(command, at_ms) for command in commands])


def _trigger(dag_id: str) -> dict[str, Any]:
    return {"v": 1, "type": "schedule.trigger", "id": dag_id}


async def _runs(settings: Settings) -> list[Run]:
    records = await read_to_end(settings, settings.topic(TopicKind.RUNS))
    return [parse_run(r.value) for r in records if r.value is not None]


def _dag_show(settings: Settings, dag_id: str) -> dict[str, Any]:
    shown = subprocess.run(
        [sys.executable, "-m", "actors.cli", "dag", "show", dag_id, "--json"],
        cwd=REPO,
        env=_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    view: dict[str, Any] = json.loads(shown.stdout)
    return view


def _succeeded(results: Sequence[Result]) -> dict[str, Result]:
    done = {}
    for result in results:
        if result.status == "succeeded" and result.task is not None:
            assert result.task not in done, f"{result.task} succeeded twice"
            done[result.task] = result
    return done


def _assert_dependency_order(
    done: Mapping[str, Result], runs: Sequence[Run], edges: Sequence[tuple[str, str]]
) -> None:
    """Each task started after each of its dependencies finished (worker instants), and
    the shard emitted it only after (shard instants; same host clock)."""
    fired = {run.task: run.fired_ms for run in runs if run.attempt == 1}
    for before, after in edges:
        finished_ms, started_ms = done[before].finished_ms, done[after].started_ms
        assert finished_ms is not None and started_ms is not None
        assert finished_ms <= started_ms, (before, after)
        assert finished_ms <= fired[after], (before, after)


def _once_each(runs: Sequence[Run], run_id: str, tasks: Sequence[str]) -> None:
    """Every task's first attempt is on the runs topic exactly once, and nothing else."""
    attempts = Counter((run.run_id, run.attempt) for run in runs)
    assert [k for k, n in attempts.items() if n > 1] == []  # nothing repeated
    firsts = sorted(run.task or "" for run in runs if run.attempt == 1)
    assert firsts == sorted(tasks)  # nothing lost, nothing extra
    assert {run.run_id for run in runs} == {run_id_for_task(run_id, t) for t in tasks}


def run_id_for_task(dag_run_id: str, task: str) -> str:
    return f"{dag_run_id}/{task}"


async def test_nightly_billing_runs_in_dependency_order_with_its_data_interval(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    customers = 40
    env = {
        "KAFKRON_BILLING_DB": str(tmp_path / "billing.db"),
        "KAFKRON_PROVIDER_DB": str(tmp_path / "provider.db"),
    }
    children: list[ChildProcess] = [
        SchedulerProcess(kafka_settings, tmp_path),
        WorkerProcess(kafka_settings, tmp_path, "w1", jobs="actors.examples.billing.jobs", env=env),
    ]
    try:
        await _submit(kafka_settings, nightly_billing(customers=customers), _trigger(DAG_ID))
        found = await wait_for_results(
            kafka_settings,
            lambda rs: len(_succeeded(rs)) == 4 and any(r.task is None for r in rs),
            workers=children,
            timeout_s=180,
        )
        runs = await _runs(kafka_settings)
        view = _dag_show(kafka_settings, DAG_ID)
    finally:
        for child in children:
            child.stop()

    done = _succeeded(found)
    outcomes = [(r.task, r.status, r.error) for r in found]
    assert [r.status for r in found] == ["succeeded"] * 5, outcomes
    assert {r.attempt for r in found} == {1}
    dag_run_id = done["send-invoices"].run_id.rpartition("/")[0]
    [whole] = [r for r in found if r.task is None]  # the run's own result, once
    assert (whole.run_id, whole.counts) == (dag_run_id, {"succeeded": 4})
    _once_each(runs, dag_run_id, list(done))
    _assert_dependency_order(done, runs, BILLING_EDGES)
    # The roots were emitted together, in one batch of the shard.
    assert len({run.fired_ms for run in runs if run.task in ("usage-rollup", "fx-rates")}) == 1

    # A trigger covers the last whole interval before it: yesterday, for a daily DAG.
    triggered_ms = runs[0].scheduled_ms
    midnight_ms = triggered_ms // DAY_MS * DAY_MS
    for run in runs:
        assert run.logical_date_ms == midnight_ms - DAY_MS
        assert run.data_interval == (midnight_ms - DAY_MS, midnight_ms)
    # The jobs billed that day (they read it from their RunContext) and emailed it.
    period = format_ms(midnight_ms - DAY_MS)[:10]
    with sqlite3.connect(tmp_path / "billing.db") as conn:
        invoices = conn.execute("SELECT period, status, COUNT(*) FROM invoices GROUP BY 1, 2")
        assert invoices.fetchall() == [(period, "emailed", customers)]

    assert view["run_id"] == dag_run_id and view["run_state"] == "succeeded"
    assert {t["task"]: t["state"] for t in view["tasks"]} == dict.fromkeys(done, "succeeded")
    # dag show found the run's own result on the results topic, by its time.
    assert whole.started_ms is not None and whole.finished_ms is not None
    assert view["result"] == {
        "status": "succeeded",
        "attempt": 1,
        "counts": {"succeeded": 4},
        "started_at": format_ms(whole.started_ms),
        "finished_at": format_ms(whole.finished_ms),
        "duration_ms": whole.finished_ms - whole.started_ms,
        "error": None,
    }


async def test_a_scheduler_killed_mid_run_loses_and_repeats_no_task(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    def sleep(seconds: float, *after: str) -> dict[str, Any]:
        return {"job": {"name": "test.sleep", "args": {"seconds": seconds}}, "after": list(after)}

    tasks = {
        "a": sleep(1),
        "b": sleep(1.5),
        "c": sleep(5, "a", "b"),  # the scheduler dies while c runs
        "d": sleep(1, "c"),
        "e": sleep(0.5, "c"),
        "f": sleep(0.5, "d", "e"),
    }
    edges = [(dep, name) for name, task in tasks.items() for dep in task["after"]]
    dag = {
        "v": 1,
        "type": "dag.upsert",
        "id": "kill-mid-run",
        "spec": {"cron": "0 0 1 1 *"},
        "retry": {"max_attempts": 3, "initial_s": 1},
        "tasks": tasks,
    }
    first = SchedulerProcess(kafka_settings, tmp_path, "scheduler-1")
    worker = WorkerProcess(kafka_settings, tmp_path, "w1", concurrency=4)
    children: list[ChildProcess] = [first, worker]
    try:
        await _submit(kafka_settings, dag, _trigger("kill-mid-run"))
        await wait_marks(
            tmp_path, lambda ms: any(e == "start" and r.endswith("/c") for e, r, _, _ in ms), 120
        )
        first.signal(signal.SIGKILL)
        first.proc.wait()
        killed_ms = now_ms()
        second = SchedulerProcess(kafka_settings, tmp_path, "scheduler-2")
        children.append(second)
        found = await wait_for_results(
            kafka_settings,
            lambda rs: len(_succeeded(rs)) == 6 and any(r.task is None for r in rs),
            workers=[worker],
            timeout_s=180,
        )
        runs = await _runs(kafka_settings)
        view = _dag_show(kafka_settings, "kill-mid-run")
    finally:
        for child in children:
            child.stop()

    done = _succeeded(found)
    assert sorted(done) == sorted(tasks)
    assert [(r.task, r.status) for r in found if r.status != "succeeded"] == []
    dag_run_id = done["f"].run_id.rpartition("/")[0]
    _once_each(runs, dag_run_id, list(tasks))
    _assert_dependency_order(done, runs, edges)
    # c finished after the kill, so d, e and f were started by the new owner.
    c_finished_ms = done["c"].finished_ms
    assert c_finished_ms is not None and c_finished_ms > killed_ms
    started = Counter(r for e, r, _, _ in marks(tmp_path) if e == "start")
    assert all(n == 1 for n in started.values()), started  # no job ran twice
    assert view["run_state"] == "succeeded"
    # One run-level result, across the scheduler's kill -9, and dag show found it.
    [whole] = [r for r in found if r.task is None]
    assert (whole.run_id, whole.status, whole.counts) == (
        dag_run_id,
        "succeeded",
        {"succeeded": 6},
    )
    shown = view["result"]
    assert (shown["status"], shown["attempt"], shown["counts"]) == ("succeeded", 1, whole.counts)


async def test_a_failed_task_then_dag_clear_completes_the_run(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    flag = tmp_path / "fixed"
    interval_file = tmp_path / "interval.txt"
    dag = {
        "v": 1,
        "type": "dag.upsert",
        "id": "clear-me",
        "spec": {"every": "1h"},
        "tasks": {
            "extract": {"job": {"name": "test.noop"}},
            "note": {"job": {"name": "test.record_interval", "args": {"path": str(interval_file)}}},
            "load": {
                "job": {"name": "test.fail_until", "args": {"flag": str(flag)}},
                "after": ["extract"],
                "retry": {"max_attempts": 2, "initial_s": 0.5, "jitter": "none"},
            },
            "report": {"job": {"name": "test.noop"}, "after": ["load", "note"]},
        },
    }
    children: list[ChildProcess] = [
        SchedulerProcess(kafka_settings, tmp_path),
        WorkerProcess(kafka_settings, tmp_path, "w1", jobs="tests.jobs.worker,tests.jobs.dag"),
    ]
    try:
        await _submit(kafka_settings, dag, _trigger("clear-me"))
        failed = await wait_for_results(
            kafka_settings,
            lambda rs: any(r.status == "upstream_failed" for r in rs) and len(_succeeded(rs)) == 2,
            workers=children,
        )
        dlq = [
            r.value for r in await read_to_end(kafka_settings, kafka_settings.topic(TopicKind.DLQ))
        ]
        stuck = _dag_show(kafka_settings, "clear-me")
        dag_run_id = stuck["run_id"]

        flag.touch()  # the fix is deployed
        cleared = subprocess.run(
            [sys.executable, "-m", "actors.cli", "dag", "clear", "clear-me", dag_run_id, "load"],
            cwd=REPO,
            env=_env(kafka_settings),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cleared.returncode == 0, cleared.stderr
        found = await wait_for_results(
            kafka_settings,
            lambda rs: (
                len(_succeeded(rs)) == 4
                and any(r.task is None and r.status == "succeeded" for r in rs)
            ),
            workers=children,
        )
        view = _dag_show(kafka_settings, "clear-me")
    finally:
        for child in children:
            child.stop()

    # Before the clear: load failed twice and went to the DLQ, report never ran.
    assert sorted(
        (r.task, r.attempt, r.status) for r in failed if r.task not in ("note", None)
    ) == [
        ("extract", 1, "succeeded"),
        ("load", 1, "failed"),
        ("load", 2, "failed"),
        ("report", 1, "upstream_failed"),
    ]
    assert len(dlq) == 1 and b"/load" in (dlq[0] or b"")
    assert stuck["run_state"] == "failed"
    assert {t["task"]: t["state"] for t in stuck["tasks"]} == {
        "extract": "succeeded",
        "note": "succeeded",
        "load": "failed",
        "report": "upstream_failed",
    }
    # After: load reran at attempt 3, report at attempt 2, and the run succeeded.
    done = _succeeded(found)
    assert (done["load"].attempt, done["report"].attempt) == (3, 2)
    assert done["report"].started_ms is not None and done["load"].finished_ms is not None
    assert done["load"].finished_ms <= done["report"].started_ms
    assert view["run_state"] == "succeeded"
    # The run's own result: failed once (load at fault), then succeeded after the clear;
    # dag show showed each while it was the run's latest.
    wholes = sorted((r.attempt, r.status) for r in found if r.task is None)
    assert wholes == [(1, "failed"), (2, "succeeded")]
    first, last = stuck["result"], view["result"]
    assert (first["status"], first["attempt"]) == ("failed", 1)
    assert first["counts"] == {"succeeded": 2, "failed": 1, "upstream_failed": 1}
    assert "task(s) at fault: load" in first["error"]
    assert (last["status"], last["attempt"], last["counts"]) == ("succeeded", 2, {"succeeded": 4})
    # The job saw the run's logical date and interval in its RunContext.
    scheduled_ms = done["note"].scheduled_ms
    assert dag_run_id == run_id_for("clear-me", scheduled_ms)
    hour_ms = 3_600_000
    end_ms = scheduled_ms // hour_ms * hour_ms
    logical, start, end = interval_file.read_text().split()
    assert (logical, start, end) == (
        _iso(end_ms - hour_ms),
        _iso(end_ms - hour_ms),
        _iso(end_ms),
    )


def _iso(instant_ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(instant_ms / 1000, tz=UTC).isoformat()
