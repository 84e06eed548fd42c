"""`kafkron broker start|stop|status`: the local Apache Kafka (see the `broker` package)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from actors.broker import BrokerError
from actors.broker import cluster as broker_cluster
from actors.broker import process as broker_process
from actors.broker import secure as broker_secure
from actors.broker.cluster import ClusterLayout

_EPILOG = """\
examples:
  kafkron broker start                    # 127.0.0.1:9092, data in ~/.cache/kafkron/broker-9092
  kafkron broker start --port 19092 --data-dir /var/tmp/kafka-ci
  kafkron broker start --nodes 3          # three nodes on 9092, 9094, 9096 (controllers +1)
  kafkron broker stop --node 2 --kill     # crash node 2 (SIGKILL) ...
  kafkron broker start --node 2           # ... and bring it back
  kafkron broker status && echo up
  kafkron broker stop

A cluster of N nodes: node n listens on PORT + 2(n-1) (its controller on the next
port) and keeps its data and log in DATA_DIR/node-n; every node is broker and
controller, so three nodes are a three-voter quorum. stop, status and --node read
the node count from DATA_DIR/cluster.json.

The first start downloads Apache Kafka's jars with Maven (needs java 17+ and mvn);
later starts reuse them. Environment: KAFKRON_BROKER_PORT, KAFKRON_BROKER_DATA_DIR,
KAFKRON_CACHE_DIR, KAFKRON_MAVEN_REPO, KAFKRON_BROKER_JAVA_OPTS (e.g. -Xmx4g).
Clients find the broker via KAFKRON_BOOTSTRAP.
"""


def _add_location(parser: argparse.ArgumentParser, *, nodes: bool = True) -> None:
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="client port of node 1 on 127.0.0.1 (default $KAFKRON_BROKER_PORT or 9092;"
        " controller: +1)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data, log and pid file (default $KAFKRON_BROKER_DATA_DIR or <cache>/broker-PORT)",
    )
    if nodes:
        parser.add_argument(
            "--nodes",
            type=int,
            default=None,
            metavar="N",
            help="nodes of the cluster (default: as recorded in the data dir, else 1)",
        )
    parser.add_argument(
        "--node",
        type=int,
        default=None,
        metavar="N",
        help="act on node N of the cluster only (1-based)",
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "broker",
        help="start, stop or check the local Kafka (one node or a cluster)",
        description="Run a local Apache Kafka 4 (KRaft) for kafkron: one node or a cluster.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="broker_action", metavar="ACTION", required=True)
    start = actions.add_parser(
        "start",
        help="start the broker(s) and wait until they answer",
        epilog="example: kafkron broker start --nodes 3",
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
        help="stop the broker(s) (SIGTERM, then SIGKILL)",
        epilog="example: kafkron broker stop --node 3 --kill",
    )
    _add_location(stop, nodes=False)
    stop.add_argument(
        "--kill",
        action="store_true",
        help="with --node: SIGKILL at once, no clean shutdown (a crash, for failure tests)",
    )
    stop.set_defaults(func=run_stop)
    status = actions.add_parser(
        "status",
        help="each node, the active controller and the partitions each leads;"
        " exit 0 only if every node answers",
        epilog="example: kafkron broker status && echo up",
    )
    _add_location(status, nodes=False)
    status.set_defaults(func=run_status)


def _layout(args: argparse.Namespace) -> ClusterLayout:
    return ClusterLayout.resolve(
        port=args.port, data_dir=args.data_dir, nodes=getattr(args, "nodes", None)
    )


def run_start(args: argparse.Namespace) -> int:
    try:
        layout = _layout(args)
        if args.node is not None:
            found = [broker_cluster.start_node(layout, args.node, timeout_s=args.timeout)]
        else:
            found = broker_cluster.start(layout, timeout_s=args.timeout, secure=args.secure)
    except BrokerError as exc:
        print(f"kafkron broker start: {exc}", file=sys.stderr)
        return 1
    if layout.nodes == 1:
        node = found[0]
        prefix = "already running" if node.already_running else "started"
        print(
            f"{prefix}: broker running on {node.layout.bootstrap} (pid {node.pid}, data"
            f" {node.layout.data_dir}); log {node.layout.log_file}"
        )
    else:
        for node in found:
            prefix = "already running" if node.already_running else "started"
            print(f"{prefix}: {node.describe()}; log {node.layout.log_file}")
    if layout.bootstrap != "127.0.0.1:9092":
        print(f"clients: export KAFKRON_BOOTSTRAP={layout.bootstrap}")
    first = layout.node(1)
    if broker_secure.is_secure(first):
        print(
            f"secure: the admin's client config is {broker_secure.admin_config(first)}"
            f" (export KAFKRON_CLIENT_CONFIG=...); clients trust {broker_secure.ca_file(first)}"
        )
    return 0


def run_stop(args: argparse.Namespace) -> int:
    if args.kill and args.node is None:
        print("kafkron broker stop: --kill needs --node N", file=sys.stderr)
        return 2
    try:
        layout = _layout(args)
        if args.node is not None:
            node = layout.node(args.node)
            pid = broker_cluster.stop_node(layout, args.node, kill=args.kill)
            how = "killed" if args.kill else "stopped"
            if pid is None:
                print(f"node {args.node} was not running ({node.data_dir})")
            else:
                print(f"{how} node {args.node} pid {pid} ({node.bootstrap})")
            return 0
        pids = broker_cluster.stop(layout)
    except BrokerError as exc:
        print(f"kafkron broker stop: {exc}", file=sys.stderr)
        return 1
    if not pids:
        print(f"no broker running from {layout.data_dir}")
    elif layout.nodes == 1:
        print(f"stopped broker pid {pids[0]} ({layout.bootstrap})")
    else:
        print(f"stopped {len(pids)} nodes (pids {', '.join(map(str, pids))}) of {layout.data_dir}")
    return 0


def run_status(args: argparse.Namespace) -> int:
    try:
        layout = _layout(args)
        if layout.nodes == 1:
            single = broker_process.status(layout.node(1))
            print(single.describe())
            return 0 if single.answering else 1
        found = broker_cluster.status(layout)
    except BrokerError as exc:
        print(f"kafkron broker status: {exc}", file=sys.stderr)
        return 1
    nodes = found.nodes if args.node is None else [found.nodes[args.node - 1]]
    for line in found.lines():
        if args.node is None or line.startswith(f"node {args.node}:"):
            print(line)
    return 0 if all(n.answering for n in nodes) else 1
