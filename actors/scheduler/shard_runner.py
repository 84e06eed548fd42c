"""One shard on Kafka: its transactional producer, its restore, its transactions.

A `ShardRunner` owns partition p of `{ns}.commands`, `{ns}.results` and
`{ns}.schedules` for as long as the consumer group says so. Its life:

1. ``fence``: start a producer with ``transactional.id = {ns}-shard-{p}``. Starting it
   calls ``init_transactions``, which bumps the id's epoch: every earlier producer
   with this id (a previous owner, alive, dead or paused) is fenced from then on,
   and its open transaction is aborted. Only then ``restore``: read
   `{ns}.schedules[p]` read_committed to its end into a fresh core, ``finish_restore``.
2. ``commit``: the records the core returned for one batch plus the consumed
   offsets of commands[p] and results[p] go into ONE transaction. The core has
   already advanced in memory; if the transaction does not commit, that memory is
   wrong and the caller must throw the runner away (`ShardFenced`,
   `ShardWriteFailed`) and rebuild from the changelog.
3. ``close``: stop the producer. An open transaction is left for the next owner's
   ``init_transactions`` to abort (the transaction timeout bounds it otherwise).

The runner never retries a failed transaction: retrying would need the core's
state from before the batch, which a pure core that mutates in place no longer has.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, ProducerFenced

from actors.observe import metrics
from actors.observe.events import log_committed
from actors.scheduler.clock import Clock
from actors.scheduler.figures import RateWindow
from actors.scheduler.restore import read_to_end
from actors.scheduler.skew import SkewEstimator
from actors.scheduler.writer import (
    MAX_BATCH_BYTES,
    Partitioner,
    SentBatch,
    WritePlan,
    send_plan,
)
from topics.names import Settings, TopicKind
from topics.records import InRecord, OutRecord

log = logging.getLogger("kafkron.scheduler")

# LogAppendTime (timestamp_type 1) is what makes a produce ack carry the broker clock.
_LOG_APPEND_TIME = 1
# The clock probe's record: written to {ns}.runs in a transaction that is always
# aborted, so no read_committed reader (workers, history) ever sees it.
CLOCK_PROBE_KEY = b"\x00clock-probe"
CLOCK_PROBE_VALUE = b'{"v":1,"probe":"clock","note":"aborted; never a run"}'
# A transaction must finish well inside this; the broker aborts it after.
TRANSACTION_TIMEOUT_MS = 30_000


class ShardCoreLike(Protocol):
    """What the runtime needs of `actors.shard.ShardCore` (see its docstrings)."""

    def restore(self, key: bytes, value: bytes | None) -> None: ...
    def finish_restore(self, now_ms: int) -> list[OutRecord]: ...
    def apply(self, record: InRecord, now_ms: int) -> list[OutRecord]: ...
    def advance(self, now_ms: int, max_fires: int | None = None) -> list[OutRecord]: ...
    def next_due_ms(self) -> int | None: ...
    @property
    def stats(self) -> Mapping[str, Any]: ...


# (partition, partitions, now_ms) -> a fresh core
CoreFactory = Callable[[int, int, int], ShardCoreLike]


class ShardFenced(Exception):
    """Another producer with this shard's transactional id started: someone else owns p."""


class ShardWriteFailed(Exception):
    """A transaction did not commit (broker down, timeout, error): the core is untrustworthy."""


