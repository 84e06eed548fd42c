"""The worker's Kafka runtime: the executor of ``WorkerMachine`` on aiokafka.

Consumer group ``{ns}-workers`` on ``{ns}.runs``, read_committed, no auto-commit.
Every decision (which partitions are live, when to fence, read, seek, pause, write,
retry, give up, what the lease allows) is the machine's (``membership.py``, rules
stated there) and the core's (``core.py``); this file turns aiokafka's callbacks
into the machine's inputs and the machine's actions into aiokafka calls, and runs
the jobs (``executor.py``). The simulation (``simulation/worker_node.py``) executes
the same machine over its simulated Kafka.

What this relies on in aiokafka 0.14 (read in its source):

- ``GroupCoordinator._on_join_prepare`` calls ``on_partitions_revoked`` and
  ``ensure_active_group`` then stops the heartbeat task until the join succeeds; the
  listener's ``on_partitions_assigned`` runs inside that join, after
  ``assign_from_subscribed`` has already let the fetcher return records of the new
  assignment. So the listener only tells the machine (``rebalance_started``,
  ``assigned``) and returns: adoption (``init_transactions``, the committed-offset
  read) runs in tasks of its own, never inside the listener, where it would keep
  heartbeats off; and records that arrive for a partition still being adopted are
  ignored by the machine and fetched again after its ``Seek``.
- ``consumer.seek`` (``Fetcher.seek_to``) drops the records already fetched for the
  partition, and ``FetchResult.check_assignment`` drops any fetched at another
  position or while paused: after a ``Seek`` or ``Pause`` is applied (synchronously,
  here) no earlier record of that partition is returned.
- A new assignment creates new partition states: unpaused, fetching from the
  committed offset (the machine seeks kept partitions again after ``assigned``).
- ``rebalance_timeout_ms`` defaults to the session timeout in aiokafka; it is set
  explicitly (``LeaseRules.rebalance_ms``), and the lease rule counts a rebalance
  we joined as held until then.
- Heartbeats run in a background task (``_heartbeat_routine``) and the main loop
  calls ``getmany`` at least every ``POLL_MS``, even when every partition is
  paused, so neither the session nor ``max_poll_interval_ms`` expires while a job
  runs for hours. aiokafka has no public hook for heartbeats, so the
  coordinator's ``_send_req`` is wrapped to report each successful Heartbeat and
  SyncGroup answer with its request's send time (``group_answers``).
- Every client ``stop()`` is bounded and the client abandoned after it
  (``topics.closing``): aiokafka's stop can wait without end on an
  unanswered fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from actors.monotonic import monotonic_ms
from actors.observe import metrics
from actors.observe.flow_metrics import HIGH_LANE, NORMAL_LANE, LaneView
from actors.worker.clock import BrokerFloor, TimeMoves
from actors.worker.committer import CommitStats, write_commit
from actors.worker.core import (
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
from actors.worker.group_answers import HEARTBEAT, watch_group_answers
from actors.worker.lanes import Lane, SlotPool
from actors.worker.membership import (
    LEASE_LOSS_HEARTBEATS,
    TRANSACTION_TIMEOUT_MS,
    Action,
    CloseProducer,
    LeaseRules,
    Note,
    Owns,
    Pause,
    ReadCommitted,
    Resume,
    Seek,
    StartProducer,
    WakeAt,
    WorkerMachine,
    Write,
)
from actors.worker.offsets import MAX_OPEN_PER_PARTITION
from actors.worker.ratelimit_follower import RateLimitFollower
from actors.worker.registry import Registry
from topics.clients import admin_kwargs, consumer_kwargs, transactional_producer_kwargs
from topics.closing import bounded, stop_producer, within
from topics.committed import fetch_committed
from topics.fencing import fence_others
from topics.names import Settings, TopicKind
from topics.records import InRecord

log = logging.getLogger("kafkron.worker")

POLL_MS = 200
# Records handled per turn of the loop: the loop must come back often enough for
# heartbeats, timers and job exits, however much is waiting in the topic.
MAX_BATCH = 1_000
FETCH_MAX_WAIT_MS = 50
TXN_RETRY_BACKOFF_MS = 20
ADOPT_STEP_TIMEOUT_S = 30.0
# A stop slower than this says, every so often, what it still waits for.
DRAIN_LOG_EVERY_S = 5.0
"""Longest wait for ``init_transactions`` or the committed-offset read; then the
adoption counts as failed and is retried (``membership.ADOPT_RETRY_MS``)."""
STATS_EVERY_S = 10.0
LOG_APPEND_TIME = 1
"""aiokafka's ``timestamp_type`` of a record stamped by the broker (``{ns}.runs``)."""


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
    rebalance_timeout_ms: int | None = None
    """How long the group waits for members to rejoin (default: twice the session)."""
    worker_id: str = field(default_factory=default_worker_id)

    @property
    def lease_rules(self) -> LeaseRules:
        return LeaseRules(
            session_timeout_ms=self.session_timeout_ms,
            lease_loss_heartbeats=self.lease_loss_heartbeats,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
        )

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.lease_rules.heartbeat_interval_ms

    @property
    def lease_loss_ms(self) -> int:
        return self.lease_rules.lease_loss_ms


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Tells the machine; never awaits anything slow (heartbeats are off meanwhile)."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        self._runtime = runtime

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self._runtime.rebalance_started()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._runtime.rebalanced(assigned)


