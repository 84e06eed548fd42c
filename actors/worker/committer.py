"""One worker transaction on aiokafka: a partition's results and its offset, or nothing.

The membership machine (``membership.py``) decides what to write and when; this
module carries out one ``Write`` with the transactional producer of that partition
(``transactional.id = {ns}.worker.{p}``, started, and so fencing the previous owner,
at adoption) and says how it ended:

- ``done``: the results (to ``{ns}.results``, partitioned by murmur2 of the schedule
  id like Kafka's default partitioner, so each lands on its owning shard) and the
  offset with its metadata (``send_offsets_to_transaction`` for ``{ns}-workers``)
  committed together;
- ``failed``: the transaction was aborted, nothing of it is visible (retry later);
- ``refused``: aborted because the broker refused some result records for good
  (too large for the topic, an invalid record); ``refused`` lists them;
- ``fenced``: a newer ``init_transactions`` of the same transactional id exists;
- ``unknown``: the outcome cannot be known (a commit that failed midway, a step that
  did not answer in time, an abort that failed): the producer is given up and the
  partition adopted afresh, whose fence settles the transaction either way.

What this relies on in aiokafka 0.14 (read in its source):

- ``send_batch`` returns a future per batch, and a batch the broker refuses with a
  non-retriable error only fails that future (``Sender``'s produce handler calls
  ``batch.failure``); the transaction manager stays ``IN_TRANSACTION``, and
  ``commit_transaction`` (``Sender._send_produce_req`` / ``EndTxnHandler``) would
  commit everything else: the offset without the result. So every batch future is
  read BEFORE the commit, and any failure aborts.
- A transactional producer never expires a batch (``Sender._can_retry`` expires
  only without a transaction manager): a retriable error is retried without end,
  so the wait for the batch futures is bounded here (``STEP_TIMEOUT_S``).
- ``commit_transaction`` raises the abortable error recorded by an earlier step
  (``TransactionManager.committing_transaction``); ``abort_transaction`` asserts on
  any state but ``IN_TRANSACTION`` / ``ABORTABLE_ERROR``, so the state is read first.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    CorruptRecordException,
    InvalidTimestampError,
    MessageSizeTooLargeError,
    ProducerFenced,
    RecordListTooLargeError,
    TransactionalIdAuthorizationFailed,
    UnsupportedForMessageFormatError,
)
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.producer.transaction_manager import TransactionState

from actors.worker.core import Commit
from topics.closing import within
from topics.names import Settings, TopicKind
from topics.partitioner import murmur2_partition
from topics.refusals import denied_in

STEP_TIMEOUT_S = 30.0
"""Longest wait for one step of a transaction (sends, offsets, commit, abort)."""

# Refusals that the same records meet again on every retry.
_REFUSED_FOR_GOOD = (
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    CorruptRecordException,
    InvalidTimestampError,
    UnsupportedForMessageFormatError,
)
_FENCED = (ProducerFenced, TransactionalIdAuthorizationFailed)

# Test-only, never set in production: the conformance suite's kill exactly mid-commit
# (docs/WORKER-PROTOCOL.md §13). With "1", the process kills itself (SIGKILL) in its
# first transaction that holds results, once they and the offset are acknowledged
# and before the commit: the window no timing can hit for certain.
KILL_BEFORE_COMMIT_ENV = "KAFKRON_TEST_KILL_BEFORE_COMMIT"


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    kind: str  # "done" | "failed" | "refused" | "fenced" | "unknown" | "denied"
    reason: str = ""
    refused: tuple[int, ...] = ()
    denied: str = ""  # "denied": the missing ACL and the role that grants it


@dataclass(slots=True)
class CommitStats:
    transactions: int = 0
    results: int = 0
    ms: float = 0.0


async def write_commit(
    producer: AIOKafkaProducer,
    settings: Settings,
    commit: Commit,
    *,
    abort_from_ms: int | None,
    now_ms: Callable[[], int],
) -> WriteOutcome:
    """Carry out one ``Write``; never raises (the outcome says what happened)."""
    try:
        outcome, error = await _write(producer, settings, commit, abort_from_ms, now_ms)
    except _FENCED as exc:
        return WriteOutcome("fenced", type(exc).__name__)
    except TimeoutError:
        return WriteOutcome("unknown", f"a step got no answer in {STEP_TIMEOUT_S:.0f} s")
    # An aborted transaction refused for a missing ACL: the machine parks the partition.
    denied = denied_in(error, settings.namespace) if error and outcome.kind == "failed" else None
    if denied is not None:
        return WriteOutcome("denied", outcome.reason, denied=denied)
    return outcome


async def _write(
    producer: AIOKafkaProducer,
    settings: Settings,
    commit: Commit,
    abort_from_ms: int | None,
    now_ms: Callable[[], int],
) -> tuple[WriteOutcome, BaseException | None]:
    """The outcome, and the error that ended the transaction (if one did)."""
    results_topic = settings.topic(TopicKind.RESULTS)
    try:
        count = len(await within(producer.partitions_for(results_topic), STEP_TIMEOUT_S))
        await _bounded(producer.begin_transaction())
        futures = await _send_results(producer, results_topic, count, commit)
        await _bounded(
            producer.send_offsets_to_transaction(
                {
                    TopicPartition(settings.topic(TopicKind.RUNS), commit.partition): (
                        commit.offset,
                        commit.metadata,
                    )
                },
                settings.worker_group,
            )
        )
        refused, error = await _batch_outcomes(futures)
    except (*_FENCED, TimeoutError):
        raise
    except _TooLarge as exc:
        aborted = await _aborted(producer, str(exc))
        if aborted.kind != "failed":
            return aborted, exc
        return WriteOutcome("refused", str(exc), (exc.index,)), exc
    except Exception as exc:
        return await _aborted(producer, f"{type(exc).__name__}: {exc}"), exc
    if error is not None:
        failure = f"{type(error).__name__}: {error}"
        if refused:
            aborted = await _aborted(producer, failure)
            if aborted.kind != "failed":
                return aborted, error
            return WriteOutcome("refused", failure, tuple(sorted(refused))), error
        return await _aborted(producer, failure), error
    if commit.results and os.environ.get(KILL_BEFORE_COMMIT_ENV) == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    if abort_from_ms is not None and now_ms() >= abort_from_ms:
        # Committing now could make a result visible after the shard's own verdict.
        return await _aborted(producer, "too close to the shard's timed_out verdict"), None
    try:
        await _bounded(producer.commit_transaction())
    except _FENCED:
        raise
    except Exception as exc:
        if transaction_state(producer) is TransactionState.ABORTABLE_ERROR:
            return await _aborted(producer, f"{type(exc).__name__}: {exc}"), exc
        what = f"commit failed midway: {type(exc).__name__}: {exc}"
        return WriteOutcome("unknown", what), exc
    return WriteOutcome("done"), None


async def _send_results(
    producer: AIOKafkaProducer, topic: str, partitions: int, commit: Commit
) -> list[tuple[asyncio.Future[object], list[int]]]:
    """Append the results to one batch per results partition (more if full), in one
    pass over them; the batch futures with the indices of ``commit.results`` each
    carries (a refused batch names its results)."""
    building: dict[int, tuple[BatchBuilder, list[int]]] = {}
    sent: list[tuple[asyncio.Future[object], list[int]]] = []
    known = _PARTITIONS.get(partitions)
    if known is None or len(known) >= _PARTITIONS_MAX:
        known = _PARTITIONS[partitions] = {}
    for i, record in enumerate(commit.results):
        key = record.key or b""
        partition = known.get(key)
        if partition is None:  # murmur2 in Python costs ~15 µs; a schedule's results recur
            partition = known[key] = murmur2_partition(key, partitions)
        open_batch = building.get(partition)
        if open_batch is None:
            open_batch = building[partition] = (producer.create_batch(), [])
        batch, in_batch = open_batch
        if batch.append(key=record.key, value=record.value, timestamp=None) is None:
            if in_batch:
                future = await producer.send_batch(batch, topic, partition=partition)
                sent.append((future, in_batch))
                batch, in_batch = producer.create_batch(), []
                building[partition] = (batch, in_batch)
            if batch.append(key=record.key, value=record.value, timestamp=None) is None:
                # Larger than any batch this client builds: the broker would refuse it.
                raise _TooLarge(i)
        in_batch.append(i)
    for partition, (batch, in_batch) in building.items():
        if in_batch:
            future = await producer.send_batch(batch, topic, partition=partition)
            sent.append((future, in_batch))
    return sent


# Results partitions by record key, per partition count (dropped wholesale past a cap).
_PARTITIONS: dict[int, dict[bytes, int]] = {}
_PARTITIONS_MAX = 100_000


class _TooLarge(Exception):
    def __init__(self, index: int) -> None:
        super().__init__(f"result {index} is larger than a whole batch")
        self.index = index


async def _batch_outcomes(
    futures: list[tuple[asyncio.Future[object], list[int]]],
) -> tuple[set[int], BaseException | None]:
    """Wait for every batch; (indices refused for good, the first failure or None)."""
    if not futures:
        return set(), None
    await asyncio.wait([f for f, _ in futures], timeout=STEP_TIMEOUT_S)
    refused: set[int] = set()
    failure: BaseException | None = None
    for future, indices in futures:
        if not future.done():
            raise TimeoutError("a batch of results was not acknowledged")
        exc = future.exception()
        if exc is None:
            continue
        if isinstance(exc, _FENCED):
            raise exc
        failure = failure or exc
        if isinstance(exc, _REFUSED_FOR_GOOD):
            refused.update(indices)
    return refused, failure


async def _aborted(producer: AIOKafkaProducer, reason: str) -> WriteOutcome:
    """Abort the open transaction (if one is open): ``failed``, or ``unknown``."""
    state = transaction_state(producer)
    if state is TransactionState.READY:
        return WriteOutcome("failed", reason)
    if state not in _ABORTABLE:
        return WriteOutcome("unknown", f"{reason}; the producer cannot abort ({state})")
    try:
        await _bounded(producer.abort_transaction())
    except _FENCED:
        raise
    except Exception as exc:
        return WriteOutcome("unknown", f"{reason}; the abort failed too ({exc!r})")
    return WriteOutcome("failed", reason)


async def _bounded(step: Awaitable[object]) -> None:
    await within(step, STEP_TIMEOUT_S)


_ABORTABLE = (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR)


def transaction_state(producer: AIOKafkaProducer) -> TransactionState | None:
    """The producer's transaction state (aiokafka keeps it private; None if unknown)."""
    manager = getattr(producer, "_txn_manager", None)
    state = getattr(manager, "state", None)
    return state if isinstance(state, TransactionState) else None
