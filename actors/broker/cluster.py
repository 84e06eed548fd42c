"""A local KRaft cluster of N nodes: start, stop, kill, inspect; one node or all.

Node ``n`` (1-based) of a cluster on base port P listens for clients on
``P + 2 (n - 1)`` and for its controller on the port after that; it keeps its
data, its one log and its pid file in ``<data dir>/node-<n>``. Every node is
broker and controller, so a three-node cluster is a three-voter quorum: it keeps
electing a metadata leader with one node down, and stops with two down.

A single node (``--nodes 1``, the default) is exactly the broker `actors.broker.process`
always ran, in the data dir itself, so existing data dirs keep working.

``cluster.json`` in the data dir records the node count, the base port and the
cluster id every node was formatted with: `stop`, `status` and ``--node N`` read
the count from it, and a node whose disk was lost is formatted again with the
same id so it rejoins and its peers rebuild its replicas.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

import orjson

from actors.broker import config, probe, process, quorum
from actors.broker import secure as broker_secure
from actors.broker.errors import BrokerError
from actors.broker.layout import BrokerLayout

MANIFEST = "cluster.json"
MAX_NODES = 9
# Three JVMs share one machine: a smaller heap each than a single node's 1 GiB.
# A local cluster moves kilobytes per second; 512 MiB leaves room for page cache.
NODE_JVM = ("-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")


@dataclass(frozen=True, slots=True)
class ClusterLayout:
    """Ports and directories of a local cluster of `nodes` nodes from base `port`."""

    port: int
    data_dir: Path
    nodes: int

    @classmethod
    def resolve(
        cls, port: int | None = None, data_dir: str | Path | None = None, nodes: int | None = None
    ) -> ClusterLayout:
        """Fill in from the environment and defaults; the node count from cluster.json."""
        base = BrokerLayout.resolve(port, data_dir)
        recorded = read_manifest(base.data_dir)
        if nodes is None:
            nodes = int(recorded["nodes"]) if recorded else 1
        if not 1 <= nodes <= MAX_NODES:
            raise BrokerError(f"--nodes must be between 1 and {MAX_NODES}, got {nodes}")
        if recorded and int(recorded["nodes"]) != nodes:
            raise BrokerError(
                f"{base.data_dir} holds a {recorded['nodes']}-node cluster, not {nodes}:"
                f" stop it and remove {base.data_dir}, or pick another --data-dir"
            )
        if recorded and int(recorded["port"]) != base.port:
            raise BrokerError(
                f"the cluster in {base.data_dir} runs from port {recorded['port']},"
                f" not {base.port}: pass --port {recorded['port']}"
            )
        if not recorded and nodes > 1 and (base.log_dirs / "meta.properties").exists():
            raise BrokerError(
                f"{base.data_dir} holds a single-node broker: pick another --data-dir for a"
                f" {nodes}-node cluster, or remove {base.data_dir}"
            )
        return cls(port=base.port, data_dir=base.data_dir, nodes=nodes)

    def node(self, n: int) -> BrokerLayout:
        """The layout of node `n` (1-based)."""
        if not 1 <= n <= self.nodes:
            raise BrokerError(f"--node must be between 1 and {self.nodes} (the cluster's nodes)")
        if self.nodes == 1:
            return BrokerLayout(port=self.port, data_dir=self.data_dir)
        return BrokerLayout(
            port=self.port + 2 * (n - 1),
            data_dir=self.data_dir / f"node-{n}",
            secure_home=self.data_dir / "secure",  # one CA and one admin for all nodes
        )

    @property
    def node_layouts(self) -> list[BrokerLayout]:
        return [self.node(n) for n in range(1, self.nodes + 1)]

    @property
    def bootstrap(self) -> str:
        """Every node's client address, comma separated (what KAFKRON_BOOTSTRAP takes)."""
        return ",".join(node.bootstrap for node in self.node_layouts)

    @property
    def manifest(self) -> Path:
        return self.data_dir / MANIFEST


