"""One runs partition's transactional producer and the loop that commits its results.

Each assigned runs partition ``p`` has a producer with ``transactional.id =
{ns}-worker-{p}`` (started, and so fencing the previous owner, by the runtime) and
one ``Committer``. Whenever the core has something finished for ``p``, the committer
takes it (``WorkerCore.take_commit``) and writes, in ONE transaction, the results
(to ``{ns}.results``, partitioned by murmur2 of the schedule id like Kafka's default
partitioner, so each lands on its owning shard) and ``p``'s consumed offset with its
metadata (``send_offsets_to_transaction`` for the group ``{ns}-workers``). One
transaction is in flight per partition; what finishes meanwhile goes into the next,
so under load transactions grow instead of queueing.

Failures: a fenced producer (a newer owner called ``init_transactions``) is final
for this committer, the runtime is told through ``on_lost``. Any other failure (a
send, the offsets, the commit) aborts the open transaction once, if one is open,
and hands the commit back to the core: its results stay there, with whatever
finished meanwhile, until a later transaction commits them. Only a producer in
aiokafka's fatal state (or mid-commit, whose outcome we cannot know) is given up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import ProducerFenced, TransactionalIdAuthorizationFailed
from aiokafka.producer.transaction_manager import TransactionState

from actors.observe import metrics
from actors.scheduler.writer import Partitioner, send_plan
from actors.worker.core import Commit, WorkerCore
from topics.names import Settings, TopicKind

log = logging.getLogger("kafkron.worker")

COMMIT_RETRY_S = 0.5
CLOSE_WAIT_S = 5.0


@dataclass(slots=True)
class CommitStats:
    transactions: int = 0
    results: int = 0
    ms: float = 0.0


class Committer:
    """Commits one partition's finished runs, a transaction at a time."""

    def __init__(
        self,
        *,
        partition: int,
        producer: AIOKafkaProducer,
        core: WorkerCore,
        settings: Settings,
        stats: CommitStats,
        on_lost: Callable[[Committer], None],
        on_committed: Callable[[Commit], None] | None = None,
    ) -> None:
        self.partition = partition
        self.producer = producer
        self._core = core
        self._settings = settings
        self._stats = stats
        self._on_lost = on_lost
        self._on_committed = on_committed
        self._wake = asyncio.Event()
        self._closing = False
        self._task = asyncio.get_running_loop().create_task(self._loop())
        self._partitioner: Partitioner | None = None
        self._runs_tp = TopicPartition(settings.topic(TopicKind.RUNS), partition)

    def wake(self) -> None:
        """Something may have finished: look at the core again."""
        self._wake.set()

    async def close(self) -> None:
        """Let a transaction in flight finish (briefly), then stop the producer."""
        self._closing = True
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout=CLOSE_WAIT_S)
        except (TimeoutError, Exception):
            self._task.cancel()
        with contextlib.suppress(Exception):
            await self.producer.stop()

    def abandon(self) -> None:
        """Stop taking commits (the producer is unusable); ``close`` still stops it."""
        self._closing = True
        self._wake.set()

    async def _loop(self) -> None:
        core = self._core
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            commit = core.take_commit(self.partition)
            if commit is None:
                continue
            began = time.perf_counter()
            try:
                await self._write(commit)
            except (ProducerFenced, TransactionalIdAuthorizationFailed) as exc:
                metrics.worker_fenced()
                log.warning(
                    "producer of runs partition %d was fenced (%s): another worker owns it "
                    "now; its unfinished runs here are cancelled and not reported",
                    self.partition,
                    type(exc).__name__,
                )
                self._closing = True
                self._on_lost(self)
                return
            except Exception as exc:
                if self._closing:
                    return
                if not await self._abort():
                    log.error("producer of runs partition %d is unusable: %s", self.partition, exc)
                    self._closing = True
                    self._on_lost(self)
                    return
                log.warning(
                    "commit of runs partition %d failed (%s: %s); retrying",
                    self.partition,
                    type(exc).__name__,
                    exc,
                )
                core.commit_failed(commit)
                await asyncio.sleep(COMMIT_RETRY_S)
                self._wake.set()
                continue
            core.commit_done(commit)
            metrics.worker_committed(time.perf_counter() - began)
            stats = self._stats
            stats.transactions += 1
            stats.results += len(commit.results)
            stats.ms += (time.perf_counter() - began) * 1000
            if self._on_committed is not None:
                self._on_committed(commit)

    async def _write(self, commit: Commit) -> None:
        producer = self.producer
        partitioner = self._partitioner
        if partitioner is None:
            results_topic = self._settings.topic(TopicKind.RESULTS)
            count = len(await producer.partitions_for(results_topic))
            partitioner = self._partitioner = Partitioner({TopicKind.RESULTS: count})
        # A failure anywhere here is aborted by the loop (once: ``_abort``).
        await producer.begin_transaction()
        if commit.results:
            await send_plan(producer, self._settings, partitioner.plan(list(commit.results)))
        await producer.send_offsets_to_transaction(
            {self._runs_tp: (commit.offset, commit.metadata)},
            self._settings.worker_group,
        )
        await producer.commit_transaction()

    async def _abort(self) -> bool:
        """End whatever transaction a failure left open; False if the producer is unusable.

        aiokafka asserts on an abort from any state but an open (or abortable)
        transaction, so look first: a failure before ``begin_transaction`` leaves
        nothing to abort, and a second abort of the same failure would trip it.
        """
        state = transaction_state(self.producer)
        if state is TransactionState.READY:
            return True
        if state not in _ABORTABLE:
            return False  # fatal (fenced, say), or a commit whose outcome is unknown
        try:
            await self.producer.abort_transaction()
        except Exception as exc:
            log.warning("abort on runs partition %d failed: %s", self.partition, exc)
            return False
        return True


_ABORTABLE = (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR)


def transaction_state(producer: AIOKafkaProducer) -> TransactionState | None:
    """The producer's transaction state (aiokafka keeps it private; None if unknown)."""
    manager = getattr(producer, "_txn_manager", None)
    state = getattr(manager, "state", None)
    return state if isinstance(state, TransactionState) else None
