"""One shard's transactional producer: the Kafka side of `actors.scheduler.lifecycle`.

A `ShardRunner` carries out, on aiokafka, the producer actions the lifecycle
machine decides for one build attempt of shard p (the machine decides when):

- ``fence``: start a producer with ``transactional.id = {ns}.shard.{p}``. Its
  ``init_transactions`` bumps the id's epoch: every earlier producer with this id
  (a previous owner, alive, dead or paused) is fenced from then on, and its open
  transaction is aborted.
- ``sample_clock``: one record to ``{ns}.runs`` in a transaction that is always
  aborted; the acknowledgement carries the broker's LogAppendTime (None if the
  topic is not LogAppendTime). No read_committed reader ever sees the record.
- ``write``: records plus the consumed offsets in ONE transaction. Every batch's
  acknowledgement is awaited *before* the commit: aiokafka commits a transaction
  even when one of its batches was refused (the refusal only fails that batch's
  future), which would make the rest visible without the refused records. A
  refused batch aborts the transaction instead (`ShardWriteFailed`).
- ``close``: stop the producer, bounded (`topics.closing`). An open transaction is
  left for the next owner's ``init_transactions`` to abort.

The runner never retries a failed transaction: the core has already advanced in
memory, and only the changelog knows the state before the batch; the machine
drops the shard and rebuilds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, ProducerFenced, TopicAuthorizationFailedError

from actors.monotonic import monotonic_ms
from actors.observe import metrics
from actors.observe.events import log_committed
from actors.scheduler.clock import Clock
from actors.scheduler.figures import RateWindow
from actors.scheduler.lifecycle import ClockSample
from actors.scheduler.probe import CLOCK_PROBE_KEY, CLOCK_PROBE_VALUE
from actors.scheduler.writer import (
    MAX_BATCH_BYTES,
    METADATA_REFRESH_TIMEOUT_S,
    BatchRefused,
    Partitioner,
    SentBatch,
    TargetDest,
    TargetUnacknowledged,
    WritePlan,
    acknowledged,
    leaderless_after_refresh,
    refused,
    send_plan,
)
from topics.clients import transactional_producer_kwargs
from topics.closing import bounded, stop_producer, within
from topics.fencing import fence_others
from topics.names import Settings, TopicKind
from topics.records import OutRecord

# LogAppendTime (timestamp_type 1) is what makes a produce ack carry the broker clock.
_LOG_APPEND_TIME = 1
# An abort the coordinator does not answer is abandoned after this (see `_abort`).
ABORT_TIMEOUT_S = 5.0

Mono = Callable[[], int]


class ShardFenced(Exception):
    """Another producer with this shard's transactional id started: someone else owns p."""


class ShardWriteFailed(Exception):
    """A transaction did not commit (refused batch, broker down, timeout): drop the shard."""


