"""A DAG's graph with the state of each task of one run (`kafkron dag show`, the console).

Pure: it reads a `ScheduleState` decoded from the ``{ns}.schedules`` changelog
(with the shard's own decoder) and returns data, text rows or Graphviz DOT.
Nothing here talks to Kafka.

An ended run's own result (``task`` null on ``{ns}.results``: status, counts of
task states, duration) is what the view shows of the run when the caller found
it: `result_query` says which record to look for and where in time, and
`dag_view(..., result=...)` uses it. ``kafkron dag show`` reads it (the console
shows the changelog's state alone).

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

from actors.display import duration, job_text
from actors.shard.dag_book import DagRun
from actors.shard.state import ScheduleState
from actors.views.schedules import spec_text
from topics.dag_graph import topological_order
from topics.messages import PROGRESS_STATUS, Result, parse_result, run_id_for
from topics.timefmt import format_ms
from topics.vocabulary import DagRunState, TaskState

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


# The run's own result is written in the transaction that records its end, just after
# the shard decided it (``ended``), so its record is stamped about then. The broker's
# time index is searched from a minute before (a broker stamping records with its own
# clock, behind the scheduler's) and given up ten minutes after (the results topic's
# retention removed it, or it is on another cluster's copy).
RESULT_LOOKBACK_MS = 60_000
RESULT_LOOKAHEAD_MS = 600_000


class ViewError(ValueError):
    """The DAG or run asked for is not in the changelog; the message says what is."""


@dataclass(frozen=True, slots=True)
class ResultQuery:
    """Where the run-level result of an ended DAG run is, on the DAG's partition."""

    run_id: str
    attempt: int
    """The run's ``ends``: a run that ended again after a ``dag.clear`` has a newer one."""
    since_ms: int
    until_ms: int

    def result(self, value: bytes | None) -> Result | None:
        """The record's result if it is the one looked for."""
        if value is None:
            return None
        try:
            found = parse_result(value)
        except ValueError:
            return None
        if (
            found.task is not None
            or found.run_id != self.run_id
            or found.attempt != self.attempt
            or found.status == PROGRESS_STATUS
        ):
            return None
        return found

    def done(self, value: bytes | None, timestamp_ms: int) -> bool:
        """Whether to stop reading after this record."""
        return timestamp_ms > self.until_ms or self.result(value) is not None


@dataclass(frozen=True, slots=True)
class RunResult:
    """The run-level result of the run shown."""

    status: str
    attempt: int
    counts: Mapping[str, int]
    started_ms: int | None
    finished_ms: int | None
    error: str | None

    @property
    def duration_ms(self) -> int | None:
        if self.started_ms is None or self.finished_ms is None:
            return None
        return self.finished_ms - self.started_ms


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
    deadline: dict[str, int] | None = None
    """The DAG's ``deadline`` (per task run, from becoming ready), as written."""
    """(run id, state) of the other runs the shard remembers, newest first."""
    result: RunResult | None = None
    """The run's own result, when the caller found it (see `result_query`)."""
    result_missing: bool = False
    """The run ended and the caller looked for its result, in vain."""


def shown_run(state: ScheduleState, run_id: str | None = None) -> tuple[str, DagRun] | None:
    """The run a view of DAG ``state`` shows: ``run_id``, or its latest (None: no run yet)."""
    if state.dag is None:
        raise ViewError(f"{state.id!r} is a schedule, not a DAG; see it with `kafkron ls`")
    runs = state.dag.runs
    if run_id is None:
        if not runs:
            return None
        run_id = max(runs, key=lambda rid: runs[rid].scheduled_ms)
    elif run_id not in runs:
        known = ", ".join(_newest_first(state)[:10]) or "none yet"
        raise ViewError(
            f"run {run_id!r} is not among the runs the shard remembers for {state.id!r} "
            f"({known}); an older run's result and tasks are in `kafkron history '{run_id}'`"
        )
    return run_id, runs[run_id]


def result_query(state: ScheduleState, run_id: str | None = None) -> ResultQuery | None:
    """Where to find the run-level result of the run shown, None if it has not ended."""
    found = shown_run(state, run_id)
    if found is None:
        return None
    shown, run = found
    if run.state == DagRunState.RUNNING or run.ended_ms is None or run.ends < 1:
        return None
    return ResultQuery(
        shown, run.ends, run.ended_ms - RESULT_LOOKBACK_MS, run.ended_ms + RESULT_LOOKAHEAD_MS
    )


def _newest_first(state: ScheduleState) -> list[str]:
    runs = {} if state.dag is None else state.dag.runs
    return sorted(runs, key=lambda rid: runs[rid].scheduled_ms, reverse=True)


