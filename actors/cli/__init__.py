"""The `kafkron` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (a callable taking
the parsed ``argparse.Namespace`` and returning an exit code) with ``set_defaults``.

Exit codes everywhere: 0 ok, 1 failure, 2 bad usage (argparse uses 2 too).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Modules of this package that define subcommands, in the order `--help` lists them.
# Add a module here when you add a subcommand.
COMMAND_MODULES: tuple[str, ...] = (
    "broker_cmd",
    "topics_cmd",
    "schedule_cmd",
    "submit_cmd",
    "recorder_cmd",
    "history_cmd",
    "rejected_cmd",
    "ls_cmd",
    "worker_cmd",
    "dlq_cmd",
    "dag_cmd",
    "scheduler_cmd",
    "demo_cmd",
    "web_cmd",
    "next_cmd",
    "simulate_cmd",
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkron",
        description="A distributed job scheduler on Apache Kafka.",
        epilog="Example: kafkron broker start && kafkron topics create && kafkron demo",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"actors.cli.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code = func(args)
    except KeyboardInterrupt:
        return 130
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
