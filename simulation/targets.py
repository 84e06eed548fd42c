"""Kafka targets in the simulated world: the topics a scenario declares, and their records.

A shard writes a Kafka target's record (`topics.records.TargetRecord`) to a topic
of the user's, inside the fire's transaction. No kafkron actor reads such a topic,
so the simulation models only what a read_committed reader of it would end up
seeing: the record is kept with its transaction, its headers and the broker's
append instant in `SimKafka.target_records`, and `committed_targets` gives those a
read_committed reader sees, in order; an aborted or fenced transaction's records
are never seen (as a log's entries, by status). A record written outside any
transaction (the ``target-outside-txn`` broken variant) is seen at once.

A scenario declares its target topics as an operator creates them and starts the
schedulers::

    [targets]
    topics = { "orders.due" = 3, "audit.ticks" = 2 }   # topic -> partitions
    allowed = ["orders.due", "audit.*"]                # the schedulers' --target-topic

Each scheduler node hands its cores `TargetWorld.snapshot` (what
`actors.scheduler.target_table.TargetTable.snapshot` gives a real process).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simulation.kafka import COMMITTED, OPEN, ProducerFenced, SimKafka, Txn
from topics.records import TargetRecord
from topics.target_patterns import check_pattern
from topics.targets import TargetTopic, TargetTopics


@dataclass(frozen=True, slots=True)
class TargetWorld:
    """The scenario's ``[targets]``: the topics that exist and the allowed patterns."""

    topics: Mapping[str, int] = field(default_factory=dict)
    allowed: tuple[str, ...] = ()

    def snapshot(self, namespace: str, runs_partitions: int | None = None) -> TargetTopics:
        """What a scheduler is handed; with ``runs_partitions``, ``{ns}.runs`` too (the
        runtime reads it, so a concurrency key's runs are placed by their key)."""
        known = {name: TargetTopic(n) for name, n in self.topics.items()}
        if runs_partitions is not None:
            known[f"{namespace}.runs"] = TargetTopic(runs_partitions)
        return TargetTopics(allowed=self.allowed, known=known, own_prefix=f"{namespace}.")


def target_world(table: Any) -> TargetWorld:
    """A scenario's ``[targets]`` table; ValueError naming the bad field."""
    if not isinstance(table, dict):
        raise ValueError("targets: a table with topics and allowed")
    unknown = sorted(set(table) - {"topics", "allowed"})
    if unknown:
        raise ValueError(f"targets: unknown keys {unknown}; known: ['allowed', 'topics']")
    topics = table.get("topics", {})
    if not isinstance(topics, dict) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in topics.values()
    ):
        raise ValueError('targets.topics: a table of topic = partitions, as {"orders.due" = 3}')
    allowed = table.get("allowed", [])
    if not isinstance(allowed, list):
        raise ValueError('targets.allowed: a list of topic names or prefixes, as ["orders.*"]')
    return TargetWorld(
        topics={str(name): int(n) for name, n in topics.items()},
        allowed=tuple(check_pattern(str(p)) for p in allowed),
    )


@dataclass(frozen=True, slots=True)
class SentTarget:
    """A target record as the simulated broker keeps it (``txn`` None: outside any)."""

    txn: Txn | None
    record: TargetRecord
    append_ms: int


@dataclass(frozen=True, slots=True)
class TargetSeen:
    """One target record a read_committed reader of its topic sees."""

    topic: str
    partition: int
    offset: int
    append_ms: int  # the broker's clock (true time) when it was appended
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


def send_target(kafka: SimKafka, txn: Txn | None, record: TargetRecord, true_ms: int) -> None:
    """Append a target record inside ``txn`` (or outside any if None); raises as
    `SimKafka.send` does."""
    kafka._check()
    if txn is not None:
        kafka._check_epoch(txn)
        if txn.status != OPEN:
            raise ProducerFenced(f"{txn.tx_id}: transaction already {txn.status}")
    kafka.target_records.append(SentTarget(txn, record, true_ms))


def committed_targets(kafka: SimKafka) -> list[TargetSeen]:
    """Every target record a read_committed reader sees, in the order they were written;
    offsets count every record appended to the partition, seen or not."""
    out: list[TargetSeen] = []
    offsets: dict[tuple[str, int], int] = {}
    for sent in kafka.target_records:
        record = sent.record
        assert record.partition is not None  # the shard always chooses it
        where = (str(record.topic), record.partition)
        offset = offsets.get(where, 0)
        offsets[where] = offset + 1
        if sent.txn is None or sent.txn.status == COMMITTED:
            out.append(
                TargetSeen(
                    where[0],
                    where[1],
                    offset,
                    sent.append_ms,
                    record.key,
                    record.value,
                    record.headers,
                )
            )
    return out
