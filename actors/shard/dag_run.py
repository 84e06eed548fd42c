"""The state of a DAG's runs, and how it moves: Kahn's algorithm, kept in the changelog.

Rules of this file
------------------
Everything here is a pure function of a DAG's run book (`dag_book.DagBook`), its
`Graph` and the event; nothing emits records. The shard (`actors.shard.dag_shard`)
turns the returned `Step` into records: an attempt on ``{ns}.runs`` for each task
to start, an ``upstream_failed`` result for each task that will never run.

The book is the ``dag`` value of the schedule's changelog record (its JSON in
`dag_book`), so a restored shard continues a DAG run exactly where the crashed
one was.

Theory of operation
-------------------
A task's ``in_degree`` is the number of its dependencies that have not
succeeded; it is kept (and stored) while the task is ``waiting``. A run starts
with every task waiting at its full in-degree; the tasks at zero (the roots)
start together. Each success decrements its followers' in-degrees, and those
that reach zero start, together. A task that ends without success (``failed``:
its retries are exhausted and it is in the DLQ, or ``cancelled``) marks every
task downstream of it ``upstream_failed``: their counts can never reach zero.
Other branches run on; the run ends when no task is waiting or running, as
``succeeded`` if every task succeeded, else ``failed``.

``attempt`` is the last attempt number a task used (0: none). A task always
starts at ``attempt + 1``, so (task run id, attempt) is unique on every topic
even across clears: an ``upstream_failed`` result takes an attempt number, and
a task cleared after it runs with the next.

``clear`` reruns a finished task (failed, cancelled or succeeded) of a run the
shard still remembers, and resets every task downstream of it to waiting; the
run is running again and continues from there. It is refused while a
downstream task is running, and for a task that is itself waiting, running or
``upstream_failed`` (the reason names the failed task to clear instead).

``cancel_run`` (``run.cancel`` of the DAG run itself) marks every waiting task
``cancelled`` (each takes an attempt number, reported, never run) and returns the
running ones, whose task runs the shard asks to stop; the run ends ``cancelled``
once none is running any more, whatever they report. A clear afterwards runs it
again as any ended run.

A re-upsert that changes the graph applies to running runs (`reconcile`):
new tasks join waiting, tasks no longer in the DAG become ``removed`` (a running
one is cancelled), and in-degrees are recomputed over the new edges. Runs that
ended keep their record; a clear applies the current graph to them.

The shard remembers every running run and the last `ENDED_MEMORY` ended ones
(fewer for big DAGs: at most `ENDED_TASKS_MEMORY` task entries among them).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from actors.shard.dag_book import DagBook, DagRun, TaskEntry
from topics.vocabulary import DagRunState, RunStatus, TaskState

TASK_STATES = tuple(TaskState)
# A dependency in one of these states keeps its followers from ever starting.
BLOCKING = frozenset((TaskState.FAILED, TaskState.CANCELLED, TaskState.UPSTREAM_FAILED))
OPEN = frozenset((TaskState.WAITING, TaskState.RUNNING))

RUN_STATES = tuple(DagRunState)

ENDED_MEMORY = 16
ENDED_TASKS_MEMORY = 4000


@dataclass(frozen=True, slots=True)
class Graph:
    """A DAG's tasks and edges, as the run state needs them."""

    after: Mapping[str, tuple[str, ...]]
    """Task -> the tasks it runs after (its dependencies)."""
    topo_order: tuple[str, ...]
    """Every task after its dependencies."""
    downstream: Mapping[str, tuple[str, ...]]
    """Task -> the tasks that run after it (in topological order)."""

    @classmethod
    def build(cls, after: Mapping[str, Iterable[str]], topo_order: tuple[str, ...]) -> Graph:
        deps = {name: tuple(names) for name, names in after.items()}
        followers: dict[str, list[str]] = {name: [] for name in deps}
        for name in topo_order:
            for dependency in deps[name]:
                followers[dependency].append(name)
        return cls(deps, topo_order, {n: tuple(f) for n, f in followers.items()})

    def descendants(self, task: str) -> list[str]:
        """Every task downstream of ``task`` (transitively), in topological order."""
        seen: set[str] = set()
        queue = deque(self.downstream[task])
        while queue:
            name = queue.popleft()
            if name not in seen:
                seen.add(name)
                queue.extend(self.downstream[name])
        return [name for name in self.topo_order if name in seen]


