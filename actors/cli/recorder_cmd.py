"""`kafkron recorder [--db PATH] [--rebuild]`: keep the history database up to date."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from actors.cli import observe_args, output
from actors.cli.db_arg import add_db_argument
from actors.history import default_db_path
from actors.history.recorder import RECORDED_KINDS, Recorder, RecorderError
from actors.history.store import HistoryError, HistoryStore
from actors.observe.collectors import RecorderCollector
from actors.observe.exposition import MetricsError
from actors.observe.lag import LagSampler
from topics.names import Settings

log = logging.getLogger("kafkron.recorder")

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
    add_db_argument(parser)
    parser.add_argument(
        "--rebuild", action="store_true", help="empty the database and re-read the topics"
    )
    observe_args.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        port = observe_args.metrics_port(args)
        observe_args.setup_logging(args)
    except (MetricsError, ValueError) as exc:
        return output.fail("recorder", str(exc), 2)
    settings = Settings.from_env()
    db = Path(args.db) if args.db else default_db_path()
    try:
        asyncio.run(_record(settings, db, args.rebuild, port))
    except (HistoryError, RecorderError, MetricsError) as exc:
        return output.fail("recorder", str(exc))
    return 0


async def _record(settings: Settings, db: Path, rebuild: bool, metrics_port: int | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"recording namespace {settings.namespace!r} into {db} (Ctrl-C to stop)",
        file=sys.stderr,
        flush=True,
    )
    store = await HistoryStore.open(db, namespace=settings.namespace, reset=rebuild)
    async with store:
        if rebuild:
            log.info("rebuilding %s from the earliest retained records", db)
        recorder = Recorder(settings, store)
        sampler = LagSampler(
            settings,
            settings.recorder_group,
            [settings.topic(kind) for kind in RECORDED_KINDS],
        )
        async with observe_args.maybe_serve_metrics(
            metrics_port, [RecorderCollector(recorder)], [sampler]
        ):
            await recorder.run(stop)
    print(
        f"recorder stopped after {recorder.records_seen} records "
        f"({recorder.records_skipped} undecodable, skipped)",
        file=sys.stderr,
    )
