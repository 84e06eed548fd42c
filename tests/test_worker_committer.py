"""The committer's failure handling, over aiokafka's own transaction state machine.

``TxnProducer`` stands in for the one partition producer with the transactional
calls the committer makes; every state change goes through aiokafka's real
``TransactionManager``, so an abort from the wrong state trips the same assertion
it does in a live producer. No broker: these are the failure paths a broker only
shows under faults.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.errors import KafkaTimeoutError, ProducerFenced
from aiokafka.producer.transaction_manager import TransactionManager, TransactionState
from test_worker_core import T0, make_core, results_of, run_record

from actors.worker.committer import CommitStats, Committer
from actors.worker.core import Commit, Outcome, WorkerCore
from topics.messages import parse_result
from topics.names import Settings


class _Batch:
    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes | None]] = []

    def append(self, *, key: bytes | None, value: bytes | None, timestamp: None) -> int:
        self.records.append((key, value))
        return len(self.records)


class TxnProducer:
    """Transactions in aiokafka's state machine; ``failures`` sends raise first."""

    def __init__(self, failures: list[BaseException]) -> None:
        self._txn_manager = TransactionManager("kafkron-test-worker-0", 60_000)
        self._txn_manager.set_pid_and_epoch(1, 0)
        self.failures = failures
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
        self.pending.extend(value for _, value in batch.records)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
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


async def _commit_with(
    producer: TxnProducer, core: WorkerCore, until: Any
) -> tuple[list[Committer], list[Commit]]:
    lost: list[Committer] = []
    done: list[Commit] = []
    committer = Committer(
        partition=0,
        producer=producer,
        core=core,
        settings=Settings(namespace="committer-test"),
        stats=CommitStats(),
        on_lost=lost.append,
        on_committed=done.append,
    )
    committer.wake()
    for _ in range(400):  # the retry waits COMMIT_RETRY_S; a few turns are enough
        if until() or lost:
            break
        await asyncio.sleep(0.01)
    await committer.close()
    return lost, done


async def test_a_failed_send_is_aborted_once_and_the_same_results_are_written_again() -> None:
    core = _finished_core(3)
    producer = TxnProducer([KafkaTimeoutError("no answer from the leader")])
    lost, done = await _commit_with(producer, core, lambda: producer.offsets)
    assert lost == [], "a passing send failure must not give the partition up"
    assert producer.aborts == 1 and producer.state is TransactionState.READY
    assert producer.offsets == [3] and core.committed_offset(0) == 3
    assert sorted(parse_result(v or b"").schedule_id for v in producer.committed) == [
        "s0",
        "s1",
        "s2",
    ]
    assert [len(c.results) for c in done] == [3]


async def test_failures_in_a_row_are_retried_until_the_write_succeeds() -> None:
    core = _finished_core(2)
    producer = TxnProducer([KafkaTimeoutError("one"), KafkaTimeoutError("two")])
    lost, _ = await _commit_with(producer, core, lambda: producer.offsets)
    assert lost == [] and producer.aborts == 2 and producer.offsets == [2]
    assert len(producer.committed) == 2


async def test_a_fenced_producer_gives_the_partition_up_without_retrying() -> None:
    core = _finished_core(1)
    producer = TxnProducer([ProducerFenced()])
    lost, done = await _commit_with(producer, core, lambda: False)
    assert len(lost) == 1 and lost[0].partition == 0
    assert producer.committed == [] and producer.offsets == [] and done == []


def test_results_of_a_failed_commit_stay_in_the_core_until_committed() -> None:
    core = _finished_core(2)
    first = core.take_commit(0)
    assert first is not None
    core.commit_failed(first)
    again = core.take_commit(0)
    assert [r.schedule_id for r in results_of(again)] == ["s0", "s1"]