@dataclass(slots=True)
class Step:
    """What one event asks the shard to do, in this order."""

    start: list[tuple[str, int]] = field(default_factory=list)
    """(task, attempt) to emit now, in topological order (parallel tasks together)."""
    upstream_failed: list[tuple[str, int, str]] = field(default_factory=list)
    """(task, attempt, the failed task upstream of it): report, never run."""
    cancel: list[str] = field(default_factory=list)
    """Running tasks no longer in the DAG: end their task runs as cancelled."""
    stop: list[str] = field(default_factory=list)
    """Running tasks of a cancelled run: ask their task runs to stop."""
    cancelled: list[tuple[str, int]] = field(default_factory=list)
    """(task, attempt) of waiting tasks of a cancelled run: report, never run."""
    ended: DagRunState | None = None
    """``succeeded``, ``failed`` or ``cancelled`` when the run just reached its final
    state."""


def new_state() -> DagBook:
    return DagBook()


def active_count(dag: DagBook) -> int:
    """Runs that count against ``max_active_runs``: those still running, but a
    backfill's (bounded by its own ``max_parallel``: the live schedule keeps its own
    timing beside a backfill, docs/DESIGN.md §6.9)."""
    return sum(
        1 for run in dag.runs.values() if run.state == DagRunState.RUNNING and not run.backfill
    )


def start_run(
    dag: DagBook,
    graph: Graph,
    run_id: str,
    scheduled_ms: int,
    interval: tuple[int, int],
    now_ms: int | None = None,
    *,
    ends: int = 0,
    backfill: bool = False,
) -> Step:
    """Add the run ``run_id`` (not yet known) and start its roots. ``ends``: the
    run-level results its run id already has (a backfilled missed occurrence's
    ``missed`` result), so its own end result takes the next attempt number."""
    run = DagRun(
        scheduled_ms=scheduled_ms,
        logical_date_ms=interval[0],
        data_interval=interval,
        state=DagRunState.RUNNING,
        started_ms=scheduled_ms if now_ms is None else now_ms,  # its first fire
        ended_ms=None,
        tasks={
            name: TaskEntry(TaskState.WAITING, 0, len(graph.after[name]))
            for name in graph.topo_order
        },
        ends=ends,
        backfill=backfill,
    )
    dag.runs[run_id] = run
    return _settle(run, graph, 0)


def dates_of(dag: DagBook, run_id: str) -> tuple[int, tuple[int, int]] | None:
    """``(logical_date_ms, (start_ms, end_ms))`` of a run, None if unknown."""
    run = dag.runs.get(run_id)
    return None if run is None else (run.logical_date_ms, run.data_interval)


def task_ended(
    dag: DagBook,
    graph: Graph,
    run_id: str,
    task: str,
    status: RunStatus,
    attempt: int,
    now_ms: int,
) -> Step:
    """Task ``task`` of ``run_id`` ended at ``attempt`` for good: ``succeeded``,
    ``failed`` (retries exhausted, or not retryable) or ``cancelled``.

    Kahn's step on success; on anything else, ``upstream_failed`` downstream.
    An event for a run or task not running here is a no-op (empty step).
    """
    step = Step()
    run = dag.runs.get(run_id)
    if run is None:
        return step
    tasks = run.tasks
    entry = tasks.get(task)
    if entry is None or entry.state != TaskState.RUNNING:
        return step
    entry.attempt = attempt
    if status == RunStatus.SUCCEEDED:
        entry.state = TaskState.SUCCEEDED
        for follower in graph.downstream.get(task, ()):
            waiting = tasks.get(follower)
            if waiting is None or waiting.state != TaskState.WAITING:
                continue
            waiting.in_degree -= 1
            if waiting.in_degree == 0:
                _start(waiting, follower, step)
    else:
        entry.state = TaskState.CANCELLED if status == RunStatus.CANCELLED else TaskState.FAILED
        for follower in graph.descendants(task) if task in graph.downstream else ():
            waiting = tasks.get(follower)
            if waiting is not None and waiting.state == TaskState.WAITING:
                _upstream_failed(waiting, follower, task, step)
    _maybe_end(run, graph, now_ms, step)
    if step.ended is not None:
        _move_last(dag, run_id)
    return step


