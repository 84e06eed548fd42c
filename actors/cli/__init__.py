"""The `kafkron` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (a callable taking
the parsed ``argparse.Namespace`` and returning an exit code) with ``set_defaults``.
Command ``X`` lives in ``X_cmd``. A command line that names one loads that module
alone: a scheduler or a worker does not import the history store, the views and the
web console to start (0.13 s of a scheduler's start went to importing them); ``--help``
without a command, or a name that is no command, builds the whole parser.

Exit codes everywhere: 0 ok, 1 failure, 2 bad usage (argparse uses 2 too).
"""

from __future__ import annotations

import argparse
import importlib
import os
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
    "audit_cmd",
    "slo_cmd",
    "alerts_cmd",
    "rejected_cmd",
    "ls_cmd",
    "worker_cmd",
    "dlq_cmd",
    "run_cmd",
    "dag_cmd",
    "scheduler_cmd",
    "demo_cmd",
    "web_cmd",
    "next_cmd",
    "simulate_cmd",
    "users_cmd",
    "acl_cmd",
    "plan_cmd",
    "backfill_cmd",
    "calendar_cmd",
    "ratelimit_cmd",
)

# Commands that talk to Kafka: before they run, one connection checks this process's
# credentials, so a refused login reads "authentication failed for user X" rather
# than a client library's "unable to bootstrap".
KAFKA_COMMANDS = frozenset(
    {"topics", "schedule", "submit", "recorder", "rejected", "ls", "worker", "dlq", "dag", "run"}
    | {"scheduler", "demo", "web", "users", "backfill", "calendar", "ratelimit"}
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of command module ``only`` alone."""
    parser = argparse.ArgumentParser(
        prog="kafkron",
        description="A distributed job scheduler on Apache Kafka.",
        epilog="Example: kafkron broker start && kafkron topics create && kafkron demo",
    )
    parser.add_argument(
        "--client-config",
        metavar="FILE",
        default=None,
        help="Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config,"
        " ssl.truststore.location with ssl.truststore.type=PEM), as Kafka tools'"
        " --command-config; sets KAFKRON_CLIENT_CONFIG for this command and its children",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES if only is None else (only,):
        module = importlib.import_module(f"actors.cli.{name}")
        module.register(sub)
    return parser


def command_module(argv: Sequence[str]) -> str | None:
    """The module of the command ``argv`` names, or None (no command, an unknown one,
    or help asked before it): then the whole parser answers, as it always did."""
    tokens = iter(argv)
    for token in tokens:
        # argparse takes a long option's prefix for it (``--client``): so does this.
        spelled = len(token) > 2 and "=" not in token
        if spelled and "--client-config".startswith(token):  # the one that takes a value
            next(tokens, None)
        elif token == "-h" or (spelled and "--help".startswith(token)):
            return None
        elif not token.startswith("-"):
            module = f"{token}_cmd"
            return module if module in COMMAND_MODULES else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(command_module(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    if args.client_config:
        # The environment is the one place client security is read from (topics.security),
        # and child processes of `kafkron demo` inherit it.
        os.environ["KAFKRON_CLIENT_CONFIG"] = os.path.abspath(args.client_config)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command in KAFKA_COMMANDS:
        refused = _security_refusal(args.command)
        if refused is not None:
            return refused
    try:
        code = func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        denied = _denial(exc)
        if denied is None:
            raise
        print(f"kafkron {args.command}: {denied}", file=sys.stderr)
        return EXIT_FAILURE
    return int(code or 0)


def _security_refusal(command: str) -> int | None:
    """Exit code and message if this process's client security is broken or refused."""
    import asyncio

    from topics.names import Settings
    from topics.refusals import authentication_problem
    from topics.security import SecurityConfigError

    try:
        problem = asyncio.run(authentication_problem(Settings.from_env().bootstrap))
    except SecurityConfigError as exc:
        print(f"kafkron {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if problem is None:
        return None
    print(f"kafkron {command}: {problem}", file=sys.stderr)
    return EXIT_FAILURE


def _denial(exc: Exception) -> str | None:
    """The refusal text of a missing ACL that reached the top of a command, else None."""
    from topics.names import Settings
    from topics.refusals import NotAuthorized, from_error

    if isinstance(exc, NotAuthorized):
        return str(exc)
    named = from_error(exc, Settings.from_env().namespace)
    return None if named is None else str(named)


if __name__ == "__main__":
    sys.exit(main())
