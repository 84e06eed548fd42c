"""Turning a shard's `OutRecord`s into a few record batches of one transaction.

The budget of a scheduler is spent in per-record Python (docs/DESIGN.md §10.6), so records
are not handed to ``producer.send`` one coroutine at a time: they are grouped by
(topic, partition) here — a pure step, tested on its own — and appended to
aiokafka ``BatchBuilder``s, one ``send_batch`` per full batch. The transaction's
commit flushes them all; the returned futures carry the broker's append stamps
for the skew estimator.

A record batch never exceeds what its topic accepts (``max.message.bytes``, read
from the topic at start and passed in as ``limits``): a batch over the limit is
refused whole by the broker, taking every record that shared it down with the
one that was too large. A single record that alone exceeds its topic's limit is
the caller's to handle before planning (`actors.scheduler.oversize`).

Partition choice is Kafka's default partitioner (murmur2 of the key), computed
here so it does not depend on the producer's configuration; a record with an
explicit partition (changelog, forwards, a Kafka target's record) keeps it; a
keyless record (a rejected command that had no key) goes round-robin.

A Kafka target's record (`topics.records.TargetRecord`) names its topic itself and
carries headers; it is batched like the others, under its topic's name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.producer.message_accumulator import BatchBuilder

from actors.scheduler.oversize import BATCH_OVERHEAD_BYTES
from actors.scheduler.target_acks import FAILED, LANDED, PENDING, Failed, GiveUp, Landed, verdict
from topics.closing import within
from topics.names import Settings, TopicKind
from topics.partitioner import murmur2_partition
from topics.records import OutRecord, TargetRecord

_SCHEDULES = TopicKind.SCHEDULES
_CACHE_MAX = 1_000_000
# Below the broker's default message.max.bytes (1 MiB) with room for batch overhead.
MAX_BATCH_BYTES = 900 * 1024

# key, value, timestamp_ms, headers (a target record's; else empty)
Planned = tuple[bytes | None, bytes | None, int | None, tuple[tuple[str, bytes], ...]]


@dataclass(frozen=True, slots=True)
class TargetDest:
    """A Kafka target's topic as a destination (and a key of ``limits``). Not its bare
    name: `TopicKind` is a ``StrEnum``, so a target topic called ``results`` would be
    equal to ``TopicKind.RESULTS`` as a dict key, and its records and kafkron's own
    would share one batch, written to whichever topic came first."""

    name: str


Destination = tuple[TopicKind | TargetDest, int]  # (kafkron topic or a target, partition)
_NO_HEADERS: tuple[tuple[str, bytes], ...] = ()
_NO_HEADER_LIST: list[tuple[str, bytes]] = []  # never changed: aiokafka only reads it


@dataclass(slots=True)
class WritePlan:
    """Records grouped per destination, in the order the shard returned them."""

    groups: dict[Destination, list[Planned]] = field(default_factory=dict)
    records: int = 0

    def count(self, kind: TopicKind) -> int:
        return sum(len(v) for (k, _), v in self.groups.items() if k is kind)


class Partitioner:
    """Chooses the partition of each out record; holds the round-robin cursor."""

    def __init__(
        self,
        partition_counts: Mapping[TopicKind, int],
        as_targets: Mapping[TopicKind, str] | None = None,
    ) -> None:
        self._counts = dict(partition_counts)
        # kafkron's own topics written as a target's (by name, under its protection:
        # `leaderless`, the acknowledgement deadline, a refusal marking the topic):
        # ``{ns}.ratelimits``, whose record is a command's effect, not the shard's state.
        self._as_targets = {kind: TargetDest(name) for kind, name in (as_targets or {}).items()}
        self.guarded = frozenset(name for name in (as_targets or {}).values())
        """The names of the own topics written as targets."""
        self._cursor = 0
        # murmur2 in Python costs ~15 µs; a schedule's id is hashed at every fire,
        # so remember it (one entry per id and topic, dropped wholesale past a cap).
        self._cache: dict[tuple[TopicKind, bytes], int] = {}
        self._dests: dict[str, TargetDest] = {}  # a target topic's name -> its destination

    def partition_for(self, record: OutRecord) -> int:
        if record.partition is not None:
            return record.partition
        kind = record.topic
        if not isinstance(kind, TopicKind):
            raise ValueError(f"a record for topic {kind!r} must name its partition")
        key = record.key
        if key is None:
            self._cursor += 1
            return self._cursor % self._counts[kind]
        cache_key = (kind, key)
        partition = self._cache.get(cache_key)
        if partition is None:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            partition = self._cache[cache_key] = murmur2_partition(key, self._counts[kind])
        return partition

    def plan(self, records: list[OutRecord]) -> WritePlan:
        """Group by destination; of several changelog records of one key, keep the last.

        A changelog record is a schedule's whole state, so within one transaction
        only the last one of a key says anything (compaction would drop the rest);
        the runs, results and other records are all kept, in order.
        """
        plan = WritePlan()
        groups = plan.groups
        last_changelog: dict[bytes | None, int] = {
            record.key: i for i, record in enumerate(records) if record.topic is _SCHEDULES
        }
        partition_for = self.partition_for
        dests = self._dests
        n = 0
        for i, record in enumerate(records):
            if record.topic is _SCHEDULES and last_changelog[record.key] != i:
                continue
            kind = record.topic
            if isinstance(kind, TopicKind):
                guarded = self._as_targets.get(kind)
                dest: Destination = (guarded or kind, partition_for(record))
            else:  # a target's topic: one TargetDest per name, hashed once
                target = dests.get(kind)
                if target is None:
                    target = dests[kind] = TargetDest(kind)
                dest = (target, partition_for(record))
            bucket = groups.get(dest)
            if bucket is None:
                bucket = groups[dest] = []
            headers = record.headers if type(record) is TargetRecord else _NO_HEADERS
            bucket.append((record.key, record.value, record.timestamp_ms, headers))
            n += 1
        plan.records = n
        return plan


def shard_partitioner(settings: Settings, counts: Mapping[TopicKind, int]) -> Partitioner:
    """A scheduler's `Partitioner`: ``{ns}.ratelimits`` written as a target is, so a
    pause its partition cannot take (no leader, the topic gone or refusing) is kept out
    of the transaction and rejected, never holding the shard (docs/DESIGN.md §8.5)."""
    return Partitioner(counts, {TopicKind.RATELIMITS: settings.topic(TopicKind.RATELIMITS)})


@dataclass(frozen=True, slots=True)
class SentBatch:
    topic: TopicKind | str
    """One of kafkron's topics, or a Kafka target's own topic name."""
    partition: int
    records: int
    future: asyncio.Future[Any]


def batch_bytes(
    limits: Mapping[TopicKind | TargetDest, int] | None, kind: TopicKind | TargetDest
) -> int:
    """The largest batch to build for ``kind``: the topic's limit, at most `MAX_BATCH_BYTES`.

    A target topic's limit is the one its records were checked against
    (`actors.shard.delivery`, from `topics.targets.TargetTopics`), so a record that
    fits its topic is never refused for the company it keeps in a batch.
    """
    if limits is None or kind not in limits:
        return MAX_BATCH_BYTES
    return max(1, min(MAX_BATCH_BYTES, limits[kind] - BATCH_OVERHEAD_BYTES))


async def send_plan(
    producer: AIOKafkaProducer,
    settings: Settings,
    plan: WritePlan,
    limits: Mapping[TopicKind | TargetDest, int] | None = None,
) -> list[SentBatch]:
    """Append every planned record to batches and submit them; one await per batch.

    Must run inside an open transaction. The caller must await every returned
    future before committing (`refused`): aiokafka commits a transaction even when
    one of its batches was refused (the refusal only fails that batch's future).
    """
    sent: list[SentBatch] = []
    for (kind, partition), items in plan.groups.items():
        topic = settings.topic(kind) if isinstance(kind, TopicKind) else kind.name
        sent_as = kind if isinstance(kind, TopicKind) else kind.name  # SentBatch names it
        size_bytes = batch_bytes(limits, kind)
        new_batch = producer.create_batch if limits is None else partial(_new_batch, size_bytes)
        batch = new_batch()
        in_batch = 0
        for key, value, stamp, headers in items:
            listed = list(headers) if headers else _NO_HEADER_LIST  # the builder takes lists
            if batch.append(key=key, value=value, timestamp=stamp, headers=listed) is None:
                fut = await producer.send_batch(batch, topic, partition=partition)
                sent.append(SentBatch(sent_as, partition, in_batch, fut))
                batch = new_batch()
                in_batch = 0
                # The first record of a batch is always taken, whatever its size; one
                # larger than the topic accepts is refused by the broker, whose error
                # then fails the whole transaction (see `refused`).
                batch.append(key=key, value=value, timestamp=stamp, headers=listed)
            in_batch += 1
        if in_batch:
            fut = await producer.send_batch(batch, topic, partition=partition)
            sent.append(SentBatch(sent_as, partition, in_batch, fut))
    return sent


def _new_batch(size_bytes: int) -> Any:
    # aiokafka's create_batch() sizes batches for the producer as a whole; a topic may
    # accept less, so the builder is made with this topic's size.
    return BatchBuilder(size_bytes, 0, is_transactional=True)  # 0: no compression


class BatchRefused(Exception):
    """The broker refused a batch of an open transaction; the transaction must not commit."""

    def __init__(self, batch: SentBatch, error: BaseException) -> None:
        self.batch = batch
        self.error = error
        super().__init__(
            f"{batch.topic}[{batch.partition}]: a batch of {batch.records} records was"
            f" refused ({type(error).__name__}: {error})"
        )


async def refused(sent: list[SentBatch]) -> BatchRefused | None:
    """Wait for every batch's acknowledgement; the first refusal, or None if all landed.

    aiokafka keeps a transaction open and committable after a batch fails (the error
    only resolves that batch's future), so a commit without this check would make the
    rest of the transaction visible without the refused records.
    """
    if not sent:
        return None
    outcomes = await asyncio.gather(*(b.future for b in sent), return_exceptions=True)
    for batch, outcome in zip(sent, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            return BatchRefused(batch, outcome)
    return None


class TargetUnacknowledged(Exception):
    """A target's partition that will not acknowledge: its batch was not acknowledged by
    its deadline (`actors.scheduler.target_acks`) while the rest of the transaction was,
    or the producer already knows it has no leader (`leaderless`)."""

    def __init__(self, topic: str, partition: int, why: str) -> None:
        self.topic = topic
        self.partition = partition
        super().__init__(f"{topic}[{partition}]: {why}")

    @classmethod
    def past(cls, topic: str, partition: int, deadline_s: float) -> TargetUnacknowledged:
        return cls(
            topic,
            partition,
            f"no acknowledgement within {deadline_s:g} s (a partition without a leader,"
            " or fewer in-sync replicas than the topic's min.insync.replicas)",
        )


def leaderless(
    plan: WritePlan,
    leader_of: Callable[[str, int], int | None],
    only: Collection[str] | None = None,
) -> tuple[str, int] | None:
    """The first target (topic, partition) of ``plan`` that ``leader_of`` (the producer's
    metadata: a node id, -1 for no leader, None if not known yet) says has no leader;
    with ``only``, among the targets so named.

    Such a partition must not join a transaction: the broker ends a transaction only
    once its markers are written to every partition in it, so one without a leader
    would hold the shard's transactional id, aborted or not, until a leader returns.
    """
    for kind, partition in plan.groups:
        if type(kind) is not TargetDest or (only is not None and kind.name not in only):
            continue
        if leader_of(kind.name, partition) == -1:
            return kind.name, partition
    return None


METADATA_REFRESH_TIMEOUT_S = 5.0
"""How long `leaderless_after_refresh` waits for fresh metadata before it trusts the
cached answer: a broker that does not answer in this time is no better judged later."""


async def leaderless_after_refresh(
    plan: WritePlan,
    leader_of: Callable[[str, int], int | None],
    refresh: Callable[[], Awaitable[Any]],
    only: Collection[str] | None = None,
) -> tuple[str, int] | None:
    """`leaderless`, asked again after ``refresh`` (the producer's metadata update) when
    the cached metadata names a partition without a leader.

    The cache is what a producer last heard, and nothing refreshes it while the
    partition is kept out of every transaction: no batch is sent to it, so no send
    error asks for metadata, and the periodic refresh (``metadata.max.age.ms``, five
    minutes by default) would keep the topic refused long after its leader is back.
    One refresh per suspected partition costs a metadata request only on this path.
    """
    stuck = leaderless(plan, leader_of, only)
    if stuck is None:
        return None
    try:
        await within(refresh(), METADATA_REFRESH_TIMEOUT_S)
    except (TimeoutError, KafkaError, OSError):
        return stuck  # no fresher answer: the cached one stands
    return leaderless(plan, leader_of, only)


def _state(future: asyncio.Future[Any]) -> int:
    if not future.done():
        return PENDING
    if future.cancelled() or future.exception() is not None:
        return FAILED
    return LANDED


async def acknowledged(sent: list[SentBatch], target_deadline_s: float) -> BatchRefused | None:
    """`refused` for a transaction with a Kafka target's batches: the first refusal, a
    `TargetUnacknowledged` refusal of a target batch past its deadline, or None if all
    landed. The decision is `target_acks.verdict`'s; this only waits and looks."""
    began_s = time.monotonic()
    targets = [not isinstance(b.topic, TopicKind) for b in sent]
    while True:
        states = [(t, _state(b.future)) for t, b in zip(targets, sent, strict=True)]
        decided = verdict(states, time.monotonic() - began_s, target_deadline_s)
        if isinstance(decided, Landed):
            return None
        if isinstance(decided, Failed):
            batch = sent[decided.index]
            cause = None if batch.future.cancelled() else batch.future.exception()
            return BatchRefused(batch, cause if cause is not None else asyncio.CancelledError())
        if isinstance(decided, GiveUp):
            batch = sent[decided.index]
            return BatchRefused(
                batch,
                TargetUnacknowledged.past(str(batch.topic), batch.partition, target_deadline_s),
            )
        waited = [
            b.future
            for t, b in zip(targets, sent, strict=True)
            if not b.future.done() and not (decided.own_only and t)
        ]
        await asyncio.wait(waited, timeout=decided.timeout_s)
