"""Flags every long-running actor shares: ``--metrics-port``, ``--log-format``, ``--verbose``."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator, Sequence

from prometheus_client.registry import Collector

from actors.observe.exposition import ENV_PORT, MetricsError, check_port, port_from_env
from actors.observe.lag import Sampler
from actors.observe.logs import ENV_FORMAT, LOG_FORMATS, check_format, default_format
from actors.observe.logs import setup_logging as _setup_logging


def add_arguments(parser: argparse.ArgumentParser, *, metrics: bool = True) -> None:
    if metrics:
        parser.add_argument(
            "--metrics-port",
            default=None,
            metavar="PORT",
            help=f"serve Prometheus metrics on http://0.0.0.0:PORT/metrics (env {ENV_PORT};"
            " default: no endpoint)",
        )
    parser.add_argument(
        "--log-format",
        default=None,
        choices=LOG_FORMATS,
        help=f"log lines as text or one JSON object per line (env {ENV_FORMAT}; default text)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="debug logging, the Kafka client's own lines included",
    )


def setup_logging(args: argparse.Namespace) -> None:
    """The process's logging from the flags; `ValueError` for a bad KAFKRON_LOG_FORMAT."""
    _setup_logging(check_format(args.log_format or default_format()), verbose=args.verbose)


def metrics_port(args: argparse.Namespace) -> int | None:
    """The port from ``--metrics-port`` or the environment; `MetricsError` if not a port."""
    if args.metrics_port is not None:
        return check_port(args.metrics_port)
    return port_from_env()


@contextlib.asynccontextmanager
async def maybe_serve_metrics(
    port: int | None, collectors: Sequence[Collector], samplers: Sequence[Sampler]
) -> AsyncIterator[None]:
    """`serve_metrics` when a port is given, nothing otherwise."""
    if port is None:
        yield
        return
    from actors.observe.exposition import serve_metrics

    async with serve_metrics(port, collectors, samplers):
        yield


__all__ = ["MetricsError", "add_arguments", "maybe_serve_metrics", "metrics_port", "setup_logging"]