class WorkerRuntime:
    """One worker process: ``await WorkerRuntime(...).run(stop)``."""

    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        options: WorkerOptions,
        pool: SlotPool | None = None,
    ) -> None:
        """``pool``: the slots shared with the queue's other lane, or a reserve
        (docs/DESIGN.md §8.4); ``settings.lane`` says which lane this runtime reads."""
        self.settings = settings
        self.options = options
        self._registry = registry
        self._runs_topic = settings.topic(TopicKind.RUNS)
        self.pool = pool
        rules = options.lease_rules
        start = now_ms()
        self.core = WorkerCore(
            worker=options.worker_id,
            concurrency=options.concurrency,
            known_job=lambda name: name in registry,
            now_ms=start,
            lease_loss_ms=rules.lease_loss_ms,
            rebalance_hold_ms=rules.rebalance_hold_ms,
            key_adoption_wait_ms=rules.adoption_wait_ms,
            max_open_per_partition=options.max_open_per_partition,
            pool=pool,
            lane=Lane.HIGH if settings.lane else Lane.NORMAL,
        )
        if pool is not None:  # the other lane left a slot: tick the core soon
            pool.on_wake(Lane.HIGH if settings.lane else Lane.NORMAL, self._woken)
        # No rate-limited run starts before the pauses are read to their end once.
        self.core.rates.known = False
        self.machine = WorkerMachine(self.core, rules, start)
        self._executor = Executor(
            registry,
            threads=options.concurrency,
            worker=options.worker_id,
            on_exits=self._jobs_exited,
            on_progress=self._job_progress,
        )
        self._consumer: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._producers: dict[tuple[int, int], AIOKafkaProducer] = {}
        # The _start_producer task of each (partition, lease) not yet finished: its
        # init_transactions (and the upgrade modes' fence_others) retries for up to
        # ADOPT_STEP_TIMEOUT_S and producer.stop() does not end that loop, so a
        # CloseProducer cancels the task, or its start would fence the next owner.
        self._starting: dict[tuple[int, int], asyncio.Future[Any]] = {}
        self._member: str | None = None
        self._synced_ms: int | None = None  # the last SyncGroup request answered: sent when
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due_ms: int | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._adoptions: set[asyncio.Future[Any]] = set()  # of _background: adoption steps
        self._tick_pending = False
        self._commit_stats = CommitStats()
        self.on_result_committed: Callable[[Commit], None] | None = None
        self._floor = BrokerFloor()
        self._moves = TimeMoves()
        # The sum of the backward moves so far (<= 0): a group request's send instant is
        # kept without them and re-expressed with those made since when its answer is
        # read (`_sent_stamp`, `_heard`), as the lease's instants were moved meanwhile.
        self._moved_back_ms = 0

    def _now(self) -> int:
        """The time every decision is made at: the wall clock, never behind the
        broker's as the fetched runs show it (``clock.BrokerFloor``); a move of it off the
        monotonic clock moves the machine's waits first (``clock.TimeMoves``)."""
        mono = monotonic_ms()
        now = self._floor.now_ms(now_ms(), mono)
        moved = self._moves.moved_ms(now, mono)
        if moved:
            if moved < 0:
                self._moved_back_ms += moved
            self.machine.time_moved(moved)
        return now

    def _sent_stamp(self) -> int:
        """A group request's send instant, without the backward moves so far."""
        return self._now() - self._moved_back_ms

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
            rebalance_timeout_ms=opts.lease_rules.rebalance_ms,
            max_poll_interval_ms=opts.max_poll_interval_ms,
            # A read_committed fetch can sit out its whole wait for records whose
            # transaction is still open; keep the wait short, runs are latency-bound.
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        )
        admin = AIOKafkaAdminClient(
            **admin_kwargs(self.settings, f"kafkron-worker-{opts.worker_id}-admin")
        )
        self._consumer, self._admin = consumer, admin
        pauses_consumer = AIOKafkaConsumer(
            **consumer_kwargs(self.settings, f"kafkron-worker-{opts.worker_id}-ratelimits")
        )
        following: asyncio.Task[None] | None = None
        try:
            await admin.start()
            await pauses_consumer.start()
            follower = RateLimitFollower(
                pauses_consumer,
                self.settings.topic(TopicKind.RATELIMITS),
                self.core.rates,
                self._tick_soon,
                self.settings.namespace,
            )
            following = asyncio.ensure_future(follower.follow(stop))
            await consumer.start()
            self._watch_heartbeats(consumer)
            consumer.subscribe([self._runs_topic], listener=_Listener(self))
            log.info(
                "worker %s: jobs %s, concurrency %d, group %s",
                opts.worker_id,
                ", ".join(self._registry.names()) or "(none)",
                opts.concurrency,
                self.settings.worker_group,
            )
            if opts.lease_loss_heartbeats <= 0:
                log.warning(
                    "worker %s: --lease-loss-heartbeats 0: the lease rule is off; a worker"
                    " cut off from the group keeps running until its fence at its next"
                    " commit, so concurrency keys and rate limits may be exceeded across"
                    " a failover (docs/DESIGN.md §8.2)",
                    opts.worker_id,
                )
            await self._consume(consumer, stop)
            stopping = time.monotonic()
            log.info(
                "worker %s stopping: %d jobs running, %d partitions",
                opts.worker_id,
                self.core.running,
                len(self.machine.live),
            )
            await self._drain()
            log.info("worker %s drained in %.1f s", opts.worker_id, time.monotonic() - stopping)
        finally:
            if following is not None:
                following.cancel()
                await asyncio.gather(following, return_exceptions=True)
            closing = time.monotonic()
            await self._shutdown(consumer, admin)
            await bounded(pauses_consumer.stop(), "stopping the rate-limit pauses consumer")
            log.info(
                "worker %s stopped: closed in %.1f s", opts.worker_id, time.monotonic() - closing
            )

    async def _consume(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        next_stats = time.monotonic() + STATS_EVERY_S
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=POLL_MS, max_records=MAX_BATCH)
            if batch:
                self._receive(batch)
            if self.machine.catching_up():
                await self._report_positions(consumer)
            self._tick()
            if time.monotonic() >= next_stats:
                next_stats = time.monotonic() + STATS_EVERY_S
                log.info("worker %s: %s", self.options.worker_id, self.stats())

    def stats(self) -> dict[str, int]:
        commits = self._commit_stats.transactions
        counts = self.machine.counts
        paused, rate_limited = self.core.rates.waiting(self.core.queued_runs(), self._now())
        return {
            "partitions": len(self.machine.live),
            "running": self.core.running,
            "queued": self.core.queued,
            "rate_paused_waiting": paused,
            "rate_limited_queued": rate_limited,
            **self.core.counts,
            "transactions": commits,
            "results_per_transaction": self._commit_stats.results // commits if commits else 0,
            "ms_per_transaction": int(self._commit_stats.ms / commits) if commits else 0,
            "adoptions": counts.adoptions,
            "adoption_failures": counts.adoption_failures,
            "commit_failures": counts.commit_failures,
            # Above 0: the wall clock is behind the broker's; decisions use the broker's.
            "clock_behind_ms": self._floor.behind_ms(now_ms(), monotonic_ms()),
        }

    def flow_view(self) -> LaneView:
        """Its queue, lane, slots and runs now, for the per-queue and per-key metrics."""
        return LaneView(
            queue=self.settings.queue,
            lane=HIGH_LANE if self.settings.lane else NORMAL_LANE,
            slots=self.options.concurrency if self.pool is None else self.pool.concurrency,
            slots_shared=self.pool is not None,
            running=self.core.running_runs(),
            waiting=self.core.queued_runs(),
            pauses=self.core.rates.pauses(),
            now_ms=self._now(),
        )

    async def _drain(self) -> None:
        """Stop fetching and starting runs; let running jobs finish for up to
        ``drain_s``; commit. Queued runs are left to the partitions' next owners."""
        self._apply(self.machine.stop(self._now()))
        deadline = time.monotonic() + self.options.drain_s
        next_word = time.monotonic() + DRAIN_LOG_EVERY_S
        while time.monotonic() < deadline and not self.core.drained():
            self._tick()
            await asyncio.sleep(0.05)
            if time.monotonic() >= next_word:  # a slow stop says what it waits for
                next_word += DRAIN_LOG_EVERY_S
                log.info(
                    "worker %s draining: %s", self.options.worker_id, self.core.drain_waits_for()
                )
        if not self.core.drained():
            log.warning(
                "worker %s: %d jobs still running after %.0f s; cancelling them, the next "
                "owner of their partitions runs them again",
                self.options.worker_id,
                self.core.running,
                self.options.drain_s,
            )

    async def _shutdown(self, consumer: AIOKafkaConsumer, admin: AIOKafkaAdminClient) -> None:
        # A stopping worker adopts nothing: a step in flight (a fence, a read of the
        # committed offset, each bounded by ADOPT_STEP_TIMEOUT_S) is cancelled, not
        # awaited, so a partition assigned by the rebalance our own stop caused never
        # holds the exit up. Its producer is closed below with the others; the next
        # owner fences its transactional id anyway.
        for task in list(self._adoptions):
            task.cancel()
        self._apply(self.machine.close(self._now()))
        for key in list(self._producers):
            self._close_producer(*key)
        # An async job that swallows its cancellation must not hold the process up.
        await bounded(self._executor.close(), "stopping the running jobs")
        if self._timer is not None:
            self._timer.cancel()
        if self._background:
            # Every task here is bounded (adoption steps, writes, closes); a slow one is
            # named in the log while it is awaited.
            pending = set(self._background)
            while pending:
                done, pending = await asyncio.wait(pending, timeout=DRAIN_LOG_EVERY_S)
                for task in done:  # retrieved, as gather(return_exceptions=True) did
                    if not task.cancelled():
                        task.exception()
                if pending:
                    log.info(
                        "worker %s stopping: waiting for %s",
                        self.options.worker_id,
                        ", ".join(sorted(_task_name(t) for t in pending)),
                    )
        # At once: a stop lasts as long as the slowest close, not their sum.
        await asyncio.gather(
            bounded(consumer.stop(), "stopping the runs consumer"),
            bounded(admin.close(), "closing the admin client"),
        )

    # --- inputs ------------------------------------------------------------------------

    def _receive(self, batch: dict[TopicPartition, list[Any]]) -> None:
        mono = monotonic_ms()
        runs_topic = self._runs_topic
        appended_ms = max(
            (
                record.timestamp
                for items in batch.values()
                for record in items
                if record.timestamp_type == LOG_APPEND_TIME
            ),
            default=0,
        )
        self._floor.observe(appended_ms, mono)
        now = self._now()  # a fresh monotonic reading beside the wall clock's (TimeMoves)
        records = [
            InRecord(
                TopicKind.RUNS,
                tp.partition,
                record.offset,
                record.key,
                record.value,
                record.timestamp,
            )
            for tp, items in batch.items()
            if tp.topic == runs_topic
            for record in items
        ]
        self._apply(self.machine.records(records, now))

    async def _report_positions(self, consumer: AIOKafkaConsumer) -> None:
        """Tell the machine how far the consumer has read each partition that is
        catching up after its adoption (the position moves past transaction markers
        and aborted batches too, so it reaches the last stable offset)."""
        assignment = consumer.assignment()
        for partition in sorted(self.machine.catching_up()):
            tp = TopicPartition(self._runs_topic, partition)
            if tp not in assignment:
                continue
            try:
                position = await consumer.position(tp)
            except Exception as exc:  # a rebalance under way: asked again next turn
                log.debug("position of %s: %s", tp, _describe(exc))
                continue
            self._apply(self.machine.fetched_to(partition, position, self._now()))

    def _job_progress(self, key: RunKey, details: Any, at_ms: int) -> None:
        self._apply(self.machine.progress(key, details, at_ms, self._now()))
        self._tick_soon()  # written with the partition's next commit

    def _jobs_exited(self, exits: list[tuple[RunKey, Outcome]]) -> None:
        """A turn's exits: one clock read, one pass of the core, one tick for all."""
        self._apply(self.machine.jobs_exited(exits, self._now()))
        self._tick_soon()

    def _woken(self) -> None:
        """The pool's wake-up: called from the other lane's actions, on the loop."""
        # No running loop (a close outside it): the next turn's tick fills the slots.
        with contextlib.suppress(RuntimeError):
            self._tick_soon()

    def _tick_soon(self) -> None:
        """Many inputs arrive in one turn of the loop; tick once for all of them."""
        if not self._tick_pending:
            self._tick_pending = True
            asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self._tick_pending = False
        self._apply(self.machine.tick(self._now()))

    def rebalance_started(self) -> None:
        self._apply(self.machine.rebalance_started(self._now()))

    def rebalanced(self, assigned: Iterable[TopicPartition]) -> None:
        """The group's new assignment for us (from the listener; nothing awaited)."""
        member_id = self._member_id()
        rejoined = self._member is not None and member_id != self._member
        self._member = member_id
        partitions = {tp.partition for tp in assigned if tp.topic == self._runs_topic}
        now = self._now()  # first: it reports a move made since the SyncGroup went out
        stamp, self._synced_ms = self._synced_ms, None
        sent_ms = None if stamp is None else stamp + self._moved_back_ms
        self._apply(self.machine.assigned(partitions, now, rejoined=rejoined, sent_ms=sent_ms))

    def _member_id(self) -> str | None:
        consumer = self._consumer
        coordinator = None if consumer is None else consumer._coordinator
        member = getattr(coordinator, "member_id", None)
        return member if isinstance(member, str) else None

    def _watch_heartbeats(self, consumer: AIOKafkaConsumer) -> None:
        """Tell the machine about every successful Heartbeat and SyncGroup answer,
        stamped with its request's send time (``group_answers``)."""
        watch_group_answers(consumer._coordinator, self._sent_stamp, self._heard)

    def _heard(self, kind: str, stamp_ms: int) -> None:
        if kind == HEARTBEAT:
            now = self._now()  # first: it reports a move made while the request was out
            sent_ms = stamp_ms + self._moved_back_ms  # in the lease's instants as they are now
            self._apply(self.machine.heartbeat(now, sent_ms=sent_ms))
        else:  # the assignment it carries reaches `rebalanced` next, from the listener,
            self._synced_ms = stamp_ms  # which re-expresses it with the moves made by then

    # --- actions -----------------------------------------------------------------------

    def _apply(self, actions: Iterable[Action]) -> None:
        """Carry out the core's actions, each on its own: one that raises (a bug) is
        logged and the others still run, so a turn's exits cannot lose the starts and
        cancels that follow (a StartJob that raised is reported as a failed exit)."""
        for action in actions:
            try:
                if isinstance(action, StartJob):
                    self._executor.start(action.key, action.run)
                elif isinstance(action, CancelJob):
                    if action.reason != "revoked" or log.isEnabledFor(logging.DEBUG):
                        log.info("cancelling run at %s: %s", action.key, action.reason)
                    self._executor.cancel(action.key, action.reason)
                elif isinstance(action, Write):
                    self._spawn(self._write(action))
                elif isinstance(action, WakeAt):
                    self._arm_timer(action.at_ms)
                elif isinstance(action, Seek | Pause | Resume):
                    self._position(action)
                elif isinstance(action, StartProducer):
                    key = (action.partition, action.lease)
                    task = self._spawn(self._start_producer(*key), adoption=True)
                    self._starting[key] = task
                    task.add_done_callback(functools.partial(self._started, key))
                elif isinstance(action, ReadCommitted):
                    self._spawn(self._read_committed(action.partition, action.lease), adoption=True)
                elif isinstance(action, CloseProducer):
                    self._close_producer(action.partition, action.lease)
                elif isinstance(action, Owns):
                    log.info(
                        "worker %s owns runs partitions %s",
                        self.options.worker_id,
                        list(action.partitions) or "none",
                    )
                elif isinstance(action, Note):
                    log.log(logging.WARNING if action.warning else logging.INFO, "%s", action.text)
                elif isinstance(action, Discarded):
                    log.warning(
                        "skipping record %s of %s: %s", action.key, self._runs_topic, action.reason
                    )
                elif isinstance(action, LeaseLost):
                    log.error(
                        "worker %s: no heartbeat reached the group coordinator for %d ms; "
                        "cancelling the runs of partitions %s (another worker may own them now)",
                        self.options.worker_id,
                        action.silent_ms,
                        list(action.partitions),
                    )
            except Exception as exc:
                log.exception("applying %s failed", type(action).__name__)
                if isinstance(action, StartJob):
                    self._executor.failed_to_start(action.key, exc)

    def _position(self, action: Seek | Pause | Resume) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        tp = TopicPartition(self._runs_topic, action.partition)
        if tp not in consumer.assignment():
            return  # not in the consumer's assignment (a rebalance is under way)
        if isinstance(action, Seek):
            consumer.seek(tp, action.offset)
        elif isinstance(action, Pause):
            consumer.pause(tp)
        else:
            consumer.resume(tp)

    def _arm_timer(self, due: int) -> None:
        """Make sure ``_tick`` runs at ``due``, never later."""
        if self._timer_due_ms is not None and self._timer_due_ms <= due:
            return
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer_due_ms = due
        self._timer = loop.call_later(max(0.0, (due - self._now()) / 1000), self._timer_fired)

    def _timer_fired(self) -> None:
        self._timer = None
        self._timer_due_ms = None
        self._tick()

    async def _start_producer(self, partition: int, lease: int) -> None:
        """``init_transactions`` of ``{ns}.worker.{partition}``: fences the previous owner.

        During an upgrade from 0.1 (``KAFKRON_TRANSACTIONAL_IDS=legacy`` or
        ``migrate``) the other form of the id is fenced first, in the same bounded
        step (`topics.fencing`): an owner from before the rolling restart may hold it.
        """
        producer = AIOKafkaProducer(
            **transactional_producer_kwargs(
                self.settings,
                f"kafkron-worker-{self.options.worker_id}-{partition}",
                self.settings.worker_transactional_id(partition),
                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                # A transaction that starts while the previous one's markers are still
                # being written is answered CONCURRENT_TRANSACTIONS and retried after
                # this backoff (aiokafka's default, 100 ms, is most of a commit's latency).
                retry_backoff_ms=TXN_RETRY_BACKOFF_MS,
            )
        )
        self._producers[(partition, lease)] = producer
        try:
            await within(
                _fence_then_start(self.settings, partition, producer), ADOPT_STEP_TIMEOUT_S
            )
        except Exception as exc:  # the coordinator loading or moving, a timeout, ...
            self._apply(self.machine.adoption_failed(partition, lease, _describe(exc), self._now()))
            return
        self._apply(self.machine.producer_started(partition, lease, self._now()))

    async def _read_committed(self, partition: int, lease: int) -> None:
        tp = TopicPartition(self._runs_topic, partition)
        admin, consumer = self._admin, self._consumer
        assert admin is not None and consumer is not None
        try:
            # Raises CommittedUnknown when the coordinator's answer leaves tp out (it is
            # loading or moved); taken for "nothing committed", every run of the
            # partition would run again.
            committed = await within(
                fetch_committed(admin, self.settings.worker_group, [tp]), ADOPT_STEP_TIMEOUT_S
            )
            found = committed[tp]
            if found is not None:
                start, metadata = found.offset, found.metadata
            else:
                beginning = await within(consumer.beginning_offsets([tp]), ADOPT_STEP_TIMEOUT_S)
                start, metadata = beginning[tp], None
            # The end a read_committed consumer sees now (the last stable offset):
            # no run of the partition starts before it has been read (a cancel
            # record committed before this adoption is then always seen first).
            ends = await within(consumer.end_offsets([tp]), ADOPT_STEP_TIMEOUT_S)
        except Exception as exc:
            self._apply(self.machine.adoption_failed(partition, lease, _describe(exc), self._now()))
            return
        self._apply(
            self.machine.committed_read(
                partition, lease, start, metadata, self._now(), ends.get(tp)
            )
        )

    def _started(self, key: tuple[int, int], task: asyncio.Future[Any]) -> None:
        if self._starting.get(key) is task:  # not a renewal's later start of the same key
            del self._starting[key]

    def _close_producer(self, partition: int, lease: int) -> None:
        # Only the start in flight now: a renewal's StartProducer of the same key is
        # applied after this CloseProducer and registers a task of its own. A task not
        # yet run is cancelled too (it has registered no producer).
        starting = self._starting.pop((partition, lease), None)
        if starting is not None:
            starting.cancel()
        producer = self._producers.pop((partition, lease), None)
        if producer is not None:
            what = f"stopping the producer of runs partition {partition}"
            self._spawn(stop_producer(producer, what))

    async def _write(self, action: Write) -> None:
        commit = action.commit
        producer = self._producers.get((commit.partition, commit.lease))
        if producer is None:  # closed meanwhile (the machine has moved on)
            self._apply(self.machine.commit_failed(commit, "producer closed", self._now()))
            return
        began = time.perf_counter()
        outcome = await write_commit(
            producer,
            self.settings,
            commit,
            abort_from_ms=action.abort_from_ms,
            now_ms=self._now,
        )
        now = self._now()
        machine = self.machine
        if outcome.kind == "done":
            self._apply(machine.commit_done(commit, now))
            metrics.worker_committed(time.perf_counter() - began)
            stats = self._commit_stats
            stats.transactions += 1
            stats.results += len(commit.results)
            stats.ms += (time.perf_counter() - began) * 1000
            if self.on_result_committed is not None:
                self.on_result_committed(commit)
        elif outcome.kind == "fenced":
            metrics.worker_fenced()
            self._apply(machine.fenced(commit.partition, commit.lease, now))
        elif outcome.kind == "refused":
            log.error(
                "runs partition %d: result records refused by %s (%s)",
                commit.partition,
                self.settings.topic(TopicKind.RESULTS),
                outcome.reason,
            )
            self._apply(machine.commit_refused(commit, outcome.refused, outcome.reason, now))
        elif outcome.kind == "unknown":
            self._apply(machine.commit_unknown(commit, outcome.reason, now))
        elif outcome.kind == "denied":
            self._apply(machine.commit_denied(commit, outcome.denied, now))
        else:
            self._apply(machine.commit_failed(commit, outcome.reason, now))
        self._tick_soon()

    def _spawn(self, coro: Awaitable[Any], *, adoption: bool = False) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        if adoption:
            self._adoptions.add(task)
            task.add_done_callback(self._adoptions.discard)
        return task


def _task_name(task: asyncio.Future[Any]) -> str:
    coro = task.get_coro() if isinstance(task, asyncio.Task) else None
    return getattr(coro, "__qualname__", None) or repr(task)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _fence_then_start(settings: Settings, partition: int, producer: AIOKafkaProducer) -> None:
    await fence_others(settings, "worker", partition)
    await producer.start()
