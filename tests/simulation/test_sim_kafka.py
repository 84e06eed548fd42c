"""The simulated Kafka is wrong in the same ways as the real one: unit tests of its rules."""

from __future__ import annotations

import pytest

from simulation.group import Group
from simulation.kafka import (
    OPEN,
    TRANSACTION_CLEANUP_INTERVAL_MS,
    TRANSACTION_TIMEOUT_MS,
    BrokerUnavailable,
    ProducerFenced,
    SimKafka,
)
from topics.names import TopicKind

RUNS = TopicKind.RUNS
SCHEDULES = TopicKind.SCHEDULES


def _kafka(fencing: bool = True) -> SimKafka:
    return SimKafka({RUNS: 1, SCHEDULES: 1}, fencing=fencing)


def _values(kafka: SimKafka, kind: TopicKind = RUNS) -> list[bytes | None]:
    records, _ = kafka.fetch(kind, 0, 0, 1000)
    return [r.value for r in records]


def test_open_transaction_is_invisible_and_blocks_later_records() -> None:
    kafka = _kafka()
    epoch = kafka.init_transactions("t", 0)
    txn = kafka.begin("t", epoch, 0)
    kafka.send(txn, RUNS, b"k", b"in-txn", 0, 0)
    kafka.append(RUNS, b"k", b"plain-after", 0, 1)
    assert _values(kafka) == []  # the last stable offset stops at the open transaction
    kafka.commit(txn, 2)
    assert _values(kafka) == [b"in-txn", b"plain-after"]


def test_aborted_records_are_never_visible_and_markers_take_offsets() -> None:
    kafka = _kafka()
    epoch = kafka.init_transactions("t", 0)
    txn = kafka.begin("t", epoch, 0)
    kafka.send(txn, RUNS, b"k", b"lost", 0, 0)
    kafka.abort(txn, 1)
    txn2 = kafka.begin("t", epoch, 2)
    kafka.send(txn2, RUNS, b"k", b"kept", 0, 2)
    kafka.commit(txn2, 3)
    records, position = kafka.fetch(RUNS, 0, 0, 1000)
    assert [(r.offset, r.value) for r in records] == [(2, b"kept")]
    assert position == 4  # two records and two markers


def test_newer_init_fences_the_older_producer_and_aborts_its_open_transaction() -> None:
    kafka = _kafka()
    old_epoch = kafka.init_transactions("shard-0", 0)
    zombie = kafka.begin("shard-0", old_epoch, 0)
    kafka.send(zombie, RUNS, b"k", b"zombie", 0, 0)
    kafka.init_transactions("shard-0", 1)  # the new owner
    with pytest.raises(ProducerFenced):
        kafka.commit(zombie, 2)
    with pytest.raises(ProducerFenced):
        kafka.begin("shard-0", old_epoch, 3)
    assert _values(kafka) == []


def test_without_fencing_the_zombie_commits_which_is_the_broken_variant() -> None:
    kafka = _kafka(fencing=False)
    old_epoch = kafka.init_transactions("shard-0", 0)
    zombie = kafka.begin("shard-0", old_epoch, 0)
    kafka.send(zombie, RUNS, b"k", b"zombie", 0, 0)
    kafka.init_transactions("shard-0", 1)
    kafka.commit(zombie, 2)
    assert _values(kafka) == [b"zombie"]


def test_offsets_commit_with_the_transaction_only() -> None:
    kafka = _kafka()
    epoch = kafka.init_transactions("w", 0)
    txn = kafka.begin("w", epoch, 0)
    kafka.send_offsets(txn, "g", {(RUNS, 0): (7, "k1 0")})
    assert kafka.committed("g", RUNS, 0) == (0, None)
    kafka.commit(txn, 1)
    assert kafka.committed("g", RUNS, 0) == (7, "k1 0")