def dag_view(
    state: ScheduleState,
    run_id: str | None = None,
    *,
    result: Result | None = None,
    looked_for_result: bool = False,
) -> DagView:
    """The view of DAG ``state``'s run ``run_id`` (default: its latest run), with its
    run-level ``result`` if the caller looked for it (`result_query`) and found it."""
    found = shown_run(state, run_id)
    run_id, run = (None, None) if found is None else found
    definition = orjson.loads(state.def_bytes)
    task_docs: dict[str, Any] = definition["tasks"]
    after = {name: tuple(doc["after"]) for name, doc in task_docs.items()}
    order = topological_order(after)
    runs = {} if state.dag is None else state.dag.runs
    newest_first = _newest_first(state)
    query = result_query(state, run_id)
    if result is not None and (
        query is None
        or result.run_id != query.run_id
        or result.task is not None
        or result.attempt != query.attempt
    ):
        result = None  # not this run's latest
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
                job=job_text(task_docs[name]["job"]["name"], task_docs[name]["job"].get("args")),
            )
        )
    return DagView(
        dag_id=state.id,
        spec=spec_text(definition["spec"]),
        max_active_runs=int(definition["max_active_runs"]),
        deadline=definition.get("deadline"),
        next_fire_ms=state.next_ms,
        paused=state.paused,
        run_id=run_id,
        run_state=None if run is None else (run.state if result is None else result.status),
        logical_date=None if run is None else format_ms(run.logical_date_ms),
        data_interval=None
        if run is None
        else (format_ms(run.data_interval[0]), format_ms(run.data_interval[1])),
        ended=None if run is None or run.ended_ms is None else format_ms(run.ended_ms),
        tasks=tasks,
        other_runs=[(rid, runs[rid].state) for rid in newest_first if rid != run_id],
        result=None if result is None else _run_result(result),
        result_missing=looked_for_result and query is not None and result is None,
    )


def _run_result(result: Result) -> RunResult:
    error = None if result.error is None else result.error.get("message") or None
    return RunResult(
        status=str(result.status),
        attempt=result.attempt,
        counts=dict(result.counts or {}),
        started_ms=result.started_ms,
        finished_ms=result.finished_ms,
        error=error,
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
        "deadline": view.deadline,
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
        "result": None if view.result is None else result_json(view.result),
    }


def result_json(result: RunResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "attempt": result.attempt,
        "counts": dict(result.counts),
        "started_at": None if result.started_ms is None else format_ms(result.started_ms),
        "finished_at": None if result.finished_ms is None else format_ms(result.finished_ms),
        "duration_ms": result.duration_ms,
        "error": result.error,
    }


def counts_text(counts: Mapping[str, int]) -> str:
    """``3 succeeded, 1 failed`` in the order of the task states."""
    order = {str(state): i for i, state in enumerate(TaskState)}
    ranked = sorted(counts.items(), key=lambda item: (order.get(item[0], len(order)), item[0]))
    return ", ".join(f"{n} {state}" for state, n in ranked)


def header_lines(view: DagView) -> list[str]:
    next_fire = "none" if view.next_fire_ms is None else format_ms(view.next_fire_ms)
    lines = [
        f"DAG {view.dag_id}: {view.spec}, max_active_runs {view.max_active_runs}, "
        f"next run {next_fire}" + (" (paused)" if view.paused else "")
    ]
    if view.deadline:
        lines.append(f"deadline: {deadline_text(view.deadline)}")
    if view.run_id is None:
        lines.append("no run yet")
        return lines
    ended = f", ended {view.ended}" if view.ended else ""
    lines.append(f"run {view.run_id}: {view.run_state}{ended}")
    if view.data_interval is not None:
        start, end = view.data_interval
        lines.append(f"logical date {view.logical_date}, data interval [{start}, {end})")
    result = view.result
    if result is not None:
        lines.append(
            f"result: {result.status} in {duration(result.duration_ms)} "
            f"(attempt {result.attempt}), tasks {counts_text(result.counts)}"
        )
        if result.error:
            lines.append(f"  {result.error}")
    elif view.result_missing:
        lines.append(
            "result: not found near its end on the results topic (expired?); "
            f"see `kafkron history '{view.run_id}'`"
        )
    return lines


def deadline_text(deadline: dict[str, int]) -> str:
    """A DAG's deadline for people: each task run's, from when it became ready."""
    parts = []
    if deadline.get("start_within_s") is not None:
        parts.append(f"each task starts within {deadline['start_within_s']} s")
    if deadline.get("finish_within_s") is not None:
        parts.append(f"ends within {deadline['finish_within_s']} s")
    return " and ".join(parts) + " of becoming ready"


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
    if view.result is not None:
        took = duration(view.result.duration_ms)
        title = f"{view.run_id} ({view.run_state} in {took}: {counts_text(view.result.counts)})"
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
