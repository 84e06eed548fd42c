"""The scheduler's view of its Kafka target topics: refusals, their expiry, patterns."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import (
    ConcurrentTransactions,
    CorruptRecordException,
    InvalidProducerEpoch,
    InvalidProducerIdMapping,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidTxnState,
    KafkaConnectionError,
    KafkaError,
    KafkaStorageError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    MessageSizeTooLargeError,
    NotEnoughReplicasError,
    NotLeaderForPartitionError,
    OutOfOrderSequenceNumber,
    PolicyViolationError,
    ProducerFenced,
    RecordListTooLargeError,
    RecordTooLargeError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
    UnknownError,
    UnknownProducerId,
    UnknownTopicOrPartitionError,
    UnsupportedForMessageFormatError,
)

from actors.scheduler.shard_runner import ShardWriteFailed
from actors.scheduler.target_table import (
    REFUSED_FIRST_S,
    REFUSED_MAX_S,
    TargetTable,
    patterns_from_env,
    refused_for_s,
    refused_target,
)
from actors.scheduler.writer import BatchRefused, SentBatch, TargetUnacknowledged
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
        return BatchRefused(SentBatch(topic, 0, 1, future), error or CorruptRecordException())
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


def test_a_queue_topics_refusal_is_found_and_fails_its_attempts_for_a_while() -> None:
    # A queue's topic is the namespace's own, yet it is refused like a target's: its
    # batch refused, or Write on it not authorized (docs/DESIGN.md §8.1).
    found = refused_target(_wrapped(_refused("ns.runs.gpu")), "ns")
    assert found is not None and found[0] == "ns.runs.gpu"
    denied = TopicAuthorizationFailedError({"ns.runs.gpu", "ns.runs"})
    assert refused_target(_wrapped(denied), "ns") == (
        "ns.runs.gpu",
        "not authorized: the scheduler's principal may not Write it",
    )
    table = TargetTable("ns", (), {"ns.runs.gpu": TargetTopic(3)})
    assert table.snapshot(0).queue_why_not("ns.runs.gpu") is None
    table.refuse("ns.runs.gpu", "TopicAuthorizationFailedError", mono_s=100.0)
    during = table.snapshot(100.0 + REFUSED_FIRST_S - 1).queue_why_not("ns.runs.gpu")
    assert "refused the last record" in (during or "")
    assert table.snapshot(100.0 + REFUSED_FIRST_S + 1).queue_why_not("ns.runs.gpu") is None
    assert "topics create --queue cpu" in (table.snapshot(0).queue_why_not("ns.runs.cpu") or "")


def test_the_ratelimits_topics_refusal_is_found_and_rejects_pauses_for_a_while() -> None:
    # {ns}.ratelimits refused (a hand-made ACL without Write, an invalid record): marked
    # as a queue topic is, so the rebuilt shard rejects pauses instead of writing them
    # into every transaction again (docs/DESIGN.md §8.5). Other own topics stay the
    # transaction's problem.
    found = refused_target(_wrapped(_refused(TopicKind.RATELIMITS)), "ns")
    assert found is not None and found[0] == "ns.ratelimits" and "CorruptRecord" in found[1]
    fenced = _refused(TopicKind.RATELIMITS, ProducerFenced())
    assert refused_target(_wrapped(fenced), "ns") is None
    denied = TopicAuthorizationFailedError({"ns.ratelimits", "ns.runs"})
    assert refused_target(_wrapped(denied), "ns") == (
        "ns.ratelimits",
        "not authorized: the scheduler's principal may not Write it",
    )
    table = TargetTable("ns", (), {"ns.ratelimits": TargetTopic(1)})
    assert table.snapshot(0).ratelimits_why_not() is None
    table.refuse("ns.ratelimits", "not authorized", mono_s=100.0)
    during = table.snapshot(100.0 + REFUSED_FIRST_S - 1).ratelimits_why_not()
    assert "refused the last record" in (during or "")
    assert table.snapshot(100.0 + REFUSED_FIRST_S + 1).ratelimits_why_not() is None
    gone = TargetTable("ns", ()).snapshot(0).ratelimits_why_not()
    assert "does not exist" in (gone or "") and "kafkron topics create" in (gone or "")


def test_the_snapshot_states_when_a_queue_topics_refusal_ends_on_the_cores_clock() -> None:
    # So an attempt the topic refused waits for that end, not the backoff (§8.1).
    table = TargetTable("ns", (), {"ns.runs.gpu": TargetTopic(3)})
    table.refuse("ns.runs.gpu", "TopicAuthorizationFailedError", mono_s=100.0)
    table.refuse("ns.runs.gpu", "TopicAuthorizationFailedError", mono_s=100.0)  # a second: 2x
    view = table.snapshot(110.0, wall_ms=1_000_000)
    assert view.refused_until_ms == {
        "ns.runs.gpu": 1_000_000 + int(2 * REFUSED_FIRST_S - 10) * 1000
    }
    assert (
        view.queue_retry_floor_ms("ns.runs.gpu", 1_000_000) == int(2 * REFUSED_FIRST_S - 10) * 1000
    )
    assert view.queue_retry_floor_ms("ns.runs.cpu", 1_000_000) == view.refresh_ms > 0  # missing


def test_a_refusal_lasts_its_while_and_the_snapshot_says_why() -> None:
    table = TargetTable("ns", ("orders.*",), {"orders.due": TargetTopic(3)})
    table.refuse("orders.due", "CorruptRecord", mono_s=100.0)
    during = table.snapshot(100.0 + REFUSED_FIRST_S - 1)
    assert "CorruptRecord" in (during.why_not("orders.due") or "")
    assert table.snapshot(100.0 + REFUSED_FIRST_S + 1).why_not("orders.due") is None
    assert "kafkron's own" in (table.snapshot(0).why_not("ns.runs") or "")


@pytest.mark.parametrize(
    "error",
    [
        UnknownTopicOrPartitionError(),
        TopicAuthorizationFailedError("orders.due"),
        MessageSizeTooLargeError(),
        RecordListTooLargeError(),
        RecordTooLargeError(),
        InvalidTimestampError(),
        CorruptRecordException(),
        InvalidTopicError(),
        PolicyViolationError(),
        UnsupportedForMessageFormatError(),
        UnknownError(),  # INVALID_RECORD (87), a code aiokafka 0.14 does not know
        TargetUnacknowledged.past("orders.due", 0, 10.0),
    ],
)
def test_an_error_about_the_topic_itself_refuses_the_topic(error: BaseException) -> None:
    found = refused_target(_wrapped(_refused("orders.due", error)), "ns")  # type: ignore[arg-type]
    assert found is not None and found[0] == "orders.due"
    assert type(error).__name__ in found[1]


@pytest.mark.parametrize(
    "error",
    [
        InvalidTxnState(),
        ConcurrentTransactions(),
        InvalidProducerEpoch(),
        InvalidProducerIdMapping(),
        UnknownProducerId(),
        OutOfOrderSequenceNumber(),
        TransactionalIdAuthorizationFailed(),
        ProducerFenced(),
        KafkaTimeoutError(),
        RequestTimedOutError(),
        NotLeaderForPartitionError(),
        LeaderNotAvailableError(),
        NotEnoughReplicasError(),
        KafkaStorageError(),
        KafkaConnectionError(),
        KafkaError("broker down"),
        asyncio.CancelledError(),
    ],
)
def test_an_error_of_the_transaction_or_the_broker_is_never_blamed_on_the_topic(
    error: BaseException,
) -> None:
    # A review found InvalidTxnState taken for the topic's refusal: the topic's
    # occurrences were dead-lettered for a transaction problem a rebuild heals.
    assert refused_target(_wrapped(_refused("orders.due", error)), "ns") is None  # type: ignore[arg-type]


def test_a_topic_refusing_again_and_again_is_tried_ever_less_often() -> None:
    assert [refused_for_s(n) for n in (1, 2, 3, 4)] == [
        REFUSED_FIRST_S,
        2 * REFUSED_FIRST_S,
        4 * REFUSED_FIRST_S,
        8 * REFUSED_FIRST_S,
    ]
    assert refused_for_s(5) == refused_for_s(10_000) == REFUSED_MAX_S
    with pytest.raises(ValueError):
        refused_for_s(0)


def test_the_table_backs_off_per_topic_and_a_delivery_ends_the_row() -> None:
    known = {"orders.due": TargetTopic(3), "orders.late": TargetTopic(1)}
    table = TargetTable("ns", ("orders.*",), known)
    table.refuse("orders.due", "CorruptRecord", mono_s=0.0)
    table.refuse("orders.due", "CorruptRecord", mono_s=100.0)
    table.refuse("orders.late", "PolicyViolation", mono_s=100.0)
    # The second refusal in a row lasts twice the first; the other topic its own first.
    assert table.snapshot(100.0 + 2 * REFUSED_FIRST_S - 1).why_not("orders.due")
    assert table.snapshot(100.0 + REFUSED_FIRST_S - 1).why_not("orders.late")
    assert table.snapshot(100.0 + REFUSED_FIRST_S + 1).why_not("orders.late") is None
    assert table.snapshot(100.0 + 2 * REFUSED_FIRST_S + 1).why_not("orders.due") is None
    table.delivered(frozenset({"orders.due"}))
    table.refuse("orders.due", "CorruptRecord", mono_s=1000.0)
    assert table.snapshot(1000.0 + REFUSED_FIRST_S + 1).why_not("orders.due") is None
    assert table.strikes == {"orders.due": 1, "orders.late": 1}


def test_patterns_come_from_the_flags_and_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKRON_TARGET_TOPICS", "audit.log, orders.*")
    assert patterns_from_env(("orders.*", "billing")) == ("orders.*", "billing", "audit.log")
    with pytest.raises(ValueError, match="prefix ending in"):
        patterns_from_env(("*",))
    with pytest.raises(ValueError, match="prefix ending in"):
        patterns_from_env(("a*b",))


def test_the_runtime_learns_when_the_next_refusal_mark_ends() -> None:
    # A snapshot is a copy: the runtime hands a new one when a mark ends, so an attempt
    # retried at that end does not meet the mark again and spend the retry budget.
    table = TargetTable("ns", (), {"ns.runs.gpu": TargetTopic(3), "ns.runs.cpu": TargetTopic(3)})
    assert table.next_end_s(0.0) == float("inf")
    table.refuse("ns.runs.gpu", "NotEnoughReplicas", mono_s=100.0)
    table.refuse("ns.runs.cpu", "NotEnoughReplicas", mono_s=130.0)
    assert table.next_end_s(100.0) == 100.0 + REFUSED_FIRST_S
    assert table.next_end_s(100.0 + REFUSED_FIRST_S) == 130.0 + REFUSED_FIRST_S
    assert table.next_end_s(130.0 + REFUSED_FIRST_S) == float("inf")