class ShardRunner:
    def __init__(
        self,
        *,
        partition: int,
        token: int,
        settings: Settings,
        clock: Clock,
        partitioner: Partitioner,
        commit_timeout_s: float,
        limits: Mapping[TopicKind | TargetDest, int] | None = None,
        mono: Mono = monotonic_ms,
        target_ack_timeout_s: float | None = None,
    ) -> None:
        self.partition = partition
        self.token = token
        self._settings = settings
        self._clock = clock
        self._mono = mono
        self._partitioner = partitioner
        self._commit_timeout_s = commit_timeout_s
        self._limits = limits
        self._target_ack_timeout_s = target_ack_timeout_s
        self.last_targets: frozenset[str] = frozenset()
        """The Kafka target topics the last committed transaction wrote to."""
        self._producer: AIOKafkaProducer | None = None
        self.transactional_id = settings.shard_transactional_id(partition)
        self.restore_ms: float | None = None
        self.restored_records = 0
        self.restored_keys = 0
        # How the core was built, for the log line (None: a restore from the changelog).
        self.restore_text: str | None = None
        self.transactions = RateWindow()
        self.records_written = 0
        self.commands_tp = TopicPartition(settings.topic(TopicKind.COMMANDS), partition)
        self.results_tp = TopicPartition(settings.topic(TopicKind.RESULTS), partition)

    async def fence(self) -> None:
        """Start this shard's producer: its ``init_transactions`` fences every earlier owner.

        During an upgrade from 0.1 the other form of the shard's transactional id is
        fenced first (`topics.fencing`): an owner from before the rolling restart may
        hold it.
        """
        await fence_others(self._settings, "shard", self.partition)
        producer = AIOKafkaProducer(
            **transactional_producer_kwargs(
                self._settings,
                self.transactional_id,
                self.transactional_id,
                max_batch_size=MAX_BATCH_BYTES,
                linger_ms=0,
            )
        )
        try:
            await producer.start()
        except BaseException:
            await stop_producer(producer, f"stopping the producer of shard {self.partition}")
            raise
        self._producer = producer

    async def sample_clock(self) -> ClockSample | None:
        """One broker-time sample from an aborted transaction; None if runs gives none.

        Raises `ShardFenced` if another producer took the transactional id (the
        check a parked shard makes before it resumes), `ShardWriteFailed` otherwise.
        """
        producer = self._require_producer()
        topic = self._settings.topic(TopicKind.RUNS)
        try:
            await producer.begin_transaction()
            try:
                sent_ms, sent_mono_ms = self._clock.now_ms(), self._mono()
                future = await producer.send(topic, value=CLOCK_PROBE_VALUE, key=CLOCK_PROBE_KEY)
                metadata = await future
                acked_ms, acked_mono_ms = self._clock.now_ms(), self._mono()
            except BaseException:
                # A fenced producer refuses the abort too; the first error is the one to report.
                with contextlib.suppress(Exception):
                    await producer.abort_transaction()
                raise
            await producer.abort_transaction()
        except (KafkaError, OSError, AssertionError) as exc:
            raise _classify(exc, f"shard {self.partition}: clock probe") from exc
        if metadata is None or metadata.timestamp_type != _LOG_APPEND_TIME:
            return None
        return ClockSample(sent_ms, acked_ms, metadata.timestamp, sent_mono_ms, acked_mono_ms)

    async def write(
        self, out: list[OutRecord], offsets: dict[TopicPartition, int]
    ) -> list[ClockSample]:
        """``out`` plus ``offsets`` in one transaction; the broker stamps of its runs batches.

        ``offsets`` maps a consumed partition to the next offset to read. Raises
        `ShardFenced` or `ShardWriteFailed`; after either, the shard is dropped.
        """
        producer = self._require_producer()
        plan = self._partitioner.plan(out)
        if not plan.records and not offsets:
            return []
        cluster = producer.client.cluster
        # kafkron's own topics written as targets ({ns}.ratelimits) are always checked:
        # a pause that cannot be written is rejected with its reason, which costs far
        # less than the occurrences a target's check fails (off unless a deadline is set).
        guarded = [name for name in self._partitioner.guarded if _in_plan(plan, name)]
        stuck = None
        if guarded or self._target_ack_timeout_s is not None:
            await _learn_topics(producer, guarded)
            stuck = await leaderless_after_refresh(
                plan,
                lambda topic, p: cluster.leader_for_partition(TopicPartition(topic, p)),
                producer.client.force_metadata_update,
                only=guarded if self._target_ack_timeout_s is None else None,
            )
        if stuck is not None:
            # Kept out of the transaction (see `leaderless`); the topic is refused and the
            # rebuilt shard fails its occurrences visibly (`target_table.refused_target`).
            raise ShardWriteFailed(f"shard {self.partition}: target not written") from (
                TargetUnacknowledged(*stuck, "has no leader")
            )
        sent_ms, sent_mono_ms = self._clock.now_ms(), self._mono()
        began_s = time.perf_counter()
        acks: dict[int, tuple[int, int]] = {}
        sent: list[SentBatch] = []
        try:
            # Abandoned past the timeout, never waited for: a cancelled step that does
            # not end would hold the turn, and with it the process, forever.
            await within(
                self._transaction(producer, plan, offsets, acks, sent), self._commit_timeout_s
            )
        except (KafkaError, BatchRefused, TimeoutError, OSError, AssertionError) as exc:
            # AssertionError: aiokafka's transaction state machine refusing a transition
            # after an earlier failure; the transaction is lost either way.
            for batch in sent:  # their errors are this one; do not let asyncio log them
                batch.future.add_done_callback(_retrieve)
            raise _classify(exc, f"shard {self.partition}: transaction failed") from exc
        self.last_targets = frozenset(
            kind.name for kind, _ in plan.groups if type(kind) is TargetDest
        )
        metrics.shard_committed(self.partition, time.perf_counter() - began_s)
        log_committed(self.partition, out)
        self.records_written += plan.records
        self.transactions.add(time.monotonic())
        samples = []
        for batch in sent:
            sample = self._sample(batch, sent_ms, sent_mono_ms, acks)
            if sample is not None:
                samples.append(sample)
        return samples

    async def _transaction(
        self,
        producer: AIOKafkaProducer,
        plan: WritePlan,
        offsets: dict[TopicPartition, int],
        acks: dict[int, tuple[int, int]],
        sent: list[SentBatch],
    ) -> None:
        await producer.begin_transaction()
        try:
            sent += await send_plan(producer, self._settings, plan, self._limits)
            clock, mono = self._clock, self._mono

            def stamp_ack(future: asyncio.Future[Any]) -> None:
                acks[id(future)] = (clock.now_ms(), mono())

            for batch in sent:
                if batch.topic is TopicKind.RUNS:
                    batch.future.add_done_callback(stamp_ack)
            if offsets:
                await producer.send_offsets_to_transaction(offsets, self._settings.scheduler_group)
            deadline_s = self._target_ack_timeout_s
            if deadline_s is not None and any(type(b.topic) is str for b in sent):
                failure = await acknowledged(sent, deadline_s)
            else:
                failure = await refused(sent)
            if failure is not None:
                raise failure
        except BatchRefused as refusal:
            if not isinstance(refusal.error, TargetUnacknowledged):
                await _abort(producer)
            # else: no abort. aiokafka flushes every pending batch before it ends a
            # transaction, and this one is not coming: the abort would only wait out
            # its own timeout. The shard is dropped; its next producer's fence aborts
            # the transaction on the broker, so nothing of it is ever visible.
            raise
        except BaseException:
            await _abort(producer)
            raise
        await producer.commit_transaction()

    def _sample(
        self,
        batch: SentBatch,
        sent_ms: int,
        sent_mono_ms: int,
        acks: dict[int, tuple[int, int]],
    ) -> ClockSample | None:
        if batch.topic is not TopicKind.RUNS or not batch.future.done():
            return None
        if batch.future.cancelled() or batch.future.exception() is not None:
            return None
        metadata = batch.future.result()
        acked = acks.get(id(batch.future))
        if metadata is None or acked is None or metadata.timestamp_type != _LOG_APPEND_TIME:
            return None
        return ClockSample(sent_ms, acked[0], metadata.timestamp, sent_mono_ms, acked[1])

    def _require_producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise ShardWriteFailed(f"shard {self.partition} has no producer")
        return self._producer

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is None:
            return
        await stop_producer(producer, f"stopping the producer of shard {self.partition}")

    def figures(self) -> dict[str, Any]:
        now_s = time.monotonic()
        return {
            "restore_ms": None if self.restore_ms is None else round(self.restore_ms, 1),
            "restored_records": self.restored_records,
            "restored_keys": self.restored_keys,
            "transactions": self.transactions.total,
            "transactions_per_s": round(self.transactions.per_s(now_s), 2),
            "records_written": self.records_written,
        }


