"""`kafkron alerts [ID...] [--open] [--since T] [--json]`: the deadline alerts.

From the history database's ``alerts`` table (`actors.history.alerts`: the recorder
copies ``{ns}.alerts`` there), not the topic: ``deadline_missed`` and
``deadline_recovered`` records oldest first, or with ``--open`` the ``deadline_missed``
ones no ``deadline_recovered`` closed yet, latest first, each with how late its run is
by now. Exit 0 either way: an alert is news, not a failure of the command (the exit
code of `kafkron audit` and `kafkron slo` is for gaps).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from actors.cli import output
from actors.cli.db_arg import add_db_argument
from actors.cli.history_cmd import parse_since
from actors.history import default_db_path
from actors.history.store import HistoryError, HistoryStore
from topics.alerts import Alert, AlertType

_EPILOG = """\
examples:
  kafkron alerts --open                 # what is late now, latest first
  kafkron alerts etl --since 1d         # one schedule's alerts of the last day
  kafkron alerts --open --json          # for a script or a pager
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "alerts",
        help="deadline alerts (deadline_missed / deadline_recovered), from the history",
        description="The deadline alerts the recorder kept from {ns}.alerts.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("ids", nargs="*", metavar="ID", help="schedule ids (default: every one)")
    parser.add_argument(
        "--open",
        action="store_true",
        help="only the deadline_missed alerts not closed by a deadline_recovered yet",
    )
    parser.add_argument(
        "--since", metavar="T", help="decided at or after T: an RFC 3339 instant or a duration ago"
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    add_db_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    now_ms = int(time.time() * 1000)
    since_ms = None
    if args.since is not None:
        try:
            since_ms = parse_since(args.since, now_ms)
        except ValueError as exc:
            return output.fail("alerts", str(exc), 2)
    db = args.db or default_db_path()
    try:
        found = asyncio.run(_read(db, args.open, list(args.ids), since_ms))
    except HistoryError as exc:
        return output.fail("alerts", str(exc))
    if args.json:
        output.print_json([alert_json(a, now_ms if args.open else None) for a in found])
        return 0
    if not found:
        what = "open alerts" if args.open else "alerts"
        print(f"no {what} in {db} (is `kafkron recorder` running?)")
        return 0
    columns = ["at", "type", "deadline", "run", "due", "late by" + (" now" if args.open else "")]
    rows = [
        (
            output.instant(a.at_ms),
            a.type.value,
            a.deadline.value,
            a.run_id,
            output.instant(a.due_ms),
            output.duration(now_ms - a.due_ms if args.open else a.late_by_ms),
        )
        for a in found
    ]
    title = "open deadline alerts, latest first" if args.open else "deadline alerts"
    output.print_table(columns, rows, title=title)
    return 0


async def _read(db: Any, open_only: bool, ids: list[str], since_ms: int | None) -> list[Alert]:
    async with await HistoryStore.open(db, readonly=True) as store:
        return await store.alerts(open_only=open_only, ids=ids, since_ms=since_ms)


def alert_json(alert: Alert, now_ms: int | None) -> dict[str, Any]:
    """An alert as the topic writes it, plus ``late_now_ms`` for an open one."""
    found: dict[str, Any] = {
        "type": alert.type.value,
        "deadline": alert.deadline.value,
        "run_id": alert.run_id,
        "schedule_id": alert.schedule_id,
        "task": alert.task,
        "scheduled_at": output.instant(alert.scheduled_ms),
        "due_at": output.instant(alert.due_ms),
        "attempt": alert.attempt,
        "late_by_ms": alert.late_by_ms,
        "observed_at": None if alert.seen_ms is None else output.instant(alert.seen_ms),
        "at": output.instant(alert.at_ms),
    }
    if now_ms is not None and alert.type is AlertType.MISSED:
        found["late_now_ms"] = now_ms - alert.due_ms
    return found