def test_unavailable_broker_aborts_the_commit() -> None:
    kafka = _kafka()
    epoch = kafka.init_transactions("t", 0)
    txn = kafka.begin("t", epoch, 0)
    kafka.send(txn, RUNS, b"k", b"v", 0, 0)
    kafka.available = False
    with pytest.raises(BrokerUnavailable):
        kafka.commit(txn, 1)
    kafka.available = True
    assert _values(kafka) == []


def test_transaction_timeout_aborts_a_dead_producers_transaction() -> None:
    kafka = _kafka()
    epoch = kafka.init_transactions("t", 0)
    txn = kafka.begin("t", epoch, 0)
    kafka.send(txn, RUNS, b"k", b"v", 0, 0)
    kafka.append(RUNS, b"k", b"after", 0, 1)
    # Past its timeout but before the broker's reaper next runs: still open, and
    # the record after it is held back from read_committed readers.
    assert kafka.expire(TRANSACTION_TIMEOUT_MS + 1) == []
    assert _values(kafka) == []
    reaper_ms = TRANSACTION_TIMEOUT_MS + TRANSACTION_CLEANUP_INTERVAL_MS
    assert kafka.expire(reaper_ms - 1) == []
    assert kafka.expire(reaper_ms) == [txn]
    assert _values(kafka) == [b"after"]


def test_a_producer_declares_its_own_transaction_timeout() -> None:
    """InitProducerId carries the producer's transaction.timeout.ms: a short one frees
    read_committed readers of a dead producer's partitions sooner."""
    kafka = _kafka()
    short = kafka.begin("short", kafka.init_transactions("short", 0, 10_000), 0)
    default = kafka.begin("default", kafka.init_transactions("default", 0), 0)
    kafka.send(short, RUNS, b"k", b"v", 0, 0)
    kafka.send(default, RUNS, b"k", b"w", 0, 0)
    assert kafka.expire(20_000) == [short]
    assert default.status == OPEN


def test_compaction_keeps_the_latest_record_per_key_and_the_offsets() -> None:
    kafka = _kafka()
    for value in (b"a1", b"b1", b"a2"):
        kafka.append(SCHEDULES, value[:1], value, 0, 0)
    kafka.append(SCHEDULES, b"b", None, 0, 0)  # tombstone
    assert kafka.compact(SCHEDULES) == 2
    records, _ = kafka.fetch(SCHEDULES, 0, 0, 100)
    assert [(r.offset, r.key, r.value) for r in records] == [(2, b"a", b"a2"), (3, b"b", None)]


def test_a_silent_member_keeps_its_partitions_until_its_session_expires() -> None:
    group = Group("g", 6, session_timeout_ms=10_000)
    a = group.join("a")
    b = group.join("b")
    assert group.assigned(a) == frozenset({0, 1, 2})
    group.silent(a, 1_000)
    assert group.expire(10_999) == []
    assert group.assigned(a) == frozenset({0, 1, 2})  # paused, but still the owner
    assert group.expire(11_000) == [a]
    assert group.assigned(a) is None  # it learns this only when it polls again
    assert group.assigned(b) == frozenset(range(6))


def test_no_session_expires_while_the_broker_is_down() -> None:
    group = Group("g", 2, session_timeout_ms=10_000)
    a = group.join("a")
    group.silent(a, 0)
    group.broker_back(50_000)
    assert group.expire(59_999) == []
    assert group.expire(60_000) == [a]


def test_the_simulated_broker_times_transactions_out_as_the_product_assumes() -> None:
    """The simulation may not import the clients' module (it loads aiokafka), so its
    copies of the timings are checked here: the client default every producer keeps
    unless it declares its own, and the reaper interval the workers' guard assumes."""
    from actors.worker import membership
    from topics import clients

    assert clients.TRANSACTION_TIMEOUT_MS == TRANSACTION_TIMEOUT_MS
    assert membership.BROKER_TXN_CLEANUP_INTERVAL_MS == TRANSACTION_CLEANUP_INTERVAL_MS
    assert membership.TRANSACTION_TIMEOUT_MS < TRANSACTION_TIMEOUT_MS
