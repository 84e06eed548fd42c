"""`kafkron recorder [--db PATH] [--rebuild]`: keep the history database up to date."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from actors.cli import output
from actors.history import default_db_path
from actors.history.recorder import RecorderError, run_recorder
from actors.history.store import HistoryError
from topics.names import Settings

_EPILOG = """\
examples:
  kafkron recorder                        # into .kafkron/history.db, until Ctrl-C
  kafkron recorder --db /var/lib/kafkron/history.db
  kafkron recorder --rebuild              # empty the database, re-read the topics from the start

Reads {ns}.runs, {ns}.results, {ns}.dlq and {ns}.rejected (read_committed) as the
consumer group {ns}-recorder. Run one recorder per database. A rebuild recovers
what the topics still retain (see their retention). SIGTERM or Ctrl-C stops it
cleanly; what it wrote is never lost and never written twice.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "recorder",
        help="record runs, results, dead letters and rejections into the history database",
        description="The history actor: materialise the outcome topics into SQLite.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--db",
        default=None,
        help="database path (env KAFKRON_HISTORY_DB, default .kafkron/history.db)",
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="empty the database and re-read the topics"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    settings = Settings.from_env()
    db = Path(args.db) if args.db else default_db_path()
    try:
        asyncio.run(_record(settings, db, args.rebuild))
    except (HistoryError, RecorderError) as exc:
        return output.fail("recorder", str(exc))
    return 0


async def _record(settings: Settings, db: Path, rebuild: bool) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"recording namespace {settings.namespace!r} into {db} (Ctrl-C to stop)",
        file=sys.stderr,
        flush=True,
    )
    recorder = await run_recorder(settings, db, stop, rebuild=rebuild)
    print(
        f"recorder stopped after {recorder.records_seen} records "
        f"({recorder.records_skipped} undecodable, skipped)",
        file=sys.stderr,
    )
