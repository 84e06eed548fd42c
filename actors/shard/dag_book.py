"""The DAG run book: a DAG's runs and each of their tasks, typed, and their changelog JSON.

A DAG's `ScheduleState.dag` is a `DagBook`; `dag_run` moves it, `dag_shard` turns
the moves into records. It is written into the schedule's changelog record as
``"dag"`` (a public format, docs/DESIGN.md §2.7), byte for byte as the run book
of plain dicts that came before it wrote it
(``tests/dag/test_dag_changelog.py`` pins those bytes)::

    {"runs": {                                     # oldest first, ended runs in end order
       "nightly-billing@2026-10-10T00:00:00.000Z": {
          "scheduled": "2026-10-10T00:00:00.000Z",
          "logical_date": "2026-10-09T00:00:00.000Z",
          "data_interval": ["2026-10-09T00:00:00.000Z", "2026-10-10T00:00:00.000Z"],
          "state": "running",                     # running | succeeded | failed | cancelled
          "started": "2026-10-10T00:00:00.412Z",  # its first fire (absent in old records)
          "ended": null,                          # when it reached its final state
          "tasks": {
             "usage-rollup":    {"state": "succeeded", "attempt": 1},
             "fx-rates":        {"state": "running", "attempt": 1},
             "invoice-nightly": {"state": "waiting", "attempt": 0, "in_degree": 1},
             "send-invoices":   {"state": "waiting", "attempt": 0, "in_degree": 1}},
          "ends": 1,                              # run-level results written (once ended)
          "cancel": "why",                        # run.cancel's reason (only once asked)
          "backfill": true}}}                     # started by a backfill (only then)

``in_degree`` is written for a waiting task only; ``ends`` once the run has
ended (a backfilled run's count starts at the attempt its occurrence already used,
docs/DESIGN.md §6.9); ``cancel`` while a cancel is asked (a ``dag.clear`` forgets
it). Those two keys come in the order they were first set, which the state tells
(see `_ends_before_cancel`), so nothing but the state is kept. ``backfill`` is last,
and only on a run a backfill started.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from topics.timefmt import format_ms, parse_instant
from topics.vocabulary import DagRunState, TaskState


@dataclass(slots=True)
class TaskEntry:
    """One task of one DAG run."""

    state: TaskState
    attempt: int = 0
    """The last attempt number the task used (0: none); it starts at the next."""
    in_degree: int = 0
    """While ``waiting``: how many of its dependencies have not succeeded."""


@dataclass(slots=True)
class DagRun:
    """One run of a DAG: its dates, its state and its tasks (in topological order,
    then any task a re-upsert added)."""

    scheduled_ms: int
    logical_date_ms: int
    data_interval: tuple[int, int]
    """``[start, end)`` in ms, Airflow's convention (`DagDefinition.data_interval`)."""
    state: DagRunState
    started_ms: int | None
    """Its first fire (None in records written before it was kept)."""
    ended_ms: int | None
    tasks: dict[str, TaskEntry]
    cancel: str | None = None
    """``run.cancel``'s reason, once asked (until a ``dag.clear`` runs it again)."""
    ends: int = 0
    """How many run-level results it has had: the attempt number of the last."""
    backfill: bool = False
    """Started by a backfill: it does not count against ``max_active_runs``."""


@dataclass(slots=True)
class DagBook:
    """A DAG's runs by run id: every running run and the latest ended ones."""

    runs: dict[str, DagRun] = field(default_factory=dict)


# --- the changelog JSON --------------------------------------------------------------


def book_json(book: DagBook) -> dict[str, Any]:
    """The ``"dag"`` value of the changelog record (orjson writes it)."""
    return {"runs": {run_id: _run_json(run) for run_id, run in book.runs.items()}}


def _run_json(run: DagRun) -> dict[str, Any]:
    start, end = run.data_interval
    doc: dict[str, Any] = {
        "scheduled": format_ms(run.scheduled_ms),
        "logical_date": format_ms(run.logical_date_ms),
        "data_interval": [format_ms(start), format_ms(end)],
        "state": run.state,
    }
    if run.started_ms is not None:
        doc["started"] = format_ms(run.started_ms)
    doc["ended"] = None if run.ended_ms is None else format_ms(run.ended_ms)
    doc["tasks"] = {name: _task_json(entry) for name, entry in run.tasks.items()}
    ends_first = _ends_before_cancel(run)
    if run.cancel is not None and not ends_first:
        doc["cancel"] = run.cancel
    if run.ends:
        doc["ends"] = run.ends
    if run.cancel is not None and ends_first:
        doc["cancel"] = run.cancel
    if run.backfill:
        doc["backfill"] = True
    return doc


def _task_json(entry: TaskEntry) -> dict[str, Any]:
    if entry.state == TaskState.WAITING:
        return {"state": entry.state, "attempt": entry.attempt, "in_degree": entry.in_degree}
    return {"state": entry.state, "attempt": entry.attempt}


def _ends_before_cancel(run: DagRun) -> bool:
    """Whether ``ends`` was set before ``cancel`` (each key keeps its first place).

    ``cancel`` is set while the run is running and kept until a clear; ``ends``
    grows by one at each end. A running run asked to cancel after an end has
    ``ends`` first; an ended run with ``cancel`` ended because of it, at its last
    end, so ``cancel`` came first only if that end was its first.
    """
    if run.cancel is None or run.ends == 0:
        return False
    return run.state == DagRunState.RUNNING or run.ends > 1


def book_of(doc: Any) -> DagBook:
    """A `DagBook` from the ``"dag"`` value of a changelog record.

    Raises ``ValueError``, ``KeyError`` or ``TypeError`` on a value this version
    did not write (as `decode_schedule` does for the rest of the record).
    """
    if type(doc) is not dict:
        raise TypeError(f"dag: expected an object, got {type(doc).__name__}")
    runs = doc["runs"]
    if type(runs) is not dict:
        raise TypeError(f"dag.runs: expected an object, got {type(runs).__name__}")
    book = DagBook()
    for run_id, run in runs.items():
        try:
            book.runs[run_id] = _run_of(run)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            what = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"dag.runs[{run_id!r}]: {what}") from None
    return book


def _run_of(doc: dict[str, Any]) -> DagRun:
    start, end = doc["data_interval"]
    started = doc.get("started")
    ended = doc["ended"]
    cancel = doc.get("cancel")
    return DagRun(
        scheduled_ms=parse_instant(doc["scheduled"]),
        logical_date_ms=parse_instant(doc["logical_date"]),
        data_interval=(parse_instant(start), parse_instant(end)),
        state=DagRunState(doc["state"]),
        started_ms=None if started is None else parse_instant(started),
        ended_ms=None if ended is None else parse_instant(ended),
        tasks={name: _task_of(entry) for name, entry in doc["tasks"].items()},
        cancel=None if cancel is None else str(cancel),
        ends=int(doc.get("ends", 0)),
        backfill=doc.get("backfill") is True,
    )


def _task_of(doc: dict[str, Any]) -> TaskEntry:
    return TaskEntry(TaskState(doc["state"]), int(doc["attempt"]), int(doc.get("in_degree", 0)))
