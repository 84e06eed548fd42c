"""`kafkron submit FILE|-`: produce commands from JSON lines (one command object a line).

Also home of `produce`, which every producing command uses: it sends with
`actors.sending.send_commands` (commands validated by the shard's own decoder
first, so a mistake exits 2 at once) and reports.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from typing import Any

from actors.cli import output
from actors.sending import SendError as SendError
from actors.sending import encode as encode
from actors.sending import send_commands as send_commands
from topics import codec
from topics.names import Settings, TopicKind

_EPILOG = """\
examples:
  kafkron submit schedules.jsonl
  echo '{"v":1,"type":"schedule.trigger","id":"invoice-nightly"}' | kafkron submit -

Each non-blank line is one command object (the README's command schema), keyed by its
"id". Every line is checked before any is sent: one bad line sends nothing and
exits 2, naming the line and the field.
"""


def produce(command: str, settings: Settings, records: Sequence[tuple[bytes, bytes]]) -> int:
    """Send and report, as every producing command does; returns the exit code."""
    try:
        asyncio.run(asyncio.wait_for(send_commands(settings, records), timeout=60))
    except SendError as exc:
        return output.fail(command, str(exc))
    except TimeoutError:
        return output.fail(
            command, f"Kafka at {settings.bootstrap} did not acknowledge within 60 s; retry"
        )
    noun = "command" if len(records) == 1 else "commands"
    print(f"sent {len(records)} {noun} to {settings.topic(TopicKind.COMMANDS)}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "submit",
        help="produce commands from a file of JSON lines",
        description="Validate and produce commands, one JSON object a line, to {ns}.commands.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE|-", help="a JSON-lines file, or - for stdin")
    parser.set_defaults(func=run)


def parse_lines(lines: Sequence[str], now_ms: int) -> tuple[list[tuple[bytes, bytes]], list[str]]:
    """Records of the valid lines, and an error per invalid line (``line N: reason``)."""
    records: list[tuple[bytes, bytes]] = []
    errors: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            body = codec.loads(line)
        except ValueError as exc:
            errors.append(f"line {number}: not JSON ({exc})")
            continue
        if not isinstance(body, dict):
            errors.append(f"line {number}: expected a JSON object, got {type(body).__name__}")
            continue
        try:
            records.append(encode(body, now_ms))
        except ValueError as exc:
            errors.append(f"line {number}: {exc}")
    return records, errors


def run(args: argparse.Namespace) -> int:
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as handle:
                text = handle.read()
    except OSError as exc:
        return output.fail("submit", f"cannot read {args.file}: {exc.strerror}", 2)
    except UnicodeDecodeError:
        return output.fail("submit", f"{args.file} is not UTF-8 text", 2)
    records, errors = parse_lines(text.splitlines(), int(time.time() * 1000))
    if errors:
        for error in errors:
            print(f"kafkron submit: {error}", file=sys.stderr)
        print("kafkron submit: nothing was sent; fix the lines above and retry", file=sys.stderr)
        return 2
    if not records:
        return output.fail("submit", f"{args.file} holds no commands", 2)
    return produce("submit", Settings.from_env(), records)
