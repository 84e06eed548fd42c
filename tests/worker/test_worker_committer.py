"""One worker transaction's outcomes, over aiokafka's own transaction state machine.

``TxnProducer`` stands in for the one partition producer with the transactional
calls ``write_commit`` makes; every state change goes through aiokafka's real
``TransactionManager``, so an abort from the wrong state trips the same assertion
it does in a live producer, and a batch refused by the broker fails only its own
future, as in aiokafka (``Sender`` calls ``batch.failure``; the transaction stays
open and its commit would succeed). No broker: these are the failure paths a
broker only shows under faults.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.errors import KafkaTimeoutError, MessageSizeTooLargeError, ProducerFenced
from aiokafka.producer.transaction_manager import TransactionManager, TransactionState

from actors.worker.committer import WriteOutcome, write_commit
from actors.worker.core import Commit, Outcome, WorkerCore
from tests.worker.test_worker_core import T0, make_core, results_of, run_record
from topics.names import Settings
from topics.partitioner import murmur2_partition


class _Batch:
    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes | None]] = []

    def append(self, *, key: bytes | None, value: bytes | None, timestamp: None) -> int:
        self.records.append((key, value))
        return len(self.records)


class TxnProducer:
    """Transactions in aiokafka's state machine; ``failures`` sends raise first."""

    def __init__(
        self, failures: list[BaseException], refusals: list[BaseException | None] | None = None
    ) -> None:
        self._txn_manager = TransactionManager("kafkron-test-worker-0", 60_000)
        self._txn_manager.set_pid_and_epoch(1, 0)
        self.failures = failures
        self.refusals = refusals or []  # per batch: the broker's answer (None: appended)
        self.pending: list[bytes | None] = []
        self.committed: list[bytes | None] = []
        self.offsets: list[int] = []
        self.aborts = 0

    @property
    def state(self) -> TransactionState:
        state: TransactionState = self._txn_manager.state
        return state

    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2}

    def create_batch(self) -> _Batch:
        return _Batch()

    async def begin_transaction(self) -> None:
        self._txn_manager.begin_transaction()

    async def send_batch(self, batch: _Batch, topic: str, partition: int) -> asyncio.Future[Any]:
        if self.failures:
            exc = self.failures.pop(0)
            if isinstance(exc, ProducerFenced):
                self._txn_manager.fatal_error(exc)
                self._txn_manager.wait_for_transaction_end().exception()  # seen here
            raise exc
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        refusal = self.refusals.pop(0) if self.refusals else None
        if refusal is None:
            self.pending.extend(value for _, value in batch.records)
            fut.set_result(None)
        else:
            fut.set_exception(refusal)  # only the future: the transaction stays open
        return fut

    async def send_offsets_to_transaction(
        self, offsets: dict[Any, tuple[int, str]], group_id: str
    ) -> None:
        [(offset, _)] = offsets.values()
        self._pending_offset = offset

    async def commit_transaction(self) -> None:
        self._txn_manager.committing_transaction()
        self._txn_manager.complete_transaction()
        self.committed.extend(self.pending)
        self.offsets.append(self._pending_offset)
        self.pending.clear()

    async def abort_transaction(self) -> None:
        self._txn_manager.aborting_transaction()
        self._txn_manager.complete_transaction()
        self.pending.clear()
        self.aborts += 1

    async def stop(self) -> None:
        return None


def _finished_core(runs: int) -> WorkerCore:
    core = make_core()
    for offset in range(runs):
        core.receive(run_record(offset), T0)
        core.job_exited((0, offset, 0), Outcome("succeeded"), T0 + 1)
    return core


async def _write(
    producer: TxnProducer, commit: Commit, *, abort_from_ms: int | None = None
) -> WriteOutcome:
    return await write_commit(
        producer,  # type: ignore[arg-type]
        Settings(namespace="committer-test"),
        commit,
        abort_from_ms=abort_from_ms,
        now_ms=lambda: T0 + 10,
    )


def _commit(core: WorkerCore) -> Commit:
    commit = core.take_commit(0)
    assert commit is not None
    return commit


async def test_results_and_offset_commit_together() -> None:
    producer = TxnProducer([])
    outcome = await _write(producer, _commit(_finished_core(3)))
    assert outcome.kind == "done" and producer.offsets == [3] and len(producer.committed) == 3


async def test_a_failed_send_is_aborted_once_and_nothing_is_visible() -> None:
    producer = TxnProducer([KafkaTimeoutError("no answer from the leader")])
    outcome = await _write(producer, _commit(_finished_core(3)))
    assert outcome.kind == "failed" and "KafkaTimeoutError" in outcome.reason
    assert producer.aborts == 1 and producer.state is TransactionState.READY
    assert producer.committed == [] and producer.offsets == []


async def test_a_batch_refused_by_the_broker_aborts_instead_of_committing_the_offset() -> None:
    """Finding 1: aiokafka fails the batch's future but would commit the transaction."""
    core = _finished_core(3)
    producer = TxnProducer([], refusals=[MessageSizeTooLargeError()])
    commit = _commit(core)
    outcome = await _write(producer, commit)
    # The first batch holds the results bound for the first result's partition.
    first = murmur2_partition(commit.results[0].key or b"", 3)
    expected = tuple(
        i for i, r in enumerate(commit.results) if murmur2_partition(r.key or b"", 3) == first
    )
    assert outcome.kind == "refused" and outcome.refused == expected
    assert producer.offsets == [] and producer.committed == [] and producer.aborts == 1


async def test_a_passing_refusal_is_a_failure_to_retry() -> None:
    producer = TxnProducer([], refusals=[KafkaTimeoutError("leader moved")])
    outcome = await _write(producer, _commit(_finished_core(1)))
    assert outcome.kind == "failed" and outcome.refused == ()
    assert producer.offsets == [] and producer.aborts == 1


async def test_a_fenced_producer_is_reported_fenced_without_retrying() -> None:
    producer = TxnProducer([ProducerFenced()])
    outcome = await _write(producer, _commit(_finished_core(1)))
    assert outcome.kind == "fenced"
    assert producer.committed == [] and producer.offsets == []


async def test_a_write_too_close_to_the_shards_verdict_is_aborted() -> None:
    producer = TxnProducer([])
    outcome = await _write(producer, _commit(_finished_core(1)), abort_from_ms=T0 + 10)
    assert outcome.kind == "failed" and "verdict" in outcome.reason
    assert producer.offsets == [] and producer.aborts == 1


def test_results_of_a_failed_commit_stay_in_the_core_until_committed() -> None:
    core = _finished_core(2)
    first = core.take_commit(0)
    assert first is not None
    core.commit_failed(first)
    again = core.take_commit(0)
    assert [r.schedule_id for r in results_of(again)] == ["s0", "s1"]
