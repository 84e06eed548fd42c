"""The worker's Kafka runtime: feeds ``WorkerCore`` and carries out what it decides.

Consumer group ``{ns}-workers`` on ``{ns}.runs``, read_committed, no auto-commit.
Partition ownership is group membership, and membership is the lease:

- **Fencing.** Each assigned runs partition ``p`` gets its own transactional
  producer ``{ns}-worker-{p}``, created when ``p`` is assigned. Its
  ``init_transactions`` bumps the producer epoch, so a previous owner of ``p`` (a
  worker that was paused, say with SIGSTOP, and came back) can no longer commit:
  its late result is aborted, never visible. Only then is the committed offset
  read, so it includes every transaction the old owner completed.
- **One transaction per batch.** Results of ``p`` and the offset of ``p``
  (``offsets.py``: lowest unfinished, plus the open offsets in the commit metadata)
  are written together with ``send_offsets_to_transaction``: a result is visible
  if and only if its run will never be delivered again.
- **Long jobs keep the lease.** aiokafka heartbeats from a background task, and the
  main loop calls ``getmany`` at least every ``POLL_MS`` even when every partition is
  paused, so neither the session timeout nor ``max_poll_interval_ms`` expires while
  a job runs for hours. A partition is paused while it holds the most unfinished
  runs the core allows.
- **Rebalances.** Assignment is eager, so every rebalance revokes everything first.
  Cancelling then would kill every long job on every membership change, so the
  worker waits for the new assignment: partitions it keeps go on untouched (same
  producer, fetch resumes where it was), partitions it lost have their jobs
  cancelled and their uncommitted results dropped. What we commit before the new
  owner starts its producer, it sees (it reads the committed offset after fencing
  us); nothing we finish after that becomes visible, it is merely work done twice,
  which at-least-once allows. A worker that rejoins as a new member (the group had
  expelled it) keeps nothing and adopts every partition afresh.
- **Losing the coordinator (Dropbox ATF's rule).** aiokafka has no public hook for
  heartbeats, so the runtime wraps the group coordinator's ``_do_heartbeat`` and
  tells the core the time of each successful one. With no success for
  ``lease_loss_heartbeats`` (default 3) heartbeat intervals (heartbeat interval = session
  timeout / 5, so this is 60% of the session timeout, before the broker can give
  our partitions away) the core cancels every job and drops every partition. When a
  heartbeat succeeds again and no rebalance happened, the group still regards us as
  the owner, so the runtime adopts its partitions afresh from the committed offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from actors.worker.committer import CommitStats, Committer
from actors.worker.core import (
    Action,
    CancelJob,
    Commit,
    Discarded,
    LeaseLost,
    Outcome,
    RunKey,
    StartJob,
    WorkerCore,
)
from actors.worker.executor import Executor
from actors.worker.offsets import MAX_OPEN_PER_PARTITION
from actors.worker.registry import Registry
from topics.clients import admin_kwargs, consumer_kwargs, transactional_producer_kwargs
from topics.names import Settings, TopicKind
from topics.records import InRecord

log = logging.getLogger("kafkron.worker")

POLL_MS = 200
# Records handled per turn of the loop: the loop must come back often enough for
# heartbeats, timers and job exits, however much is waiting in the topic.
MAX_BATCH = 1_000
FETCH_MAX_WAIT_MS = 50
TXN_RETRY_BACKOFF_MS = 20
LEASE_LOSS_HEARTBEATS = 3
STATS_EVERY_S = 10.0
NEVER_MS = 1 << 62


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """Knobs of one worker process (``kafkron worker`` sets them from flags)."""

    concurrency: int = 8
    """Jobs running at once, sync and async together."""
    session_timeout_ms: int = 10_000
    """Group session: a silent worker loses its partitions after this long."""
    max_poll_interval_ms: int = 300_000
    max_open_per_partition: int = MAX_OPEN_PER_PARTITION
    drain_s: float = 30.0
    """On stop, how long running jobs may finish before they are cancelled."""
    lease_loss_heartbeats: int = LEASE_LOSS_HEARTBEATS
    """Heartbeat intervals without a successful heartbeat before the worker cancels its
    jobs itself; 0 turns that off and leaves zombies to fencing alone (tests use it)."""
    worker_id: str = field(default_factory=default_worker_id)

    @property
    def heartbeat_interval_ms(self) -> int:
        return max(100, self.session_timeout_ms // 5)

    @property
    def lease_loss_ms(self) -> int:
        if self.lease_loss_heartbeats <= 0:
            return NEVER_MS
        return self.lease_loss_heartbeats * self.heartbeat_interval_ms


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, runtime: WorkerRuntime) -> None:
        self._runtime = runtime

    async def on_partitions_revoked(self, revoked: Any) -> None:
        # Eager rebalancing revokes everything; act on the new assignment instead.
        self._runtime.wake_all()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        try:
            await self._runtime.rebalanced(assigned)
        except Exception:  # aiokafka swallows listener exceptions; say what happened
            log.exception("adopting assigned partitions %s failed", sorted(assigned))


class WorkerRuntime:
    """One worker process: ``await WorkerRuntime(...).run(stop)``."""

    def __init__(self, settings: Settings, registry: Registry, options: WorkerOptions) -> None:
        self.settings = settings
        self.options = options
        self._registry = registry
        self._runs_topic = settings.topic(TopicKind.RUNS)
        self._results_topic = settings.topic(TopicKind.RESULTS)
        self.core = WorkerCore(
            worker=options.worker_id,
            concurrency=options.concurrency,
            known_job=lambda name: name in registry,
            now_ms=now_ms(),
            lease_loss_ms=options.lease_loss_ms,
            max_open_per_partition=options.max_open_per_partition,
        )
        self._executor = Executor(
            registry,
            threads=options.concurrency,
            worker=options.worker_id,
            on_exit=self._job_exited,
        )
        self._consumer: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._committers: dict[int, Committer] = {}
        self._lock = asyncio.Lock()  # rebalances and lease recovery adopt one at a time
        self._generation = 0
        self._member: str | None = None
        self._last_heartbeat_ms = 0
        self._lease_lost_at_ms: int | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due_ms: int | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self._flush_pending = False
        self._commit_stats = CommitStats()
        self.on_result_committed: Callable[[Commit], None] | None = None

    # --- lifecycle -------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Consume and run until ``stop`` is set, then drain and leave the group."""
        opts = self.options
        consumer = AIOKafkaConsumer(
            **consumer_kwargs(
                self.settings, f"kafkron-worker-{opts.worker_id}", self.settings.worker_group
            ),
            session_timeout_ms=opts.session_timeout_ms,
            heartbeat_interval_ms=opts.heartbeat_interval_ms,
            max_poll_interval_ms=opts.max_poll_interval_ms,
            # A read_committed fetch can sit out its whole wait for records whose
            # transaction is still open; keep the wait short, runs are latency-bound.
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        )
        admin = AIOKafkaAdminClient(
            **admin_kwargs(self.settings, f"kafkron-worker-{opts.worker_id}-admin")
        )
        self._consumer, self._admin = consumer, admin
        await admin.start()
        await consumer.start()
        try:
            self._watch_heartbeats(consumer)
            consumer.subscribe([self._runs_topic], listener=_Listener(self))
            log.info(
                "worker %s: jobs %s, concurrency %d, group %s",
                opts.worker_id,
                ", ".join(self._registry.names()) or "(none)",
                opts.concurrency,
                self.settings.worker_group,
            )
            await self._consume(consumer, stop)
            await self._drain()
        finally:
            self._stopping = True
            await self._shutdown(consumer, admin)

    async def _consume(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        next_stats = time.monotonic() + STATS_EVERY_S
        stop_wait = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=POLL_MS, max_records=MAX_BATCH)
                if batch:
                    self._receive(batch)
                self._tick()
                if time.monotonic() >= next_stats:
                    next_stats = time.monotonic() + STATS_EVERY_S
                    log.info("worker %s: %s", self.options.worker_id, self.stats())
        finally:
            stop_wait.cancel()

    def stats(self) -> dict[str, int]:
        commits = self._commit_stats.transactions
        return {
            "partitions": len(self.core.assigned),
            "running": self.core.running,
            "queued": self.core.queued,
            **self.core.counts,
            "transactions": commits,
            "results_per_transaction": self._commit_stats.results // commits if commits else 0,
            "ms_per_transaction": int(self._commit_stats.ms / commits) if commits else 0,
        }

    async def _drain(self) -> None:
        """Stop fetching; let running jobs finish for up to ``drain_s``; commit."""
        self._stopping = True
        self._sync_pause()
        deadline = time.monotonic() + self.options.drain_s
        while time.monotonic() < deadline and not self.core.idle():
            self._tick()
            self.wake_all()
            await asyncio.sleep(0.05)
        if not self.core.idle():
            log.warning(
                "worker %s: %d jobs still running after %.0f s; cancelling them, the next "
                "owner of their partitions runs them again",
                self.options.worker_id,
                self.core.running,
                self.options.drain_s,
            )

    async def _shutdown(self, consumer: AIOKafkaConsumer, admin: AIOKafkaAdminClient) -> None:
        for partition in sorted(self.core.assigned):
            self._apply(self.core.revoke(partition, "worker stopping"))
        for partition in list(self._committers):
            self._release(partition)
        await self._executor.close()
        if self._timer is not None:
            self._timer.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        with contextlib.suppress(Exception):
            await consumer.stop()
        with contextlib.suppress(Exception):
            await admin.close()

    # --- records in ------------------------------------------------------------------

    def _receive(self, batch: dict[TopicPartition, list[Any]]) -> None:
        now = now_ms()
        core = self.core
        actions: list[Action] = []
        for tp, records in batch.items():
            if tp.topic != self._runs_topic:
                continue
            partition = tp.partition
            for record in records:
                actions.extend(
                    core.receive(
                        InRecord(
                            TopicKind.RUNS,
                            partition,
                            record.offset,
                            record.key,
                            record.value,
                            record.timestamp,
                        ),
                        now,
                    )
                )
        self._apply(actions)

    def _job_exited(self, key: RunKey, outcome: Outcome) -> None:
        self._apply(self.core.job_exited(key, outcome, now_ms()))
        if not self._flush_pending:
            # Many jobs exit in one turn of the loop; commit, pause and timer
            # bookkeeping once for all of them.
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        self.wake_all()
        self._sync_pause()
        self._arm_timer()

    def _tick(self) -> None:
        """Advance the core's clock: deadlines, the lease; then commits and pauses."""
        self._apply(self.core.advance(now_ms()))
        self.wake_all()
        self._sync_pause()
        self._arm_timer()

    def _arm_timer(self) -> None:
        """Make sure ``_tick`` runs at the core's next due instant, never later."""
        due = self.core.next_due_ms()
        if due is None or (self._timer_due_ms is not None and self._timer_due_ms <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer_due_ms = due
        self._timer = loop.call_later(max(0.0, (due - now_ms()) / 1000), self._timer_fired)

    def _timer_fired(self) -> None:
        self._timer = None
        self._timer_due_ms = None
        self._tick()

    def _apply(self, actions: Iterable[Action]) -> None:
        for action in actions:
            if isinstance(action, StartJob):
                self._executor.start(action.key, action.run)
            elif isinstance(action, CancelJob):
                if action.reason != "revoked" or log.isEnabledFor(logging.DEBUG):
                    log.info("cancelling run at %s: %s", action.key, action.reason)
                self._executor.cancel(action.key, action.reason)
            elif isinstance(action, Discarded):
                log.warning(
                    "skipping record %s of %s: %s", action.key, self._runs_topic, action.reason
                )
            elif isinstance(action, LeaseLost):
                self._lease_lost(action)

    # --- pausing -----------------------------------------------------------------------

    def _sync_pause(self) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        assigned = {tp for tp in consumer.assignment() if tp.topic == self._runs_topic}
        if self._stopping:
            wanted = assigned
        else:
            full = self.core.paused()
            wanted = {tp for tp in assigned if tp.partition in full}
        paused = consumer.paused() & assigned
        if wanted - paused:
            consumer.pause(*(wanted - paused))
        if paused - wanted:
            consumer.resume(*(paused - wanted))

    # --- assignment --------------------------------------------------------------------

    async def rebalanced(self, assigned: Iterable[TopicPartition]) -> None:
        """The group's new assignment for us: keep, drop and adopt partitions."""
        self._generation += 1
        self._last_heartbeat_ms = now_ms()
        self.core.lease_renewed(self._last_heartbeat_ms)
        member_id = self._member_id()
        if self._member != member_id:
            # We rejoined as a new member (the group expelled us, say after a pause):
            # whatever we kept may have been owned by someone else meanwhile, so nothing
            # is kept; every partition is adopted afresh from its committed offset.
            if self._member is not None:
                for partition in sorted(self.core.assigned):
                    self._apply(self.core.revoke(partition, "rejoined the group"))
                    self._release(partition)
            self._member = member_id
        await self._reconcile({tp.partition for tp in assigned if tp.topic == self._runs_topic})

    def _member_id(self) -> str | None:
        consumer = self._consumer
        coordinator = None if consumer is None else consumer._coordinator
        member = getattr(coordinator, "member_id", None)
        return member if isinstance(member, str) else None

    async def _reconcile(self, wanted: set[int]) -> None:
        async with self._lock:
            for partition in sorted(self.core.assigned - wanted):
                self._apply(self.core.revoke(partition))
                self._release(partition)
            for partition in sorted(set(self._committers) - wanted):
                self._release(partition)
            missing = sorted(wanted - self.core.assigned)
            if missing:
                await asyncio.gather(*(self._adopt(p) for p in missing))
            consumer = self._consumer
            assert consumer is not None
            current = {tp.partition for tp in consumer.assignment() if tp.topic == self._runs_topic}
            for partition in sorted(wanted & current & self.core.assigned):
                position = self.core.fetch_position(partition)
                if position is not None:
                    consumer.seek(TopicPartition(self._runs_topic, partition), position)
            self._sync_pause()
            self._arm_timer()
            log.info(
                "worker %s owns runs partitions %s",
                self.options.worker_id,
                sorted(self.core.assigned) or "none",
            )

    async def _adopt(self, partition: int) -> None:
        """Fence the previous owner of ``partition``, then start from its last commit."""
        old = self._committers.pop(partition, None)
        if old is not None:
            await old.close()
        producer = AIOKafkaProducer(
            **transactional_producer_kwargs(
                self.settings,
                f"kafkron-worker-{self.options.worker_id}-{partition}",
                self.settings.worker_transactional_id(partition),
                # A transaction that starts while the previous one's markers are still
                # being written is answered CONCURRENT_TRANSACTIONS and retried after
                # this backoff (aiokafka's default, 100 ms, is most of a commit's latency).
                retry_backoff_ms=TXN_RETRY_BACKOFF_MS,
            )
        )
        await producer.start()  # init_transactions: the old owner is fenced from here on
        tp = TopicPartition(self._runs_topic, partition)
        admin = self._admin
        consumer = self._consumer
        assert admin is not None and consumer is not None
        committed = await admin.list_consumer_group_offsets(
            self.settings.worker_group, partitions=[tp]
        )
        found = committed.get(tp)
        if found is not None and found.offset >= 0:
            start, metadata = found.offset, found.metadata
        else:
            start, metadata = (await consumer.beginning_offsets([tp]))[tp], None
        committer = Committer(
            partition=partition,
            producer=producer,
            core=self.core,
            settings=self.settings,
            stats=self._commit_stats,
            on_lost=self._partition_lost,
            on_committed=self.on_result_committed,
        )
        self._committers[partition] = committer
        self.core.assign(partition, start, metadata, now_ms())
        committer.wake()

    def _release(self, partition: int) -> None:
        """Stop committing for ``partition`` (the core has already dropped it)."""
        committer = self._committers.pop(partition, None)
        if committer is not None:
            self._spawn(committer.close())

    def wake_all(self) -> None:
        for committer in self._committers.values():
            committer.wake()

    def _partition_lost(self, committer: Committer) -> None:
        """Its producer cannot commit for this partition any more: stop its work."""
        self._apply(self.core.revoke(committer.partition, "fenced"))
        if self._committers.get(committer.partition) is committer:
            del self._committers[committer.partition]
        self._spawn(committer.close())
        self._recover_when_heard()

    # --- the lease ----------------------------------------------------------------------

    def _watch_heartbeats(self, consumer: AIOKafkaConsumer) -> None:
        """Tell the core about every successful group heartbeat (see the module doc)."""
        coordinator = consumer._coordinator
        original: Callable[[], Awaitable[bool]] = coordinator._do_heartbeat

        async def watched() -> bool:
            ok = await original()
            if ok:
                self._last_heartbeat_ms = now_ms()
                self.core.lease_renewed(self._last_heartbeat_ms)
            return ok

        coordinator._do_heartbeat = watched

    def _lease_lost(self, action: LeaseLost) -> None:
        log.error(
            "worker %s: no heartbeat reached the group coordinator for %d ms; cancelling the "
            "runs of partitions %s (another worker may own them now)",
            self.options.worker_id,
            action.silent_ms,
            list(action.partitions),
        )
        for partition in action.partitions:
            self._release(partition)
        self._recover_when_heard()

    def _recover_when_heard(self) -> None:
        if self._lease_lost_at_ms is not None or self._stopping:
            return
        self._lease_lost_at_ms = now_ms()
        self._spawn(self._recover(self._generation))

    async def _recover(self, generation: int) -> None:
        """Adopt our partitions again once a heartbeat proves the group still has us."""
        lost_at = self._lease_lost_at_ms or 0
        try:
            while not self._stopping and self._generation == generation:
                if self._last_heartbeat_ms > lost_at:
                    consumer = self._consumer
                    assert consumer is not None
                    wanted = {
                        tp.partition for tp in consumer.assignment() if tp.topic == self._runs_topic
                    }
                    log.info(
                        "worker %s: coordinator answers again; adopting %s",
                        self.options.worker_id,
                        sorted(wanted),
                    )
                    await self._reconcile(wanted)
                    return
                await asyncio.sleep(self.options.heartbeat_interval_ms / 1000)
        finally:
            self._lease_lost_at_ms = None

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
