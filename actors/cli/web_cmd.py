"""`kafkron web [--port 8080] [--db PATH]`: the web console."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import signal
from pathlib import Path
from typing import Any

from actors.cli import observe_args, output
from actors.cli.db_arg import add_db_argument
from actors.history import default_db_path
from topics.names import Settings

log = logging.getLogger("kafkron.web")

ENV_TOKEN = "KAFKRON_WEB_TOKEN"

_EPILOG = f"""\
examples:
  kafkron web                                  # http://127.0.0.1:8080/
  kafkron web --port 9000 --db .kafkron/history.db
  {ENV_TOKEN}=s3cret kafkron web --host 0.0.0.0   # other hosts too; actions need the token

Pages: schedules (next fires in UTC and local time, Pause / Resume / Trigger), a
schedule's runs with lateness and duration, a run's attempts, dead letters with
Replay, rejected commands, DAG runs as graphs, and "when will it run?". Every
action is a command on {{ns}}.commands, validated as the command line validates
it; the console keeps no state. Runs come from the recorder's history database
(run `kafkron recorder` with the same --db); schedules from {{ns}}.schedules.

Without a token the console listens on a loopback address only.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "web",
        help="the web console: schedules, runs, dead letters, DAG runs, actions",
        description="Serve the web console on the changelog and the history database.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; another needs a token)",
    )
    add_db_argument(parser)
    parser.add_argument(
        "--token",
        default=None,
        help=f"actions require signing in with this token (env {ENV_TOKEN})",
    )
    observe_args.add_arguments(parser, metrics=False)
    parser.set_defaults(func=run)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    try:
        observe_args.setup_logging(args)
    except ValueError as exc:
        return output.fail("web", str(exc), 2)
    if not 0 < args.port < 65536:
        return output.fail("web", f"--port {args.port} is not a port number (1-65535)", 2)
    token = args.token or os.environ.get(ENV_TOKEN) or None
    if token is None and not is_loopback(args.host):
        return output.fail(
            "web",
            f"--host {args.host} would let anyone who reaches it pause schedules and replay"
            f" runs; set a token with --token or {ENV_TOKEN}, or keep the default 127.0.0.1",
            2,
        )
    db = Path(args.db) if args.db else default_db_path()
    settings = Settings.from_env()
    try:
        asyncio.run(serve(settings, db, args.host, args.port, token))
    except OSError as exc:
        return output.fail("web", f"cannot listen on {args.host}:{args.port} ({exc.strerror})")
    return 0


async def serve(settings: Settings, db: Path, host: str, port: int, token: str | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    from actors.web.serve import start_console

    runner = await start_console(settings, db, host, port, token)
    shown = f"[{host}]" if ":" in host else host
    print(
        f"kafkron web: http://{shown}:{port}/ (namespace {settings.namespace}, history {db});"
        " Ctrl-C to stop",
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