def read_manifest(data_dir: Path) -> dict[str, int | str] | None:
    try:
        loaded = orjson.loads((data_dir / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _cluster_id(layout: ClusterLayout) -> str:
    """The cluster's id from its manifest, or a new one recorded there."""
    recorded = read_manifest(layout.data_dir)
    if recorded:
        return str(recorded["cluster_id"])
    cluster_id = process.new_cluster_id()
    layout.data_dir.mkdir(parents=True, exist_ok=True)
    body = {"nodes": layout.nodes, "port": layout.port, "cluster_id": cluster_id}
    layout.manifest.write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
    return cluster_id


@dataclass(frozen=True, slots=True)
class NodeStatus:
    node_id: int
    layout: BrokerLayout
    pid: int | None
    answering: bool
    already_running: bool = False

    def describe(self) -> str:
        state = "up" if self.answering else ("not answering" if self.pid else "down")
        pid = f"pid {self.pid}" if self.pid else "no process"
        return (
            f"node {self.node_id}: {self.layout.bootstrap} {state} ({pid}, {self.layout.data_dir})"
        )


def _launch(layout: ClusterLayout, n: int, cluster_id: str, secure: bool = False) -> int:
    node = layout.node(n)
    text = config.server_properties(node, n, layout.node_layouts)
    # A cluster set up secure stays secure: its storage holds the SCRAM users.
    secure = secure or broker_secure.is_secure(node)
    return process.launch(node, text, cluster_id, NODE_JVM, secure=secure)


def start(
    layout: ClusterLayout, timeout_s: float = process.DEFAULT_START_TIMEOUT_S, secure: bool = False
) -> list[NodeStatus]:
    """Start every node not running, then wait until each answers.

    Every node is launched before any is waited for: a node answers only once a
    majority of the voters is up and has elected a metadata leader.
    """
    if layout.nodes == 1:
        found = process.start(layout.node(1), timeout_s, secure=secure)
        return [NodeStatus(1, found.layout, found.pid, True, found.already_running)]
    cluster_id = _cluster_id(layout)
    already = {n for n in range(1, layout.nodes + 1) if process.running_pid(layout.node(n))}
    launched: dict[int, int] = {}
    try:
        for n in range(1, layout.nodes + 1):
            if n not in already:
                launched[n] = _launch(layout, n, cluster_id, secure)
        for n, node in enumerate(layout.node_layouts, 1):
            process.wait_until_answering(node, launched.get(n), timeout_s)
    except BrokerError:
        for n in range(1, layout.nodes + 1):
            if n not in already:
                process.stop(layout.node(n))
        raise
    return [
        NodeStatus(n, layout.node(n), process.running_pid(layout.node(n)), True, n in already)
        for n in range(1, layout.nodes + 1)
    ]


def start_node(
    layout: ClusterLayout, n: int, timeout_s: float = process.DEFAULT_START_TIMEOUT_S
) -> NodeStatus:
    """Start node `n` again (formatting its storage if its disk was lost) and wait for it."""
    node = layout.node(n)
    if layout.nodes == 1:
        found = process.start(node, timeout_s)
        return NodeStatus(1, node, found.pid, True, found.already_running)
    already = process.running_pid(node) is not None
    pid = None if already else _launch(layout, n, _cluster_id(layout))
    process.wait_until_answering(node, pid, timeout_s)
    return NodeStatus(n, node, process.running_pid(node), True, already)


def stop(layout: ClusterLayout, grace_s: float = process.DEFAULT_STOP_GRACE_S) -> list[int]:
    """Stop every node: SIGTERM to all at once, then wait; return the pids stopped.

    All at once, not one by one: a broker's clean shutdown asks the controller quorum
    to move its leaders away, and the last nodes of a one-by-one stop would wait
    for a quorum that no longer exists.
    """
    pids = [pid for node in layout.node_layouts if (pid := process.running_pid(node))]
    process.signal_all(pids, signal.SIGCONT)  # a node stopped by a test must hear SIGTERM
    process.signal_all(pids, signal.SIGTERM)
    for node in layout.node_layouts:
        process.stop(node, grace_s)
    return pids


def stop_node(layout: ClusterLayout, n: int, *, kill: bool = False) -> int | None:
    """Stop node `n` cleanly, or with SIGKILL if `kill`; its pid, or None if it was down."""
    node = layout.node(n)
    if kill:
        return process.kill(node)
    pid = process.running_pid(node)
    if pid is not None:
        process.signal_all([pid], signal.SIGCONT)
    return process.stop(node)


def lose_disk(layout: ClusterLayout, n: int) -> None:
    """Delete node `n`'s Kafka data (it must be down): the next start formats it afresh."""
    node = layout.node(n)
    if process.running_pid(node) is not None:
        raise BrokerError(f"node {n} is running: stop it (--kill) before deleting its data")
    shutil.rmtree(node.log_dirs, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    layout: ClusterLayout
    nodes: list[NodeStatus]
    view: quorum.ClusterView | None

    @property
    def all_answering(self) -> bool:
        return all(node.answering for node in self.nodes)

    def lines(self) -> list[str]:
        out = []
        leaders = self.view.leaders() if self.view else None
        for node in self.nodes:
            text = node.describe()
            if self.view is not None and node.answering:
                if self.view.active_controller == node.node_id:
                    text += ", active controller"
                text += f", leads {leaders[node.node_id] if leaders else 0} partitions"
            out.append(text)
        if self.view is not None and self.view.leaderless:
            out.append(f"{self.view.leaderless} partitions have no leader")
        if self.view is None and self.layout.nodes > 1:
            out.append(f"no node of the cluster in {self.layout.data_dir} answers")
        return out


def status(layout: ClusterLayout, timeout_s: float = 5.0) -> ClusterStatus:
    security = broker_secure.probe_kwargs(layout.node(1))
    nodes = [
        NodeStatus(
            n, node, process.running_pid(node), probe.answers(node.bootstrap, timeout_s, **security)
        )
        for n, node in enumerate(layout.node_layouts, 1)
    ]
    up = ",".join(s.layout.bootstrap for s in nodes if s.answering)
    view = asyncio.run(quorum.describe(up, timeout_s, **security)) if up else None
    return ClusterStatus(layout, nodes, view)
