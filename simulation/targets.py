"""Kafka targets' records in the simulated Kafka.

A shard writes a Kafka target's record (`topics.records.TargetRecord`) to a topic
of the user's, inside the fire's transaction. No kafkron actor reads such a topic,
so the simulation models only what a read_committed reader of it would end up
seeing: the record is kept with its transaction in `SimKafka.target_records`, and
`committed_targets` gives those whose transaction committed, in order; an aborted
or fenced transaction's records are never seen (as a log's entries, by status).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulation.kafka import COMMITTED, OPEN, ProducerFenced, SimKafka, Txn


@dataclass(frozen=True, slots=True)
class TargetSeen:
    """One target record a read_committed reader of its topic sees."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None


def send_target(
    kafka: SimKafka, txn: Txn, topic: str, key: bytes | None, value: bytes | None, partition: int
) -> None:
    """Append a target record inside ``txn``; raises as `SimKafka.send` does."""
    kafka._check()
    kafka._check_epoch(txn)
    if txn.status != OPEN:
        raise ProducerFenced(f"{txn.tx_id}: transaction already {txn.status}")
    kafka.target_records.append((txn, topic, partition, key, value))


def committed_targets(kafka: SimKafka) -> list[TargetSeen]:
    """Every committed target record, in the order they were written."""
    return [
        TargetSeen(topic, partition, key, value)
        for txn, topic, partition, key, value in kafka.target_records
        if txn.status == COMMITTED
    ]
