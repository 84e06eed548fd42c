"""A DAG's definition: its tasks and edges, in the form the shard runs them.

A ``dag.upsert`` becomes a `DagDefinition`, a `Definition` (so the shard fires
it like any schedule: spec, misfire policy, bounds) that also carries the graph:

- ``tasks``: name -> `DagTask` (job, ``after``, retry policy, timeout), each with
  the DAG-level retry and timeout already filled in where the task set none;
- ``topo_order``: every task after its dependencies (ties: declaration order);
- ``graph``: the edges both ways, as `dag_run.Graph` (what Kahn's algorithm walks);
- ``max_active_runs``: DAG runs allowed at once;
- ``deadline`` (inherited): each task run's start and end after it became ready
  (`dag_shard`, docs/DESIGN.md §6.10), None without one.

The changelog keeps the definition normalised, as `definition` does for
schedules (every default filled in, fixed key order)::

    {"spec": {...}, "misfire": {...}, "dst": {...}, "spread_window_s": 0,
     "start": null, "end": null, "max_active_runs": 1,
     "tasks": {"usage-rollup": {"job": {...}, "after": [], "retry": {...}, "timeout_s": 3600},
               ...},
     "deadline": {"start_within_s": 60}}     (only when given: other DAGs keep their bytes)

so a restore needs no validator, and the presence of ``"tasks"`` is what tells
`actors.shard.restored` it is reading a DAG.

The data interval of a run (Airflow's, see `data_interval`) needs the spec's
occurrence *before* a run's, which `CompiledSpec` does not offer; it is found by
searching with ``next_after`` over the spec compiled without ``start``/``end``,
so the first run after ``start`` still covers a whole interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from actors.shard.dag_run import Graph
from actors.shard.definition import Definition, deadline_of
from actors.timespec import CompiledSpec, compile_spec
from topics.alerts import Deadline
from topics.commands import (
    DEFAULT_TIMEOUT_S,
    DagTask,
    DagUpsert,
    Job,
    MisfirePolicy,
    RetryPolicy,
)
from topics.concurrency import concurrency_of
from topics.dag_graph import topological_order
from topics.key_templates import RENDERED_MARK, job_marks_templates, rendered_job, renders_keys
from topics.priority import DEFAULT_PRIORITY
from topics.queues import DEFAULT_QUEUE
from topics.ratelimits import rate_limit_of
from topics.timefmt import format_ms, parse_instant
from topics.vocabulary import OverlapPolicy

# How far back `previous_occurrence` looks (a spec with nothing in ten years before
# an occurrence has, for interval purposes, no previous one).
_LOOKBACK_MAX_MS = 3653 * 86_400_000


class DagDefinition(Definition):
    """A `Definition` plus the graph; immutable once built.

    ``job``, ``retry`` and ``timeout_s`` inherited from `Definition` are not used
    for DAG runs (each task has its own); ``overlap`` is ``skip``: an
    occurrence beyond ``max_active_runs`` is reported ``skipped``.
    """

    __slots__ = ("graph", "max_active_runs", "run_jobs", "tasks", "topo_order", "unbounded")

    def __init__(
        self,
        *,
        compiled: CompiledSpec,
        unbounded: CompiledSpec,
        misfire: MisfirePolicy,
        tasks: Mapping[str, DagTask],
        topo_order: tuple[str, ...],
        max_active_runs: int,
        is_at: bool,
        deadline: Deadline | None = None,
        schedule_id: str = "",
        templates: bool = True,
    ) -> None:
        super().__init__(
            compiled=compiled,
            job=Job("", {}),
            misfire=misfire,
            overlap=OverlapPolicy.SKIP,
            retry=RetryPolicy(),
            timeout_s=DEFAULT_TIMEOUT_S,
            is_at=is_at,
            deadline=deadline,
        )
        self.unbounded = unbounded
        self.tasks = tasks
        # Each task's job as its run records carry it: keys rendered once, here, with
        # ``{schedule_id}`` the DAG's id (`topics.key_templates`); literal in a changelog
        # written before keys had placeholders (``templates`` False).
        self.run_jobs = {
            name: rendered_job(task.job, schedule_id, templates) for name, task in tasks.items()
        }
        self.topo_order = topo_order
        self.max_active_runs = max_active_runs
        self.graph = Graph.build({name: task.after for name, task in tasks.items()}, topo_order)

    def data_interval(self, scheduled_ms: int) -> tuple[int, int]:
        """``(start_ms, end_ms)`` of the data a run scheduled at ``scheduled_ms`` covers.

        Airflow's convention: a run starts once its interval has ended, and the
        interval of the run of occurrence T is ``[previous occurrence, T)``; the
        logical date is its start. A run at an instant that is not an occurrence
        (``schedule.trigger``) covers the last whole interval before it, as a manual
        Airflow run does. With no previous occurrence (an ``at`` spec) the interval
        is empty, ``[T, T]``, as for Airflow's ``@once``.
        """
        return data_interval(self.unbounded, scheduled_ms)


def data_interval(spec: CompiledSpec, scheduled_ms: int) -> tuple[int, int]:
    """`DagDefinition.data_interval` by ``spec`` (a Kafka target's placeholders use it
    with the schedule's own spec)."""
    end_ms = scheduled_ms
    if spec.next_after(scheduled_ms - 1) != scheduled_ms:  # a trigger
        last_ms = previous_occurrence(spec, scheduled_ms)
        if last_ms is None:
            return scheduled_ms, scheduled_ms
        end_ms = last_ms
    start_ms = previous_occurrence(spec, end_ms)
    return (end_ms if start_ms is None else start_ms), end_ms


def previous_occurrence(spec: CompiledSpec, before_ms: int) -> int | None:
    """The last occurrence of ``spec`` strictly before ``before_ms`` (None: none).

    Gallops back until a window holds an occurrence, then bisects: the predicate
    "some occurrence lies in [x, before)" is monotone in x, and the largest x for
    which it holds is that occurrence. About 80 ``next_after`` calls at most.
    """
    next_after = spec.next_after
    window_ms = 1000
    while True:
        low_ms = before_ms - window_ms
        found = next_after(low_ms - 1)
        if found is not None and found < before_ms:
            break
        if window_ms >= _LOOKBACK_MAX_MS:
            return None
        window_ms *= 4
    # Invariant: an occurrence lies in [low, before); none lies in [high, before).
    high_ms = before_ms
    while high_ms - low_ms > 1:
        middle_ms = (low_ms + high_ms) // 2
        found = next_after(middle_ms - 1)
        if found is not None and found < before_ms:
            low_ms = middle_ms
        else:
            high_ms = middle_ms
    return low_ms


def _retry_doc(retry: RetryPolicy) -> dict[str, Any]:
    return {
        "max_attempts": retry.max_attempts,
        "initial_s": retry.initial_s,
        "coefficient": retry.coefficient,
        "max_interval_s": retry.max_interval_s,
        "jitter": retry.jitter,
        "non_retryable": list(retry.non_retryable),
    }


def dag_definition_doc(command: DagUpsert) -> dict[str, Any]:
    """The normalised changelog form of a ``dag.upsert`` (JSON-ready, fixed key order)."""
    misfire = command.misfire
    doc: dict[str, Any] = {
        "spec": dict(command.spec),
        "misfire": {
            "policy": misfire.policy,
            "grace_s": misfire.grace_s,
            "catch_up_max": misfire.catch_up_max,
        },
        "dst": {"gap": command.dst["gap"], "fold": command.dst["fold"]},
        "spread_window_s": command.spread_window_s,
        "start": None if command.start_ms is None else format_ms(command.start_ms),
        "end": None if command.end_ms is None else format_ms(command.end_ms),
        "max_active_runs": command.max_active_runs,
        "tasks": {
            name: {
                "job": task.job.wire(),
                "after": list(task.after),
                "retry": _retry_doc(task.retry),
                "timeout_s": task.timeout_s,
            }
            for name, task in command.tasks.items()
        },
    }
    if command.deadline is not None:  # only when given: other DAGs keep their bytes
        doc["deadline"] = command.deadline.wire()
    if any(job_marks_templates(task.job) for task in command.tasks.values()):  # likewise
        doc[RENDERED_MARK] = True
    return doc


def dag_definition_bytes(command: DagUpsert) -> bytes:
    return orjson.dumps(dag_definition_doc(command))


def dag_definition(command: DagUpsert) -> DagDefinition:
    """The `DagDefinition` of a ``dag.upsert`` just decoded (its spec is compiled)."""
    return DagDefinition(
        compiled=command.compiled,
        unbounded=_unbounded(command.id, command.spec, command.dst, command.spread_window_s),
        misfire=command.misfire,
        tasks=dict(command.tasks),
        topo_order=command.topo_order,
        max_active_runs=command.max_active_runs,
        is_at="at" in command.spec,
        deadline=command.deadline,
        schedule_id=command.id,
    )


def restored_dag_definition(schedule_id: str, doc: Mapping[str, Any]) -> DagDefinition:
    """The `DagDefinition` behind a changelog ``def`` written by `dag_definition_bytes`."""
    spec = doc["spec"]
    start, end = doc["start"], doc["end"]
    compiled = compile_spec(
        spec,
        schedule_id=schedule_id,
        dst=doc["dst"],
        spread_window_s=doc["spread_window_s"],
        start_ms=None if start is None else parse_instant(start),
        end_ms=None if end is None else parse_instant(end),
    )
    tasks: dict[str, DagTask] = {}
    for name, task in doc["tasks"].items():
        retry = task["retry"]
        tasks[name] = DagTask(
            job=Job(
                task["job"]["name"],
                task["job"]["args"],
                task["job"].get("queue", DEFAULT_QUEUE),
                concurrency_of(task["job"]),
                task["job"].get("priority", DEFAULT_PRIORITY),
                rate_limit_of(task["job"]),
            ),
            after=tuple(task["after"]),
            retry=RetryPolicy(
                max_attempts=retry["max_attempts"],
                initial_s=retry["initial_s"],
                coefficient=retry["coefficient"],
                max_interval_s=retry["max_interval_s"],
                jitter=retry["jitter"],
                non_retryable=tuple(retry["non_retryable"]),
            ),
            timeout_s=task["timeout_s"],
        )
    return DagDefinition(
        compiled=compiled,
        unbounded=_unbounded(schedule_id, spec, doc["dst"], doc["spread_window_s"]),
        misfire=MisfirePolicy(**doc["misfire"]),
        tasks=tasks,
        topo_order=_topo_order(tasks),
        max_active_runs=doc["max_active_runs"],
        is_at="at" in spec,
        deadline=deadline_of(doc.get("deadline")),
        schedule_id=schedule_id,
        templates=renders_keys(doc),
    )


def _unbounded(
    schedule_id: str, spec: Mapping[str, Any], dst: Mapping[str, str], spread_window_s: int
) -> CompiledSpec:
    return compile_spec(spec, schedule_id=schedule_id, dst=dst, spread_window_s=spread_window_s)


def _topo_order(tasks: Mapping[str, DagTask]) -> tuple[str, ...]:
    # The graph was validated when the command was applied; this only re-derives
    # the order (the same one, being deterministic).
    return topological_order({name: task.after for name, task in tasks.items()})
