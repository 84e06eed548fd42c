"""The scheduler's view of its Kafka target topics: refusals, their expiry, patterns."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import (
    KafkaError,
    KafkaTimeoutError,
    NotLeaderForPartitionError,
    ProducerFenced,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)

from actors.scheduler.shard_runner import ShardWriteFailed
from actors.scheduler.target_table import (
    REFUSED_FOR_S,
    TargetTable,
    patterns_from_env,
    refused_target,
)
from actors.scheduler.writer import BatchRefused, SentBatch
from topics.names import TopicKind
from topics.targets import TargetTopic


def _wrapped(inner: BaseException) -> ShardWriteFailed:
    """As `ShardRunner.write` raises it: the cause chained."""
    try:
        raise ShardWriteFailed("shard 0: transaction failed") from inner
    except ShardWriteFailed as outer:
        return outer


def _refused(topic: TopicKind | str, error: KafkaError | None = None) -> BatchRefused:
    loop = asyncio.new_event_loop()
    try:
        future: asyncio.Future[None] = loop.create_future()
        return BatchRefused(SentBatch(topic, 0, 1, future), error or KafkaError("CorruptRecord"))
    finally:
        loop.close()


def test_a_refused_target_batch_names_its_topic_and_the_brokers_reason() -> None:
    found = refused_target(_wrapped(_refused("orders.due")), "ns")
    assert found is not None and found[0] == "orders.due" and "CorruptRecord" in found[1]
    assert refused_target(_wrapped(_refused(TopicKind.RUNS)), "ns") is None
    assert refused_target(_wrapped(KafkaError("broker down")), "ns") is None


@pytest.mark.parametrize(
    "error",
    [ProducerFenced(), KafkaTimeoutError(), NotLeaderForPartitionError(), RequestTimedOutError()],
)
def test_a_fenced_zombie_or_a_broker_away_is_no_refusal_of_the_target_topic(
    error: KafkaError,
) -> None:
    # Taken for a refusal, a zombie's fenced batch dead-lettered every occurrence of the
    # topic for a minute (the chaos test's gaps); the new owner or the rebuild fires them.
    assert refused_target(_wrapped(_refused("orders.due", error)), "ns") is None
    gone = refused_target(_wrapped(_refused("orders.due", UnknownTopicOrPartitionError())), "ns")
    assert gone is not None and gone[0] == "orders.due"


def test_an_unauthorized_target_topic_is_found_but_never_one_of_the_namespaces() -> None:
    denied = TopicAuthorizationFailedError({"orders.due", "ns.runs"})
    assert refused_target(_wrapped(denied), "ns") == (
        "orders.due",
        "not authorized: the scheduler's principal may not Write it",
    )
    assert refused_target(_wrapped(TopicAuthorizationFailedError({"ns.runs"})), "ns") is None


def test_a_refusal_lasts_its_while_and_the_snapshot_says_why() -> None:
    table = TargetTable("ns", ("orders.*",), {"orders.due": TargetTopic(3)})
    table.refuse("orders.due", "CorruptRecord", mono_s=100.0)
    during = table.snapshot(100.0 + REFUSED_FOR_S - 1)
    assert "CorruptRecord" in (during.why_not("orders.due") or "")
    assert table.snapshot(100.0 + REFUSED_FOR_S + 1).why_not("orders.due") is None
    assert "kafkron's own" in (table.snapshot(0).why_not("ns.runs") or "")


def test_patterns_come_from_the_flags_and_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKRON_TARGET_TOPICS", "audit.log, orders.*")
    assert patterns_from_env(("orders.*", "billing")) == ("orders.*", "billing", "audit.log")
    with pytest.raises(ValueError, match="prefix ending in"):
        patterns_from_env(("*",))
    with pytest.raises(ValueError, match="prefix ending in"):
        patterns_from_env(("a*b",))
