"""`kafkron demo [--duration S] [--namespace NS] [--db PATH]`: see the whole system work."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from actors.cli import output

_EPILOG = """\
examples:
  kafkron demo                            # until Ctrl-C
  kafkron demo --duration 30              # 30 s, then stop and summarise
  kafkron demo --namespace my-demo --db my-demo.db

Starts (or reuses) the local Kafka broker, creates the topics, runs the recorder,
a scheduler and two workers as child processes, submits the billing example
(fx-rates every 5 s, invoice-nightly, a one-off reminder, a job that always fails
so you see retries and the dead-letter topic, one that succeeds on its retry, and a
deliberately broken command), and shows fires, results, lateness, retries and dead
letters live. Ctrl-C (or the end of --duration) stops every child cleanly and
prints a summary from the history.

Each run uses a fresh namespace (demo-<hex>) unless --namespace is given, so a demo
never sees an earlier demo's schedules. The history database defaults to
.kafkron/demo/<namespace>.db, the children's logs sit next to it. Topics are kept,
so `kafkron ls` and `kafkron rejected` work afterwards (the summary says how).
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the whole system on a local broker and watch it live",
        description="See kafkron work: schedules firing, results, a retry and a DLQ entry.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--duration", type=float, default=None, metavar="S", help="stop after S seconds"
    )
    parser.add_argument(
        "--namespace",
        default=None,
        metavar="NS",
        help="topic namespace (default: a fresh demo-<hex> per run)",
    )
    parser.add_argument(
        "--db", default=None, metavar="PATH", help="history database (default .kafkron/demo/NS.db)"
    )
    parser.add_argument(
        "--web-port",
        type=int,
        default=8080,
        metavar="P",
        help="serve the web console on 127.0.0.1:P, or the next free port (default 8080;"
        " 0: no console)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from actors.demo.run import DemoError, DemoOptions, run_demo
    from topics.admin import TopicsError

    if args.duration is not None and args.duration <= 0:
        return output.fail("demo", "--duration must be a positive number of seconds", 2)
    if not 0 <= args.web_port < 65536:
        return output.fail("demo", "--web-port must be a port number (0: no console)", 2)
    options = DemoOptions(
        duration_s=args.duration,
        namespace=args.namespace,
        db=Path(args.db) if args.db else None,
        web_port=args.web_port or None,
    )
    try:
        return asyncio.run(run_demo(options))
    except (DemoError, TopicsError) as exc:
        return output.fail("demo", str(exc))
