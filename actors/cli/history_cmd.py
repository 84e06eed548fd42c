"""`kafkron history [ID] [--last N] [--status S] [--since T] [--json]`: what ran, and did it work.

Reads the recorder's SQLite database (``--db``, env ``KAFKRON_HISTORY_DB``, default
``.kafkron/history.db``); `kafkron recorder` must be running (or have run) for it
to hold anything.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import orjson

from actors.cli import output
from actors.cli.db_arg import add_db_argument
from actors.history import default_db_path
from actors.history.store import STATUS_RANK, AttemptView, HistoryError, HistoryStore, RunView
from actors.timespec import SpecError, parse_duration_s
from actors.views.dag_view import counts_text
from topics.timefmt import parse_instant

_EPILOG = """\
examples:
  kafkron history                         # latest run of every schedule, failures first
  kafkron history invoice-nightly         # its last 20 runs, newest first
  kafkron history invoice-nightly --last 5 --json
  kafkron history --status dead_lettered --since 1d
  kafkron history 'invoice-nightly@2026-10-10T00:00:00.000Z'   # one run, attempt by attempt
  kafkron history 'nightly-billing@2026-10-10T00:00:00.000Z'   # a DAG run: its own results
                                                               # (counts of task states), its tasks

Columns: scheduled (the occurrence), fired/started/finished, duration (of the latest
attempt), lateness (fired minus scheduled), status, attempts, worker, error; and,
when a run is a target's, target: where it goes and what it did (→ kafka:TOPIC[PARTITION],
→ POST URL · HTTP 200 in 41 ms; in --json "target" and "delivered").
Statuses: succeeded, failed, timed_out, cancelled, skipped, missed, upstream_failed,
running (fired, no result yet), dead_lettered (retries exhausted, see {ns}.dlq).
"""

DEFAULT_LAST = 20


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "history",
        help="show what ran, when, for how long, and whether it worked",
        description="Show runs recorded by `kafkron recorder`.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "id", nargs="?", help="a schedule id, or a run id (schedule@instant) for its attempts"
    )
    parser.add_argument(
        "--last",
        type=int,
        default=None,
        metavar="N",
        help=f"at most N runs (default {DEFAULT_LAST})",
    )
    parser.add_argument(
        "--status",
        choices=sorted(STATUS_RANK),
        default=None,
        help="only runs that ended (or stand) in this status",
    )
    parser.add_argument(
        "--since",
        default=None,
        metavar="T",
        help="only runs scheduled at or after T: an RFC 3339 instant or a duration ago (1h, 2d)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    add_db_argument(parser)
    parser.set_defaults(func=run)


def parse_since(text: str, now_ms: int) -> int:
    """An RFC 3339 instant, or a duration before ``now_ms``; ``ValueError`` otherwise."""
    try:
        return parse_instant(text)
    except ValueError:
        pass
    try:
        return now_ms - parse_duration_s(text) * 1000
    except SpecError:
        raise ValueError(
            f"--since {text!r} is neither an instant (2026-10-10T00:00:00Z) nor a duration (1h, 2d)"
        ) from None


def run_json(view: RunView) -> dict[str, Any]:
    return {
        "run_id": view.run_id,
        "schedule_id": view.schedule_id,
        "task": view.task,
        "job": view.job_name,
        "scheduled_at": _opt_instant(view.scheduled_ms),
        "fired_at": _opt_instant(view.fired_ms),
        "started_at": _opt_instant(view.started_ms),
        "finished_at": _opt_instant(view.finished_ms),
        "duration_ms": view.duration_ms,
        "lateness_ms": view.lateness_ms,
        "status": view.status,
        "attempts": view.attempts,
        "worker": view.worker,
        "error": _error(view.error_type, view.error_message),
        "dead_at": _opt_instant(view.dead_at_ms),
        "covers": _covers(view.scheduled_ms, view.covers_to_ms, view.covers_count),
        "target": view.job_target,
        "delivered": _loads(view.target),
    }


def _loads(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def attempt_json(view: AttemptView) -> dict[str, Any]:
    duration_ms = (
        view.finished_ms - view.started_ms
        if view.finished_ms is not None and view.started_ms is not None
        else None
    )
    return {
        "run_id": view.run_id,
        "attempt": view.attempt,
        "scheduled_at": _opt_instant(view.scheduled_ms),
        "fired_at": _opt_instant(view.fired_ms),
        "started_at": _opt_instant(view.started_ms),
        "finished_at": _opt_instant(view.finished_ms),
        "duration_ms": duration_ms,
        "status": view.status,
        "worker": view.worker,
        "error": _error(view.error_type, view.error_message),
        "progress": _progress(view),
        "covers": _covers(view.scheduled_ms, view.covers_to_ms, view.covers_count),
        "counts": None if view.counts is None else orjson.loads(view.counts),
        "delivered": _loads(view.target),
    }


def _counts_text(view: AttemptView) -> str:
    """A DAG run's own result: ``3 succeeded, 1 failed``."""
    if view.counts is None:
        return "-"
    counts: dict[str, int] = orjson.loads(view.counts)
    return counts_text(counts)


