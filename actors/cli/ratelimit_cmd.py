"""`kafkron ratelimit pause KEY [--until T] [--note TEXT] | resume KEY | ls`: pause the
runs of a rate-limit key on every worker, and see which keys are paused.

``pause`` sends a ``ratelimit.pause`` (``--until`` an RFC 3339 instant or a duration
from now, as for `kafkron schedule pause`; without it, until ``resume``), ``resume`` a
``ratelimit.resume``: commands like every other, judged by the shard that reads them
(refused to ``{ns}.rejected`` with a reason) and written by it to ``{ns}.ratelimits``,
which every worker reads whole. ``ls`` reads that topic. docs/DESIGN.md §8.5.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from actors.cli import output
from actors.cli.pause_args import until_of, user_name
from actors.cli.submit_cmd import produce
from actors.views.ratelimits import read_pauses
from actors.views.tail import TailError
from topics.command_builders import CommandRecord, InvalidCommand
from topics.names import Settings
from topics.ratelimit_builders import ratelimit_pause, ratelimit_resume
from topics.timefmt import format_ms

_EPILOG = """\
examples:
  kafkron ratelimit pause payments --until 30m --note 'provider maintenance'
  kafkron ratelimit pause payments --until 2026-12-04T15:00:00Z
  kafkron ratelimit resume payments
  kafkron ratelimit ls

A job names its rate limit:
  kafkron schedule add charge --every 1m --job billing.charge \\
      --rate-key payments --rate-per-s 10 --rate-burst 5
Runs of a paused key wait on their worker (kafkron ls says so); their deadlines apply.
"""

_FLAGS = {"until": "--until", "note": "--note", "by": "--by", "id": "KEY"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "ratelimit",
        help="pause and resume the runs of a rate-limit key",
        description="Rate-limit pauses in {ns}.ratelimits, read by every worker.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="ratelimit_action", metavar="ACTION")
    pause = actions.add_parser("pause", help="hold the key's runs (ratelimit.pause)")
    pause.add_argument("key", metavar="KEY")
    pause.add_argument(
        "--until",
        metavar="T",
        help="resume by itself then: an RFC 3339 instant or a duration from now (2h, 30m)",
    )
    pause.add_argument("--note", metavar="TEXT", help="why (shown by ratelimit ls and ls)")
    pause.add_argument("--by", metavar="NAME", help="who pauses it (default: your user name)")
    pause.add_argument("--print", action="store_true", help="print the command, send nothing")
    pause.set_defaults(func=run_pause)
    resume = actions.add_parser("resume", help="let the key's runs start (ratelimit.resume)")
    resume.add_argument("key", metavar="KEY")
    resume.add_argument("--print", action="store_true", help="print the command, send nothing")
    resume.set_defaults(func=run_resume)
    ls = actions.add_parser("ls", help="the paused keys")
    ls.add_argument("--json", action="store_true", help="print JSON for scripts")
    ls.set_defaults(func=run_ls)
    parser.set_defaults(func=output.usage(parser))


def build_pause(args: argparse.Namespace, now_ms: int | None = None) -> CommandRecord:
    """The ``ratelimit.pause`` of ``args``; `InvalidCommand` naming the flag at fault."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    try:
        return ratelimit_pause(
            args.key,
            until=until_of(args.until),
            note=args.note,
            by=args.by if args.by is not None else user_name(),
            now_ms=now_ms,
        )
    except InvalidCommand as error:
        flag = _FLAGS.get(error.field)
        raise InvalidCommand(f"{flag}: {error.reason}" if flag else error.reason) from None


def _send(what: str, build: Any, print_only: bool) -> int:
    try:
        record = build()
    except (InvalidCommand, ValueError) as exc:
        return output.fail(what, str(exc), 2)
    if print_only:
        print(record.value.decode())
        return 0
    return produce(what, Settings.from_env(), [(record.key, record.value)])


def run_pause(args: argparse.Namespace) -> int:
    return _send("ratelimit pause", lambda: build_pause(args), args.print)


def run_resume(args: argparse.Namespace) -> int:
    def build() -> CommandRecord:
        try:
            return ratelimit_resume(args.key)
        except InvalidCommand as error:
            flag = _FLAGS.get(error.field)
            raise InvalidCommand(f"{flag}: {error.reason}" if flag else error.reason) from None

    return _send("ratelimit resume", build, args.print)


def run_ls(args: argparse.Namespace) -> int:
    try:
        pauses = asyncio.run(read_pauses(Settings.from_env()))
    except TailError as exc:
        return output.fail("ratelimit ls", str(exc))
    now_ms = int(time.time() * 1000)
    if args.json:
        output.print_json(
            {
                "paused": {
                    key: {**pause.json(), "holds": pause.holds(now_ms)}
                    for key, pause in sorted(pauses.items())
                }
            }
        )
        return 0
    if not pauses:
        print("no rate-limit key is paused; pause one with `kafkron ratelimit pause KEY`")
        return 0
    rows = [
        [
            key,
            ("until resumed" if pause.until_ms is None else format_ms(pause.until_ms))
            + ("" if pause.holds(now_ms) else " (ended)"),
            pause.note or "",
            pause.by or "",
            format_ms(pause.at_ms),
        ]
        for key, pause in sorted(pauses.items())
    ]
    output.print_table(["key", "paused until", "note", "by", "since"], rows)
    return 0
