"""A DAG's graph with the state of each task of one run (`kafkron dag show`, the console).

Pure: it reads a `ScheduleState` decoded from the ``{ns}.schedules`` changelog
(with the shard's own decoder) and returns data, text rows or Graphviz DOT.
Nothing here talks to Kafka.

The state of a task is the shard's (see `actors.shard.dag_run`): ``waiting``
(with how many dependencies it still waits for), ``running`` (or ``retrying``
with the instant of the next attempt, from the run in flight), ``succeeded``,
``failed``, ``cancelled``, ``upstream_failed``, ``removed``. Tasks are grouped
in stages: a task's stage is one more than the latest stage among its
dependencies, so every task of a stage can run in parallel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from actors.shard.dag_book import DagRun
from actors.shard.state import ScheduleState
from actors.views.schedules import spec_text
from topics.dag_graph import topological_order
from topics.messages import run_id_for
from topics.timefmt import format_ms
from topics.vocabulary import TaskState

# Graphviz fill colours, close to what Airflow's graph view uses for each state.
DOT_COLOURS: Mapping[str, str] = {
    TaskState.SUCCEEDED: "#a3e4a3",
    TaskState.RUNNING: "#9ad0f5",
    "retrying": "#f5d76e",
    TaskState.FAILED: "#f08080",
    TaskState.CANCELLED: "#f5b7b1",
    TaskState.UPSTREAM_FAILED: "#f5a65b",
    TaskState.WAITING: "#ffffff",
    TaskState.REMOVED: "#d9d9d9",
    "no run": "#ffffff",
}


class ViewError(ValueError):
    """The DAG or run asked for is not in the changelog; the message says what is."""


@dataclass(frozen=True, slots=True)
class TaskView:
    name: str
    stage: int
    state: str
    detail: str
    """More about the state: the attempt, the next retry, what it waits for."""
    after: tuple[str, ...]
    job: str


@dataclass(frozen=True, slots=True)
class DagView:
    dag_id: str
    spec: str
    max_active_runs: int
    next_fire_ms: int | None
    paused: bool
    run_id: str | None
    """The run shown (None: the DAG has not run yet)."""
    run_state: str | None
    logical_date: str | None
    data_interval: tuple[str, str] | None
    ended: str | None
    tasks: list[TaskView]
    other_runs: list[tuple[str, str]] = field(default_factory=list)
    """(run id, state) of the other runs the shard remembers, newest first."""


def dag_view(state: ScheduleState, run_id: str | None = None) -> DagView:
    """The view of DAG ``state``'s run ``run_id`` (default: its latest run)."""
    if state.dag is None:
        raise ViewError(f"{state.id!r} is a schedule, not a DAG; see it with `kafkron ls`")
    definition = orjson.loads(state.def_bytes)
    task_docs: dict[str, Any] = definition["tasks"]
    after = {name: tuple(doc["after"]) for name, doc in task_docs.items()}
    order = topological_order(after)
    runs = state.dag.runs
    newest_first = sorted(runs, key=lambda rid: runs[rid].scheduled_ms, reverse=True)
    if run_id is None:
        run_id = newest_first[0] if newest_first else None
    elif run_id not in runs:
        known = ", ".join(newest_first[:10]) or "none yet"
        raise ViewError(
            f"run {run_id!r} is not among the runs the shard remembers for {state.id!r} "
            f"({known}); an older run's result and tasks are in `kafkron history '{run_id}'`"
        )
    run = None if run_id is None else runs[run_id]
    stages: dict[str, int] = {}
    for name in order:
        stages[name] = 1 + max((stages[dep] for dep in after[name]), default=0)
    tasks = []
    for name in order:
        task_state, detail = _state(state, run, run_id, name)
        tasks.append(
            TaskView(
                name=name,
                stage=stages[name],
                state=task_state,
                detail=detail,
                after=after[name],
                job=str(task_docs[name]["job"]["name"]),
            )
        )
    return DagView(
        dag_id=state.id,
        spec=spec_text(definition["spec"]),
        max_active_runs=int(definition["max_active_runs"]),
        next_fire_ms=state.next_ms,
        paused=state.paused,
        run_id=run_id,
        run_state=None if run is None else run.state,
        logical_date=None if run is None else format_ms(run.logical_date_ms),
        data_interval=None
        if run is None
        else (format_ms(run.data_interval[0]), format_ms(run.data_interval[1])),
        ended=None if run is None or run.ended_ms is None else format_ms(run.ended_ms),
        tasks=tasks,
        other_runs=[(rid, runs[rid].state) for rid in newest_first if rid != run_id],
    )