def _progress(view: AttemptView) -> dict[str, Any] | None:
    """The latest ``ctx.heartbeat(details)`` the attempt published, with its time."""
    if view.progress is None:
        return None
    return {"details": orjson.loads(view.progress), "at": _opt_instant(view.progress_ms)}


def _progress_text(view: AttemptView) -> str:
    if view.progress is None:
        return "-"
    text = view.progress if len(view.progress) <= 60 else view.progress[:57] + "..."
    return f"{text} at {output.short_instant(view.progress_ms)}"


def _covers(from_ms: int | None, to_ms: int | None, count: int | None) -> dict[str, Any] | None:
    """A folded missed/skipped run's range, as the result's ``covers`` names it."""
    if to_ms is None or count is None:
        return None
    return {"from": _opt_instant(from_ms), "to": _opt_instant(to_ms), "count": count}


def _opt_instant(value_ms: int | None) -> str | None:
    return None if value_ms is None else output.instant(value_ms)


def _error(kind: str | None, message: str | None) -> dict[str, str] | None:
    if kind is None and message is None:
        return None
    return {"type": kind or "", "message": message or ""}


def _error_text(kind: str | None, message: str | None) -> str:
    if kind is None and message is None:
        return ""
    return f"{kind}: {message}" if kind and message else (kind or message or "")


# The tables of runs: of schedules (`kafkron history [ID]`) and of a DAG run's tasks.
_RUN_COLUMNS = (
    "schedule",
    "scheduled",
    "started",
    "finished",
    "duration",
    "lateness",
    "status",
    "attempts",
    "worker",
    "error",
)
_TASK_COLUMNS = ("task", "started", "finished", "duration", "status", "attempts", "worker", "error")


def _run_row(view: RunView, columns: tuple[str, ...]) -> tuple[str, ...]:
    """The cells of `view` under `columns`: one place says how a run is shown in a table."""
    cells = {
        "schedule": view.schedule_id + (f"/{view.task}" if view.task else ""),
        "task": view.task or "-",
        "scheduled": output.short_instant(view.scheduled_ms),
        "started": output.short_instant(view.started_ms),
        "finished": output.short_instant(view.finished_ms),
        "duration": output.duration(view.duration_ms),
        "lateness": output.duration(view.lateness_ms),
        "status": view.status,
        "attempts": str(view.attempts),
        "worker": view.worker or "-",
        "error": _error_text(view.error_type, view.error_message),
        "target": output.target_cell(view.job_target, view.target),
    }
    return tuple(cells[column] for column in columns)


def _with_targets(columns: tuple[str, ...], views: list[RunView]) -> tuple[str, ...]:
    """``columns`` and, when any run is a target's, its target (before the error)."""
    if not any(v.job_target or v.target for v in views):
        return columns
    return (*columns[:-1], "target", columns[-1])


