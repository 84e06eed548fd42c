"""The single-node KRaft configuration and its log4j2 file.

One JVM is both controller and broker (``process.roles=broker,controller``) with
a static voter set of itself, which is all a laptop or a CI runner needs. The
replication settings of Kafka's internal topics are lowered to 1 because there is
one node; without that the first transaction or consumer group would wait forever
for replicas that do not exist.
"""

from __future__ import annotations

from broker.layout import HOST, BrokerLayout

NODE_ID = 1


def server_properties(layout: BrokerLayout) -> str:
    """The ``server.properties`` text for `layout`."""
    settings: dict[str, str | int] = {
        "process.roles": "broker,controller",
        "node.id": NODE_ID,
        "controller.quorum.voters": f"{NODE_ID}@{HOST}:{layout.controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{layout.port},CONTROLLER://{HOST}:{layout.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{layout.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(layout.log_dirs),
        # One node: internal topics cannot have more replicas than brokers.
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
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