def cancel_run(dag: DagBook, graph: Graph, run_id: str, reason: str, now_ms: int) -> Step | str:
    """``run.cancel`` of DAG run ``run_id``: a `Step`, or why there is nothing to do.

    Waiting tasks become ``cancelled`` at once (``Step.cancelled``); running ones
    are returned in ``Step.stop`` and end through their own results; the run ends
    ``cancelled`` once no task is running (at once if none was).
    """
    run = dag.runs.get(run_id)
    if run is None or run.state != DagRunState.RUNNING:
        return f"run_id: nothing to cancel, DAG run {run_id} is not running"
    if run.cancel is not None:
        return (
            f"run_id: DAG run {run_id} is being cancelled already ({run.cancel}); "
            "it ends cancelled once its running tasks have stopped"
        )
    run.cancel = reason
    step = Step()
    tasks = run.tasks
    for name in graph.topo_order:
        entry = tasks.get(name)
        if entry is None:
            continue
        if entry.state == TaskState.WAITING:
            entry.state = TaskState.CANCELLED
            entry.in_degree = 0
            entry.attempt += 1
            step.cancelled.append((name, entry.attempt))
        elif entry.state == TaskState.RUNNING:
            step.stop.append(name)
    _maybe_end(run, graph, now_ms, step)
    if step.ended is not None:
        _move_last(dag, run_id)
    return step


def clear(dag: DagBook, graph: Graph, run_id: str, task: str, now_ms: int) -> Step | str:
    """Rerun ``task`` of ``run_id`` and everything downstream; a `Step`, or why not."""
    run = dag.runs.get(run_id)
    if run is None:
        return (
            f"run_id: {run_id!r} is not a DAG run the shard remembers (it keeps the running "
            f"ones and the last {ENDED_MEMORY} that ended); clear a task of a recent run"
        )
    if task not in graph.after:
        return (
            f"task: {task!r} is not a task of this DAG; its tasks are "
            f"{', '.join(graph.topo_order[:12])}"
        )
    step = Step()
    cancel = _align(run, graph)
    tasks = run.tasks
    state = tasks[task].state
    if state in OPEN:
        return f"task: {task!r} of {run_id} is {state}; only a finished task can be cleared"
    if state == TaskState.UPSTREAM_FAILED:
        failed = [
            n for n in graph.topo_order if tasks[n].state in (TaskState.FAILED, TaskState.CANCELLED)
        ]
        return (
            f"task: {task!r} of {run_id} never ran because a task upstream of it failed; "
            f"clear the failed task ({', '.join(failed) or 'none left'}) and it will run"
        )
    descendants = graph.descendants(task)
    busy = [n for n in descendants if tasks[n].state == TaskState.RUNNING]
    if busy:
        return (
            f"task: {task!r} of {run_id} has tasks downstream still running "
            f"({', '.join(busy[:12])}); clear it again once they finish"
        )
    step.cancel = cancel
    for name in (task, *descendants):
        entry = tasks[name]
        entry.state = TaskState.WAITING
        entry.in_degree = 0  # recomputed by _settle
    run.state = DagRunState.RUNNING
    run.ended_ms = None
    run.cancel = None  # a cancelled run cleared runs again
    # Its backfill forgot it when it ended (no ``max_parallel`` bounds it any more):
    # running again, it counts against ``max_active_runs`` like any run.
    run.backfill = False
    _settle(run, graph, now_ms, step)
    if step.ended is not None:
        _move_last(dag, run_id)
    return step


def reconcile(dag: DagBook, graph: Graph, now_ms: int) -> dict[str, Step]:
    """Apply a changed graph to the running runs; their steps by run id."""
    steps: dict[str, Step] = {}
    for run_id, run in list(dag.runs.items()):
        if run.state != DagRunState.RUNNING:
            continue
        step = Step(cancel=_align(run, graph))
        _settle(run, graph, now_ms, step)
        if step.ended is not None:
            _move_last(dag, run_id)
        if step.start or step.upstream_failed or step.cancel or step.ended:
            steps[run_id] = step
    return steps


