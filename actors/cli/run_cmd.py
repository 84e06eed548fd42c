"""`kafkron run cancel RUN_ID [--reason TEXT]`: stop a run in flight.

Sends a ``run.cancel`` command to ``{ns}.commands`` keyed by the run's schedule id.
The owning shard writes a cancel record after the run on ``{ns}.runs``; the worker
running the attempt stops it (an async job at its current ``await``, a sync job at
its next ``ctx.heartbeat()``) and writes its ``cancelled`` result with the reason,
never retried. A run waiting to retry or buffered is ended by the shard at once. A
run that already ended is reported on ``{ns}.rejected`` ("nothing to cancel").
"""

from __future__ import annotations

import argparse
from typing import Any

from actors.cli import output
from actors.cli.submit_cmd import produce
from topics.command_builders import InvalidCommand
from topics.command_builders import run_cancel as run_cancel_command
from topics.names import Settings

_EPILOG = """\
examples:
  kafkron run cancel 'invoice-nightly@2026-10-10T00:00:00.000Z'
  kafkron run cancel 'invoice-nightly@2026-10-10T00:00:00.000Z' --reason 'bad input file'
  kafkron run cancel 'nightly-billing@2026-12-01T00:00:00.000Z/charge'   # a DAG task

Then `kafkron history RUN_ID` shows the attempt ending cancelled, and
`kafkron rejected` says so if the run had already ended.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="control a run in flight (cancel it)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EPILOG,
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    cancel = actions.add_parser(
        "cancel",
        help="stop a run: its attempt ends cancelled, never retried (sends run.cancel)",
        epilog="example: kafkron run cancel 'invoice-nightly@2026-10-10T00:00:00.000Z'",
    )
    cancel.add_argument("run_id", metavar="RUN_ID", help="as shown by `kafkron history`")
    cancel.add_argument(
        "--reason",
        default=None,
        metavar="TEXT",
        help="why, for people: it becomes the result's error message",
    )
    cancel.set_defaults(func=run_cancel)


def run_cancel(args: argparse.Namespace) -> int:
    try:
        record = run_cancel_command(args.run_id, args.reason)
    except InvalidCommand as exc:
        hint = "; copy the run id from `kafkron history`" if exc.field == "run_id" else ""
        return output.fail("run cancel", f"{exc}{hint}", 2)
    return produce("run cancel", Settings.from_env(), [(record.key, record.value)])
