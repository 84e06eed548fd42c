"""`kafkron broker start|stop|status`: the local Apache Kafka (see the `broker` package)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from broker import BrokerError, BrokerLayout
from broker import process as broker_process
from broker import secure as broker_secure

_EPILOG = """\
examples:
  kafkron broker start                    # 127.0.0.1:9092, data in ~/.cache/kafkron/broker-9092
  kafkron broker start --port 19092 --data-dir /var/tmp/kafka-ci
  kafkron broker status && echo up
  kafkron broker stop

The first start downloads Apache Kafka's jars with Maven (needs java 17+ and mvn);
later starts reuse them. Environment: KAFKRON_BROKER_PORT, KAFKRON_BROKER_DATA_DIR,
KAFKRON_CACHE_DIR, KAFKRON_MAVEN_REPO, KAFKRON_BROKER_JAVA_OPTS (e.g. -Xmx4g).
Clients find the broker via KAFKRON_BOOTSTRAP.
"""


def _add_location(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="client port on 127.0.0.1 (default $KAFKRON_BROKER_PORT or 9092; controller: +1)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data, log and pid file (default $KAFKRON_BROKER_DATA_DIR or <cache>/broker-PORT)",
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "broker",
        help="start, stop or check the local single-node Kafka",
        description="Run a local single-node Apache Kafka 4 (KRaft) for kafkron.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="broker_action", metavar="ACTION", required=True)
    start = actions.add_parser(
        "start",
        help="start the broker and wait until it answers",
        epilog="example: kafkron broker start --port 9092",
    )
    _add_location(start)
    start.add_argument(
        "--timeout",
        type=float,
        default=broker_process.DEFAULT_START_TIMEOUT_S,
        help="seconds to wait for the broker to answer (default %(default)s)",
    )
    start.add_argument(
        "--secure",
        action="store_true",
        help="TLS + SASL/SCRAM-SHA-512 for clients, mutual TLS for the controller, ACLs"
        " enforced (allow.everyone.if.no.acl.found=false); a CA, the broker's certificate"
        " and the admin's client config are made under the data dir's secure/ on first start",
    )
    start.set_defaults(func=run_start)
    stop = actions.add_parser(
        "stop",
        help="stop the broker (SIGTERM, then SIGKILL)",
        epilog="example: kafkron broker stop",
    )
    _add_location(stop)
    stop.set_defaults(func=run_stop)
    status = actions.add_parser(
        "status",
        help="exit 0 only if the broker answers a metadata request",
        epilog="example: kafkron broker status && echo up",
    )
    _add_location(status)
    status.set_defaults(func=run_status)


def _layout(args: argparse.Namespace) -> BrokerLayout:
    return BrokerLayout.resolve(port=args.port, data_dir=args.data_dir)


def run_start(args: argparse.Namespace) -> int:
    layout = _layout(args)
    try:
        found = broker_process.start(layout, timeout_s=args.timeout, secure=args.secure)
    except BrokerError as exc:
        print(f"kafkron broker start: {exc}", file=sys.stderr)
        return 1
    prefix = "already running" if found.already_running else "started"
    print(f"{prefix}: {found.describe()}; log {layout.log_file}")
    if layout.port != 9092:
        print(f"clients: export KAFKRON_BOOTSTRAP={layout.bootstrap}")
    if broker_secure.is_secure(layout):
        print(
            f"secure: the admin's client config is {broker_secure.admin_config(layout)}"
            f" (export KAFKRON_CLIENT_CONFIG=...); clients trust {broker_secure.ca_file(layout)}"
        )
    return 0


def run_stop(args: argparse.Namespace) -> int:
    layout = _layout(args)
    try:
        pid = broker_process.stop(layout)
    except BrokerError as exc:
        print(f"kafkron broker stop: {exc}", file=sys.stderr)
        return 1
    if pid is None:
        print(f"no broker running from {layout.data_dir}")
    else:
        print(f"stopped broker pid {pid} ({layout.bootstrap})")
    return 0


def run_status(args: argparse.Namespace) -> int:
    found = broker_process.status(_layout(args))
    print(found.describe())
    return 0 if found.answering else 1