def forget_ended(dag: DagBook, held: Callable[[int], bool] | None = None) -> list[str]:
    """Drop the oldest ended runs beyond the memory bounds; the run ids dropped.

    The latest ended run is always kept, however big its DAG. ``held``: whether a
    run's scheduled instant lies in a range its DAG's backfill has left to fire
    (`BackfillState.holds`); such an ended run is kept, outside the bounds, until
    the backfill's cursor passed it. Why: the backfill lets an instant pass only
    while the run book knows its DAG run (docs/DESIGN.md §6.9); a plan made while
    that run ran saw no own row and planned it at attempt 1, and the backfill's own
    ending runs would otherwise push it out, so its tasks would run twice. This is
    safe and bounded: a run enters the book only at the live next occurrence (after
    every range, which must lie behind the live schedule when its command is
    accepted) or at the backfill's cursor (which then moves past it), so the runs
    held are among those the book held when a command brought their range: at
    most ``max_active_runs`` running plus `ENDED_MEMORY` ended per command.
    """
    runs = dag.runs
    ended = [
        run_id
        for run_id, run in runs.items()
        if run.state != DagRunState.RUNNING and (held is None or not held(run.scheduled_ms))
    ]
    task_entries = sum(len(runs[run_id].tasks) for run_id in ended)
    remaining = len(ended)
    dropped: list[str] = []
    for run_id in ended:
        if remaining <= 1 or (remaining <= ENDED_MEMORY and task_entries <= ENDED_TASKS_MEMORY):
            break
        task_entries -= len(runs[run_id].tasks)
        del runs[run_id]
        dropped.append(run_id)
        remaining -= 1
    return dropped


# --- the moves ----------------------------------------------------------------------


def _start(entry: TaskEntry, task: str, step: Step) -> None:
    entry.state = TaskState.RUNNING
    entry.in_degree = 0
    entry.attempt += 1
    step.start.append((task, entry.attempt))


def _upstream_failed(entry: TaskEntry, task: str, failed: str, step: Step) -> None:
    entry.state = TaskState.UPSTREAM_FAILED
    entry.in_degree = 0
    entry.attempt += 1
    step.upstream_failed.append((task, entry.attempt, failed))


def _align(run: DagRun, graph: Graph) -> list[str]:
    """Make the run's tasks those of ``graph``; the running tasks that were removed."""
    tasks = run.tasks
    cancel: list[str] = []
    for name, entry in tasks.items():
        if name not in graph.after and entry.state in OPEN:
            if entry.state == TaskState.RUNNING:
                cancel.append(name)
            entry.state = TaskState.REMOVED
            entry.in_degree = 0
    for name in graph.topo_order:
        if name not in tasks:
            tasks[name] = TaskEntry(TaskState.WAITING)
    return cancel


def _settle(run: DagRun, graph: Graph, now_ms: int, step: Step | None = None) -> Step:
    """Recompute every waiting task's in-degree; start or fail those that are decided."""
    step = Step() if step is None else step
    tasks = run.tasks
    for name in graph.topo_order:
        entry = tasks[name]
        if entry.state != TaskState.WAITING:
            continue
        blocked_by = next((dep for dep in graph.after[name] if tasks[dep].state in BLOCKING), None)
        if blocked_by is not None:
            origin = _failed_origin(tasks, graph, blocked_by)
            _upstream_failed(entry, name, origin, step)
            continue
        entry.in_degree = sum(
            1 for dep in graph.after[name] if tasks[dep].state != TaskState.SUCCEEDED
        )
        if entry.in_degree == 0:
            _start(entry, name, step)
    _maybe_end(run, graph, now_ms, step)
    return step


def _failed_origin(tasks: Mapping[str, TaskEntry], graph: Graph, name: str) -> str:
    """The failed (or cancelled) task that ``name`` is, or is downstream of."""
    while tasks[name].state == TaskState.UPSTREAM_FAILED:
        # After a graph change an upstream_failed task may have no blocking dependency
        # left; it then names itself.
        dep = next((d for d in graph.after.get(name, ()) if tasks[d].state in BLOCKING), None)
        if dep is None:
            break
        name = dep
    return name


def _move_last(dag: DagBook, run_id: str) -> None:
    """Ended runs are kept in the order they ended (the oldest is forgotten first)."""
    dag.runs[run_id] = dag.runs.pop(run_id)


def _maybe_end(run: DagRun, graph: Graph, now_ms: int, step: Step) -> None:
    tasks = run.tasks
    if run.state != DagRunState.RUNNING or any(tasks[n].state in OPEN for n in graph.topo_order):
        return
    if run.cancel is not None:
        final = DagRunState.CANCELLED
    elif all(tasks[n].state == TaskState.SUCCEEDED for n in graph.topo_order):
        final = DagRunState.SUCCEEDED
    else:
        final = DagRunState.FAILED
    run.state = final
    run.ended_ms = now_ms
    step.ended = final
