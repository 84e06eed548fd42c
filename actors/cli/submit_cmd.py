"""`kafkron submit FILE|-`: produce commands from JSON lines (one command object a line).

Also home of `send_commands`, which `kafkron schedule` uses too: every command is
validated here with the shard's own decoder first, so a person sees a mistake at
once (exit 2) instead of finding it later in ``{ns}.rejected``. The shard still
validates everything it reads; this is a courtesy, not the guard.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from actors.cli import output
from topics import codec
from topics.commands import Rejection, decode_command
from topics.names import Settings, TopicKind

_EPILOG = """\
examples:
  kafkron submit schedules.jsonl
  echo '{"v":1,"type":"schedule.trigger","id":"invoice-nightly"}' | kafkron submit -

Each non-blank line is one command object (DESIGN: the command schema), keyed by its
"id". Every line is checked before any is sent: one bad line sends nothing and
exits 2, naming the line and the field.
"""


class SendError(Exception):
    """Kafka did not take the commands; the message says what to do."""


def encode(command: Mapping[str, Any], now_ms: int) -> tuple[bytes, bytes]:
    """(key, value) of a command object; ``ValueError`` with the shard's reason if invalid."""
    schedule_id = command.get("id")
    if not isinstance(schedule_id, str) or not schedule_id:
        raise ValueError(
            'id: missing; every command names its schedule, as "id": "invoice-nightly"'
        )
    key = schedule_id.encode("utf-8")
    value = codec.dumps(command)
    decoded = decode_command(key, value, now_ms)
    if isinstance(decoded, Rejection):
        raise ValueError(decoded.reason)
    return key, value


async def send_commands(settings: Settings, records: Sequence[tuple[bytes, bytes]]) -> None:
    """Produce ``records`` (key, value) to ``{ns}.commands`` and wait for every ack."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap,
        acks="all",
        enable_idempotence=True,
        client_id=f"{settings.namespace}-cli",
    )
    try:
        await producer.start()
    except KafkaError as exc:
        await producer.stop()
        raise SendError(
            f"cannot reach Kafka at {settings.bootstrap} ({exc}); start it with "
            "`kafkron broker start` or set KAFKRON_BOOTSTRAP"
        ) from None
    topic = settings.topic(TopicKind.COMMANDS)
    try:
        pending = [await producer.send(topic, key=key, value=value) for key, value in records]
        for future in pending:
            await future
    except KafkaError as exc:
        raise SendError(
            f"sending to {topic} failed ({exc}); check that the topic exists "
            f"(`kafkron topics check`) and retry"
        ) from None
    finally:
        await producer.stop()


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