class ShardRunner:
    def __init__(
        self,
        *,
        partition: int,
        partitions: int,
        settings: Settings,
        clock: Clock,
        skew: SkewEstimator,
        partitioner: Partitioner,
        core_factory: CoreFactory,
        commit_timeout_s: float,
    ) -> None:
        self.partition = partition
        self.partitions = partitions
        self._settings = settings
        self._clock = clock
        self._skew = skew
        self._partitioner = partitioner
        self._core_factory = core_factory
        self._commit_timeout_s = commit_timeout_s
        self._producer: AIOKafkaProducer | None = None
        self._core: ShardCoreLike | None = None
        self._unwritten: list[OutRecord] = []
        self.transactional_id = settings.shard_transactional_id(partition)
        self.restore_ms: float | None = None
        self.restored_records = 0
        self.restored_keys = 0
        self.transactions = RateWindow()
        self.records_written = 0
        self.commands_tp = TopicPartition(settings.topic(TopicKind.COMMANDS), partition)
        self.results_tp = TopicPartition(settings.topic(TopicKind.RESULTS), partition)

    @property
    def core(self) -> ShardCoreLike:
        if self._core is None:
            raise RuntimeError(f"shard {self.partition} is not open")
        return self._core

    async def fence(self) -> None:
        """Start this shard's producer: its ``init_transactions`` fences every earlier owner."""
        producer = AIOKafkaProducer(
            bootstrap_servers=self._settings.bootstrap,
            client_id=self.transactional_id,
            transactional_id=self.transactional_id,
            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
            max_batch_size=MAX_BATCH_BYTES,
            linger_ms=0,
        )
        try:
            await producer.start()
        except BaseException:
            await _stop_quietly(producer)
            raise
        self._producer = producer

    async def restore(self, restore_consumer: AIOKafkaConsumer, now: Callable[[], int]) -> None:
        """Rebuild the core from the changelog; only after `fence`, so the end is final."""
        if self._producer is None:
            raise RuntimeError(f"shard {self.partition}: restore before fence")
        started = time.monotonic()
        core = self._core_factory(self.partition, self.partitions, now())
        tp = TopicPartition(self._settings.topic(TopicKind.SCHEDULES), self.partition)
        result = await read_to_end(restore_consumer, tp, core.restore)
        self._unwritten = list(core.finish_restore(now()))
        self._core = core
        self.restore_ms = (time.monotonic() - started) * 1000.0
        self.restored_records = result.records
        self.restored_keys = result.keys

    async def sample_clock(self) -> bool:
        """Take one broker-time sample before this shard first fires; True if it did.

        The skew hold-back learns the broker's clock from the LogAppendTime stamps
        of our own writes to `{ns}.runs`; a process that has not written yet has no
        sample, and its first fires after a takeover could be early on a fast
        clock. So: one record to `{ns}.runs` in a transaction that is then aborted
        — the produce response carries the broker's append time, and no
        read_committed reader ever sees the record.
        """
        producer = self._producer
        if producer is None:
            raise RuntimeError(f"shard {self.partition}: clock sample before fence")
        topic = self._settings.topic(TopicKind.RUNS)
        await producer.begin_transaction()
        try:
            sent_ms = self._clock.now_ms()
            future = await producer.send(topic, value=CLOCK_PROBE_VALUE, key=CLOCK_PROBE_KEY)
            metadata = await future
            acked_ms = self._clock.now_ms()
        except BaseException:
            # A fenced producer refuses the abort too; the first error is the one to report.
            with contextlib.suppress(Exception):
                await producer.abort_transaction()
            raise
        await producer.abort_transaction()
        if metadata is None or metadata.timestamp_type != _LOG_APPEND_TIME:
            return False
        self._skew.observe(sent_ms=sent_ms, acked_ms=acked_ms, broker_ms=metadata.timestamp)
        return True

    def has_unwritten(self) -> bool:
        return bool(self._unwritten)

    async def commit(self, out: list[OutRecord], offsets: dict[TopicPartition, int]) -> None:
        """Write ``out`` (and what restore produced) plus ``offsets`` in one transaction.

        ``offsets`` maps a consumed partition to the next offset to read. Raises
        `ShardFenced` or `ShardWriteFailed`; after either, drop this runner.
        """
        producer = self._producer
        if producer is None:
            raise ShardWriteFailed(f"shard {self.partition} has no producer")
        if self._unwritten:
            out = self._unwritten + out
        plan = self._partitioner.plan(out)
        if not plan.records and not offsets:
            return
        sent_ms = self._clock.now_ms()
        began_s = time.perf_counter()
        acks: dict[int, int] = {}
        sent: list[SentBatch] = []
        try:
            await asyncio.wait_for(
                self._transaction(producer, plan, offsets, acks, sent), self._commit_timeout_s
            )
        except (KafkaError, TimeoutError, OSError, AssertionError) as exc:
            # AssertionError: aiokafka's transaction state machine refusing a transition
            # after an earlier failure; the transaction is lost either way.
            for batch in sent:  # their errors are this one; do not let asyncio log them
                batch.future.add_done_callback(_retrieve)
            if _fenced_cause(exc):
                raise ShardFenced(f"shard {self.partition}: producer fenced") from exc
            raise ShardWriteFailed(
                f"shard {self.partition}: transaction failed ({type(exc).__name__}: {exc})"
            ) from exc
        metrics.shard_committed(self.partition, time.perf_counter() - began_s)
        log_committed(self.partition, out)
        self._unwritten = []
        self.records_written += plan.records
        self.transactions.add(time.monotonic())
        for batch in sent:
            self._observe_skew(batch, sent_ms, acks)

    async def _transaction(
        self,
        producer: AIOKafkaProducer,
        plan: WritePlan,
        offsets: dict[TopicPartition, int],
        acks: dict[int, int],
        sent: list[SentBatch],
    ) -> None:
        await producer.begin_transaction()
        sent += await send_plan(producer, self._settings, plan)
        clock = self._clock

        def stamp_ack(future: asyncio.Future[Any]) -> None:
            acks[id(future)] = clock.now_ms()

        for batch in sent:
            if batch.topic is TopicKind.RUNS:
                batch.future.add_done_callback(stamp_ack)
        if offsets:
            await producer.send_offsets_to_transaction(offsets, self._settings.scheduler_group)
        await producer.commit_transaction()

    def _observe_skew(self, batch: SentBatch, sent_ms: int, acks: dict[int, int]) -> None:
        if batch.topic is not TopicKind.RUNS or not batch.future.done():
            return
        if batch.future.cancelled() or batch.future.exception() is not None:
            return
        metadata = batch.future.result()
        acked_ms = acks.get(id(batch.future))
        if metadata is None or acked_ms is None or metadata.timestamp_type != _LOG_APPEND_TIME:
            return
        self._skew.observe(sent_ms=sent_ms, acked_ms=acked_ms, broker_ms=metadata.timestamp)

    async def close(self) -> None:
        producer, self._producer, self._core = self._producer, None, None
        if producer is not None:
            await _stop_quietly(producer)

    def figures(self) -> dict[str, Any]:
        now_s = time.monotonic()
        figures: dict[str, Any] = {
            "restore_ms": None if self.restore_ms is None else round(self.restore_ms, 1),
            "restored_records": self.restored_records,
            "restored_keys": self.restored_keys,
            "transactions": self.transactions.total,
            "transactions_per_s": round(self.transactions.per_s(now_s), 2),
            "records_written": self.records_written,
        }
        if self._core is not None:
            figures.update(self._core.stats)
        return figures


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _fenced_cause(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ProducerFenced):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def _stop_quietly(producer: AIOKafkaProducer) -> None:
    """Stop a producer that may be fenced or cut off; never hang the caller for long."""
    try:
        await asyncio.wait_for(producer.stop(), 10.0)
    except Exception as exc:  # a dead producer's stop has nothing useful to say
        log.debug("stopping producer %s: %s", producer, exc)