def _in_plan(plan: WritePlan, name: str) -> bool:
    return any(type(k) is TargetDest and k.name == name for k, _ in plan.groups)


async def _learn_topics(producer: AIOKafkaProducer, names: list[str]) -> None:
    """Ask the broker afresh about ``names`` (own topics written as targets, in this
    transaction), so `leaderless` judges them by its answer, not by a cache: a new
    producer (every rebuilt shard's) knows none of them, and an old one's cache still
    lists a topic deleted since (its transaction would then wait for the topic until
    the commit timeout and mark nothing). A topic the answer does not list is gone:
    raised as `TargetUnacknowledged`, which marks it (`target_table.refused_target`).
    One metadata request per transaction holding a pause: pauses are rare."""
    if not names:
        return
    client = producer.client
    for name in names:
        client.add_topic(name)  # tracked from now on; answered by the update below
    try:
        updated = await within(client.force_metadata_update(), METADATA_REFRESH_TIMEOUT_S)
    except (TimeoutError, KafkaError, OSError):
        updated = False
    if not updated:
        return  # no answer: the broker is away, which the commit timeout judges
    for name in names:
        if client.cluster.partitions_for_topic(name) is None:
            if name in client.cluster.unauthorized_topics:
                raise ShardWriteFailed(f"{name}: not authorized") from (
                    TopicAuthorizationFailedError(name)
                )
            raise ShardWriteFailed(f"{name}: not written") from TargetUnacknowledged(
                name, 0, "not in the broker's metadata (the topic was deleted?)"
            )


async def _abort(producer: AIOKafkaProducer) -> None:
    """End an open transaction that must not commit; quietly, bounded.

    A fenced or fatal producer refuses the abort; the broker then aborts the
    transaction when the next owner fences us or when it times out.
    """
    await bounded(producer.abort_transaction(), "aborting a shard transaction", ABORT_TIMEOUT_S)


def _classify(exc: BaseException, what: str) -> Exception:
    if _fenced_cause(exc):
        return ShardFenced(f"{what}: producer fenced")
    return ShardWriteFailed(f"{what} ({type(exc).__name__}: {exc})")


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _fenced_cause(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ProducerFenced):
            return True
        if isinstance(seen, BatchRefused):
            seen = seen.error
            continue
        seen = seen.__cause__ or seen.__context__
    return False
