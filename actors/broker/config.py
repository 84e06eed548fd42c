"""The KRaft configuration of a local node and its log4j2 file.

Every node is one JVM that is both controller and broker
(``process.roles=broker,controller``). A single node has a static voter set of
itself, which is all a laptop or a CI runner needs; the replication settings of
Kafka's internal topics are lowered to 1 there, since without that the first
transaction or consumer group would wait forever for replicas that do not exist.

A cluster of N nodes has a static voter set of all N (``controller.quorum.voters``:
a majority of controllers must be up for the metadata quorum to elect a leader),
and its internal topics (consumer offsets, transaction state, share-group state)
get ``min(3, N)`` replicas with ``min.insync.replicas`` 2 from three up: a
transaction commit marker or a committed offset is then on two disks before it
is acknowledged, the guarantee kafkron's exactly-once rests on.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.broker.layout import HOST, BrokerLayout

NODE_ID = 1


def replication_factor(nodes: int) -> int:
    """Replicas of every topic on a cluster of `nodes` brokers: three at most."""
    return min(3, nodes)


def min_insync_replicas(replicas: int) -> int:
    """Two in sync from three replicas up (one broker may be down), else one."""
    return 2 if replicas >= 3 else 1


def server_properties(
    layout: BrokerLayout, node_id: int = NODE_ID, voters: Sequence[BrokerLayout] = ()
) -> str:
    """The ``server.properties`` text of node `node_id` at `layout`.

    `voters` lists every node of the cluster, node ``i + 1`` at index ``i``; empty
    means a single node that votes for itself.
    """
    quorum = list(voters) or [layout]
    replicas = replication_factor(len(quorum))
    min_isr = min_insync_replicas(replicas)
    voter_list = ",".join(f"{i}@{HOST}:{node.controller_port}" for i, node in enumerate(quorum, 1))
    settings: dict[str, str | int] = {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "controller.quorum.voters": voter_list,
        "listeners": f"PLAINTEXT://{HOST}:{layout.port},CONTROLLER://{HOST}:{layout.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{layout.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(layout.log_dirs),
        # Internal topics: as many replicas as the cluster can hold, up to three.
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        # Defaults for topics made by hand; kafkron sets both on its own topics.
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        # Never elect a replica that missed acknowledged writes (Kafka's default, stated).
        "unclean.leader.election.enable": "false",
        # Fewer internal partitions than the default 50: the first group and the first
        # transaction each create one of these topics, and 50 partitions is seconds.
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.num.partitions": 10,
        # A new group starts at once instead of waiting 3 s for more members.
        "group.initial.rebalance.delay.ms": 0,
        # Let failover tests use short sessions (the default floor is 6 s).
        "group.min.session.timeout.ms": 1000,
        # kafkron creates its topics with explicit configs; a typo must not create one.
        "auto.create.topics.enable": "false",
        "num.partitions": 1,
        # The cleaner wakes every second, so compaction is observable in tests.
        "log.cleaner.backoff.ms": 1000,
    }
    lines = ["# Written by `kafkron broker start`; rewritten on every start."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def log4j2_properties() -> str:
    """Everything to the console (the caller sends it to the log file), INFO for Kafka.

    The request and state-change loggers are chatty at INFO and say nothing a user of
    a local broker needs, so they are raised to WARN.
    """
    return "\n".join(
        [
            "status = warn",
            "appender.console.type = Console",
            "appender.console.name = STDOUT",
            "appender.console.layout.type = PatternLayout",
            "appender.console.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = info",
            "rootLogger.appenderRef.stdout.ref = STDOUT",
            "logger.request.name = kafka.request.logger",
            "logger.request.level = warn",
            "logger.state.name = state.change.logger",
            "logger.state.level = warn",
            "logger.controller.name = org.apache.kafka.controller",
            "logger.controller.level = warn",
            "",
        ]
    )
