"""`kafkron schedule pause ID [--note TEXT] [--until T] [--after-current] [--by NAME]`.

``--until`` takes an RFC 3339 instant, or a duration (``2h``, ``30m``, ``1h30m``)
counted from now by this machine's clock: the command carries an instant, so the
shard never guesses when "two hours" began. ``--by`` defaults to the operating
system's user name, so `kafkron ls` and the console say who paused it. The command
is built by the one builder of commands (`topics.command_builders.schedule_pause`),
so the shard's own rules judge it before anything is sent.
"""

from __future__ import annotations

import argparse
import getpass
import time
from datetime import timedelta

from actors.timespec import SpecError, parse_duration_s
from topics.command_builders import CommandRecord, InvalidCommand, schedule_pause
from topics.command_types import SchedulePause
from topics.timefmt import format_ms

_FLAGS = {"note": "--note", "until": "--until", "by": "--by"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--note", metavar="TEXT", help="why it is paused (shown by kafkron ls)")
    parser.add_argument(
        "--until",
        metavar="T",
        help="resume by itself then: an RFC 3339 instant or a duration from now (2h, 30m)",
    )
    parser.add_argument(
        "--after-current",
        action="store_true",
        help="pause once the run in flight (if any) has ended",
    )
    parser.add_argument("--by", metavar="NAME", help="who pauses it (default: your user name)")


def user_name() -> str | None:
    """The operating system's user name, or None where there is none to read."""
    try:
        return getpass.getuser() or None
    except (OSError, KeyError):  # no USER/LOGNAME and no passwd entry (a bare container)
        return None


def until_of(text: str | None) -> str | timedelta | None:
    """``--until``: a duration (``2h``) as a `timedelta` from now, else the instant as given."""
    if text is None:
        return None
    try:
        return timedelta(seconds=parse_duration_s(text))
    except SpecError:
        return text  # an instant, judged by the shard's decoder (naming until)


def build_pause(args: argparse.Namespace, now_ms: int | None = None) -> CommandRecord:
    """The ``schedule.pause`` of ``args``; `InvalidCommand` naming the flag at fault
    (an ``--until`` already past included: the shard would reject it)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    try:
        record = schedule_pause(
            args.id,
            note=args.note,
            until=until_of(args.until),
            after_current=True if args.after_current else None,
            by=args.by if args.by is not None else user_name(),
            now_ms=now_ms,
        )
    except InvalidCommand as error:
        flag = _FLAGS.get(error.field)
        more = " (or a duration from now, such as 2h or 30m)" if flag == "--until" else ""
        raise InvalidCommand(f"{flag}: {error.reason}{more}" if flag else error.reason) from None
    until_ms = record.decoded.until_ms if isinstance(record.decoded, SchedulePause) else None
    if until_ms is not None and until_ms <= now_ms:
        raise InvalidCommand(
            f"--until: {format_ms(until_ms)} is not in the future (now {format_ms(now_ms)})"
        )
    return record
