"""`kafkron dlq list [--json]` and `kafkron dlq replay RUN_ID`: the dead-letter topic.

A run that failed every attempt its retry policy allowed (or failed with a
non-retryable error) lands in ``{ns}.dlq`` with its last error and the history of
its attempts. ``list`` reads that topic (read_committed, no group); ``replay`` sends
a ``dlq.replay`` command to ``{ns}.commands`` keyed by the schedule id, and the
owning shard runs the dead run again with a fresh retry budget.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from actors.cli import output
from actors.cli.submit_cmd import produce
from actors.views.tail import TailError, read_to_end
from topics import messages
from topics.command_builders import InvalidCommand, dlq_replay
from topics.names import Settings, TopicKind

_EPILOG = """\
examples:
  kafkron dlq list                         # dead runs, newest first
  kafkron dlq list --json
  kafkron dlq replay 'invoice-nightly@2026-10-10T00:00:00.000Z'

Fix what made the run fail first (deploy the fix, top up the account), then replay:
the run keeps its run id, so idempotency keys still recognise its earlier effects.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dlq",
        help="list dead-lettered runs, replay one",
        description="The dead-letter topic {ns}.dlq: runs that exhausted their retries.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="dlq_action", metavar="ACTION")
    listing = actions.add_parser(
        "list",
        help="dead runs with their last error, newest first",
        epilog="example: kafkron dlq list --last 5 --json",
    )
    listing.add_argument("--json", action="store_true", help="print JSON for scripts")
    listing.add_argument("--last", type=int, default=50, metavar="N", help="at most N (default 50)")
    listing.set_defaults(func=run_list)
    replay = actions.add_parser(
        "replay",
        help="run a dead run again (sends a dlq.replay command)",
        epilog="example: kafkron dlq replay 'invoice-nightly@2026-10-10T00:00:00.000Z'",
    )
    replay.add_argument("run_id", metavar="RUN_ID", help="as shown by `kafkron dlq list`")
    replay.add_argument(
        "--no-check",
        action="store_true",
        help="send without first finding the run in the dlq topic",
    )
    replay.set_defaults(func=run_replay)
    parser.set_defaults(func=output.usage(parser))


async def dead_letters(settings: Settings) -> list[messages.DeadLetter]:
    """Every readable dead letter of the namespace, newest first."""
    records = await read_to_end(settings, settings.topic(TopicKind.DLQ))
    letters = []
    for record in records:
        if record.value is None:
            continue
        try:
            letters.append(messages.parse_dlq(record.value))
        except ValueError:
            continue  # not ours to judge here; `kafkron history` shows the raw record
    letters.sort(key=lambda d: d.dead_at_ms, reverse=True)
    return letters


def _target(letter: messages.DeadLetter) -> dict[str, Any] | None:
    """A dead target's target (``{"kafka": {...}}``): the carrier job's args name it."""
    return output.carrier_target(letter.job.name, letter.job.args)


def _job_cell(row: dict[str, Any]) -> str:
    target = output.target_text(row["target"])
    return f"→ {target}" if target is not None else output.job_text(row["job"])


def _row(letter: messages.DeadLetter) -> dict[str, Any]:
    error = letter.last_error or {}
    return {
        "dead_at": output.instant(letter.dead_at_ms),
        "run_id": letter.run_id,
        "schedule_id": letter.schedule_id,
        "task": letter.task,
        "job": None if _target(letter) else letter.job.name,
        "target": _target(letter),
        "attempts": len(letter.attempts),
        "error_type": error.get("type"),
        "error": error.get("message"),
        "attempt_history": [dict(a) for a in letter.attempts],
    }


def run_list(args: argparse.Namespace) -> int:
    if args.last < 1:
        return output.fail("dlq list", "--last must be at least 1", 2)
    settings = Settings.from_env()
    try:
        letters = asyncio.run(dead_letters(settings))
    except TailError as exc:
        return output.fail("dlq list", str(exc))
    rows = [_row(letter) for letter in letters[: args.last]]
    if args.json:
        output.print_json(rows)
        return 0
    if not rows:
        print(f"no dead-lettered runs in {settings.topic(TopicKind.DLQ)}")
        return 0
    output.print_table(
        ["dead at", "run id", "job", "attempts", "last error"],
        [
            [
                r["dead_at"],
                r["run_id"],
                _job_cell(r),
                str(r["attempts"]),
                f"{r['error_type']}: {r['error']}" if r["error_type"] else "-",
            ]
            for r in rows
        ],
    )
    return 0


def run_replay(args: argparse.Namespace) -> int:
    try:
        messages.parse_run_id(args.run_id)
    except ValueError as exc:
        return output.fail("dlq replay", f"{exc}; copy the run id from `kafkron dlq list`", 2)
    settings = Settings.from_env()
    if not args.no_check:
        try:
            letters = asyncio.run(dead_letters(settings))
        except TailError as exc:
            return output.fail("dlq replay", str(exc))
        if not any(letter.run_id == args.run_id for letter in letters):
            return output.fail(
                "dlq replay",
                f"run {args.run_id!r} is not in {settings.topic(TopicKind.DLQ)}; "
                "`kafkron dlq list` shows the dead runs",
            )
    try:
        record = dlq_replay(args.run_id)
    except InvalidCommand as exc:
        return output.fail("dlq replay", str(exc), 2)
    return produce("dlq replay", settings, [(record.key, record.value)])
