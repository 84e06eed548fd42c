"""`kafkron rejected [--last N] [--json]`: commands the shards refused, and why.

Reads ``{ns}.rejected`` directly (read_committed), so it answers even when no
recorder runs: produce a command with kcat, then ask here what was wrong with it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
from typing import Any

from actors.cli import output
from actors.views.tail import TailError, read_to_end
from topics import messages
from topics.names import Settings, TopicKind

_EPILOG = """\
examples:
  kafkron rejected                        # the latest rejections, newest first
  kafkron rejected --last 5 --json

Each row: when, the command's key, the reason (it names the field at fault), and
where the command was read (topic[partition]@offset).
"""

DEFAULT_LAST = 20


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rejected",
        help="show commands the shards rejected, with the reason",
        description="Show the latest records of {ns}.rejected.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--last",
        type=int,
        default=DEFAULT_LAST,
        metavar="N",
        help=f"at most N (default {DEFAULT_LAST})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.set_defaults(func=run)


def _text(data: bytes | None) -> str | None:
    """UTF-8 text as is; other bytes as ``base64:...``; None stays None."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode("ascii")


def run(args: argparse.Namespace) -> int:
    if args.last < 1:
        return output.fail("rejected", "--last must be at least 1", 2)
    settings = Settings.from_env()
    topic = settings.topic(TopicKind.REJECTED)
    try:
        records = asyncio.run(read_to_end(settings, topic, last_per_partition=args.last))
    except TailError as exc:
        return output.fail("rejected", str(exc))
    records.sort(key=lambda r: (r.timestamp_ms, r.partition, r.offset), reverse=True)
    rows: list[dict[str, Any]] = []
    for record in records[: args.last]:
        if record.value is None:
            continue
        try:
            rejected = messages.parse_rejected(record.value)
        except ValueError as exc:
            rows.append(
                {
                    "rejected_at": output.instant(record.timestamp_ms),
                    "key": _text(record.key),
                    "reason": f"(unreadable rejection record at {topic}[{record.partition}]"
                    f"@{record.offset}: {exc})",
                    "original": None,
                    "topic": None,
                    "partition": None,
                    "offset": None,
                }
            )
            continue
        rows.append(
            {
                "rejected_at": output.instant(record.timestamp_ms),
                "key": _text(record.key),
                "reason": rejected.reason,
                "original": _text(rejected.original),
                "topic": rejected.topic,
                "partition": rejected.partition,
                "offset": rejected.offset,
            }
        )
    if args.json:
        output.print_json(rows)
        return 0
    if not rows:
        print(f"no rejected commands in {topic}")
        return 0
    output.print_table(
        ("rejected at", "key", "reason", "from"),
        [
            (
                row["rejected_at"],
                row["key"] if row["key"] is not None else "(null)",
                row["reason"],
                f"{row['topic']}[{row['partition']}]@{row['offset']}" if row["topic"] else "-",
            )
            for row in rows
        ],
        title=f"rejected commands in {topic}, newest first",
    )
    return 0