def run(args: argparse.Namespace) -> int:
    if args.last is not None and args.last < 1:
        return output.fail("history", "--last must be at least 1", 2)
    since_ms: int | None = None
    if args.since is not None:
        try:
            since_ms = parse_since(args.since, int(time.time() * 1000))
        except ValueError as exc:
            return output.fail("history", str(exc), 2)
    db = args.db or default_db_path()
    try:
        return asyncio.run(_show(args, db, since_ms))
    except HistoryError as exc:
        return output.fail("history", str(exc))


async def _show(args: argparse.Namespace, db: Any, since_ms: int | None) -> int:
    async with await HistoryStore.open(db, readonly=True) as store:
        if args.id and "@" in args.id:
            return await _show_run(args, store)
        filtered = args.status is not None or since_ms is not None or args.last is not None
        if args.id is None and not filtered:
            views = await store.latest_per_schedule()
            title = "latest run of every schedule, failures first"
        else:
            views = await store.runs(
                schedule_id=args.id,
                status=args.status,
                since_ms=since_ms,
                limit=args.last or DEFAULT_LAST,
            )
            title = f"runs of {args.id}" if args.id else "runs"
    if args.json:
        output.print_json([run_json(v) for v in views])
        return 0
    if not views:
        what = f"schedule {args.id!r}" if args.id else "any schedule"
        print(f"no runs of {what} in {db} yet (is `kafkron recorder` running?)")
        return 0
    columns = _with_targets(_RUN_COLUMNS, views)
    output.print_table(
        columns,
        [_run_row(v, columns) for v in views],
        title=title,
        status_column="status",
    )
    return 0


async def _show_run(args: argparse.Namespace, store: HistoryStore) -> int:
    view = await store.run(args.id)
    # A DAG run (no task in its id) has task runs "{run_id}/{task}"; its own results
    # (one per end, with counts) may not be recorded yet while they run.
    tasks = await store.dag_tasks(args.id) if "/" not in args.id else []
    if view is None and not tasks:
        return output.fail("history", f"no run {args.id!r} recorded; `kafkron history` lists runs")
    attempts = [] if view is None else await store.attempts(args.id)
    if args.json:
        doc: dict[str, Any] = {} if view is None else run_json(view)
        doc["attempt_history"] = [attempt_json(a) for a in attempts]
        if tasks:
            doc["tasks"] = [run_json(t) for t in tasks]
        output.print_json(doc)
        return 0
    is_dag = bool(tasks) or any(a.counts is not None for a in attempts)
    if view is not None:
        columns = ["attempt", "fired", "started", "finished", "duration", "status", "worker"]
        targeted = any(a.target for a in attempts)
        columns += ["target"] if targeted else []
        columns += ["error", "tasks" if is_dag else "progress"]
        output.print_table(
            columns,
            [
                (
                    str(a.attempt),
                    output.short_instant(a.fired_ms),
                    output.short_instant(a.started_ms),
                    output.short_instant(a.finished_ms),
                    output.duration(attempt_json(a)["duration_ms"]),
                    a.status,
                    a.worker or "-",
                    *([output.delivered_text(_loads(a.target))] if targeted else []),
                    _error_text(a.error_type, a.error_message),
                    _counts_text(a) if is_dag else _progress_text(a),
                )
                for a in attempts
            ],
            title=(
                f"{view.run_id}: DAG run {view.status} after {view.attempts} end(s)"
                if is_dag
                else f"{view.run_id}: {view.status} after {view.attempts} attempt(s)"
                + (f" (→ {view.job_target})" if view.job_target else "")
            ),
            status_column="status",
        )
    else:
        print(f"{args.id}: DAG run without a result of its own yet (still running?)")
    if tasks:
        task_columns = _with_targets(_TASK_COLUMNS, tasks)
        output.print_table(
            task_columns,
            [_run_row(t, task_columns) for t in tasks],
            title=f"tasks of {args.id}",
            status_column="status",
        )
    return 0