def _state(
    state: ScheduleState, run: DagRun | None, run_id: str | None, task: str
) -> tuple[str, str]:
    if run is None or run_id is None:
        return "no run", ""
    entry = run.tasks.get(task)
    if entry is None:
        return TaskState.REMOVED, "not in this run"
    status = entry.state
    attempt = entry.attempt
    if status == TaskState.WAITING:
        waits = entry.in_degree
        return status, f"on {waits} upstream task{'s' if waits != 1 else ''}" if waits else ""
    if status == TaskState.RUNNING:
        live = state.runs.get(run_id_for(state.id, run.scheduled_ms, task))
        if live is None:
            return status, f"attempt {attempt}"
        if live.retry_ms is not None:
            return "retrying", f"attempt {live.attempt + 1} at {format_ms(live.retry_ms)}"
        return status, f"attempt {live.attempt}, deadline {format_ms(live.deadline_ms)}"
    if status == TaskState.UPSTREAM_FAILED:
        return status, ""
    return status, f"attempt {attempt}" if attempt else ""


def view_json(view: DagView) -> dict[str, Any]:
    return {
        "id": view.dag_id,
        "spec": view.spec,
        "max_active_runs": view.max_active_runs,
        "next_fire": None if view.next_fire_ms is None else format_ms(view.next_fire_ms),
        "paused": view.paused,
        "run_id": view.run_id,
        "run_state": view.run_state,
        "logical_date": view.logical_date,
        "data_interval": None if view.data_interval is None else list(view.data_interval),
        "ended": view.ended,
        "tasks": [
            {
                "task": t.name,
                "stage": t.stage,
                "state": t.state,
                "detail": t.detail,
                "after": list(t.after),
                "job": t.job,
            }
            for t in view.tasks
        ],
        "other_runs": [{"run_id": rid, "state": s} for rid, s in view.other_runs],
    }


def header_lines(view: DagView) -> list[str]:
    next_fire = "none" if view.next_fire_ms is None else format_ms(view.next_fire_ms)
    lines = [
        f"DAG {view.dag_id}: {view.spec}, max_active_runs {view.max_active_runs}, "
        f"next run {next_fire}" + (" (paused)" if view.paused else "")
    ]
    if view.run_id is None:
        lines.append("no run yet")
        return lines
    ended = f", ended {view.ended}" if view.ended else ""
    lines.append(f"run {view.run_id}: {view.run_state}{ended}")
    if view.data_interval is not None:
        start, end = view.data_interval
        lines.append(f"logical date {view.logical_date}, data interval [{start}, {end})")
    return lines


def table_rows(view: DagView) -> list[tuple[str, ...]]:
    """(stage, task, state, detail, after) per task, in topological order."""
    return [
        (str(t.stage), t.name, t.state, t.detail or "-", ", ".join(t.after) or "-")
        for t in view.tasks
    ]


def other_runs_line(view: DagView, limit: int = 5) -> str | None:
    if not view.other_runs:
        return None
    shown = ", ".join(f"{rid} {s}" for rid, s in view.other_runs[:limit])
    more = len(view.other_runs) - limit
    return "other runs: " + shown + (f" and {more} more" if more > 0 else "")


def dot(view: DagView) -> str:
    """Graphviz DOT: one node per task (filled by state), an edge per dependency."""
    title = view.dag_id if view.run_id is None else f"{view.run_id} ({view.run_state})"
    lines = [
        f"digraph {_quote(view.dag_id)} {{",
        "  rankdir=LR;",
        f"  label={_quote(title)};",
        "  labelloc=t;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
    ]
    for task in view.tasks:
        label = _label(task.name, task.state, task.detail)
        colour = DOT_COLOURS.get(task.state, "#ffffff")
        lines.append(f"  {_quote(task.name)} [label={label}, fillcolor={_quote(colour)}];")
    for task in view.tasks:
        lines.extend(f"  {_quote(dep)} -> {_quote(task.name)};" for dep in task.after)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _quote(text: str) -> str:
    return f'"{_escape(text)}"'


def _label(*lines: str) -> str:
    """A quoted DOT label of several lines (DOT's own ``\\n`` between them)."""
    return '"' + "\\n".join(_escape(line) for line in lines if line) + '"'


def stages_text(tasks: Sequence[TaskView]) -> str:
    """``usage-rollup, fx-rates -> invoice-nightly -> send-invoices`` (stages in order)."""
    by_stage: dict[int, list[str]] = {}
    for task in tasks:
        by_stage.setdefault(task.stage, []).append(task.name)
    return " -> ".join(", ".join(names) for _, names in sorted(by_stage.items()))
