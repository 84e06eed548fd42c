"""The scheduler process: consumer-group membership, shard lifecycle, the batch loop.

Ownership of shard p is the consumer group's assignment of partition p of
`{ns}.commands` and `{ns}.results` (the lease). The range assignor gives partition
p of both topics to the same member because both have the shard count of
partitions (checked at start); we use it explicitly, since aiokafka's default,
round robin, would split them.

Theory of operation::

    assigned p  -> pause commands[p], results[p]; queue p for building
    loop:
      build queued shards   (producer.start() fences old owners; restore; seek to
                             the committed offsets; resume)
      getmany(timeout = until the earliest shard is due, at most 1 s)
      apply records to their shard's core; advance(now, max_fires) every shard
      (bounded: a backlog goes out over several turns, the next one at once)
      per shard with output or consumed offsets: ONE transaction
          (records + send_offsets_to_transaction + commit), shards in parallel
    revoked p   -> park the shard: core and producer kept, nothing read or written
                   (the loop holds no open transaction between turns)
    assigned p again (the same rebalance gives it back, as eager rebalancing does
                   with most shards whenever a member joins or leaves)
                -> resume the parked shard: no fence, no restore; seek to the
                   committed offsets. Parked shards not given back are closed.

Resuming without fencing is safe because fencing stays the arbiter: had another
process owned p in between, its producer start bumped the epoch of p's
transactional id, so the resume's clock probe (an aborted transaction) fails with
ProducerFenced and the shard is built afresh; any later transaction would fail
the same way — nothing of the stale core reaches a topic.

A shard whose transaction fails is dropped and rebuilt from the changelog: the
core's memory already includes the batch that did not commit. A *fenced* shard is
the zombie case — someone else started a producer with our transactional id, so
someone else believes they own p. We stop writing for p at once and only rebuild
it if the group still assigns p to us a session timeout later (by then, either we
were the zombie and lost the assignment, or the other writer was and lost its own).

Garbage collection: a shard's state is hundreds of thousands of long-lived
objects (schedules, definitions, timers). CPython's young-generation collections
trigger every 700 allocations and each full collection walks all of them; firing
allocates many short-lived objects, so the collector halved `advance`'s throughput
(measured by the shard core's bench). After every restore the process therefore
calls ``gc.freeze()`` (the restored state moves to the permanent generation: never
scanned, still freed by reference counting when a schedule goes) and it runs with
a young-generation threshold of `GC_YOUNG_THRESHOLD`. The cost: a reference cycle
among frozen objects is never collected; the state's one cycle (an item and its
wheel timer) is broken by the core when the timer fires or is cancelled.

The event loop is never busy: with nothing due and nothing arriving, a turn costs
one ``getmany`` that waits up to a second.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.consumer.fetcher import ConsumerRecord
from aiokafka.coordinator.assignors.range import RangePartitionAssignor

from actors.observe import metrics
from actors.scheduler.breather import Breather
from actors.scheduler.clock import Clock, SystemClock
from actors.scheduler.restore import make_restore_consumer
from actors.scheduler.shard_runner import (
    CoreFactory,
    ShardFenced,
    ShardRunner,
)
from actors.scheduler.skew import DEFAULT_BOUND_MS, SkewEstimator
from actors.scheduler.writer import Partitioner
from topics.names import Settings, TopicKind
from topics.records import InRecord, OutRecord

log = logging.getLogger("kafkron.scheduler")

Batch = dict[TopicPartition, list[ConsumerRecord[Any, Any]]]

MAX_SLEEP_MS = 1_000
# Young-generation GC threshold (CPython's default is 700); see the module docstring.
GC_YOUNG_THRESHOLD = 50_000
REBUILD_BACKOFF_S = 1.0
# Fencing, restoring and seeking one shard; beyond this the broker is unwell: retry.
BUILD_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class RuntimeOptions:
    """Knobs of `kafkron scheduler`; the defaults are the documented ones.

    ``session_timeout_ms``: how long the group waits for a silent member before its
    shards move (the failover time is about this plus a restore).
    ``heartbeat_ms``: heartbeat interval, a third of the session timeout or less.
    ``max_batch``: most records taken per turn; a turn is one transaction per shard.
    ``max_fires_per_turn``: most due timers a shard handles per turn (occurrences
    fired, attempts timed out or retried). A takeover's backlog is then written in
    transactions of this size, the first within a second of the restore, and the
    loop turns again at once while work remains (nothing waits for the next tick).
    ``skew_bound_ms``: local clock may run this far ahead of the broker's before
    firing is held back.
    ``figures_interval_s``: how often per-shard figures are logged (0: never).
    ``commit_timeout_s``: a transaction not committed by then counts as failed.
    """

    session_timeout_ms: int = 10_000
    heartbeat_ms: int = 3_000
    max_batch: int = 5_000
    max_fires_per_turn: int = 5_000
    skew_bound_ms: int = DEFAULT_BOUND_MS
    figures_interval_s: float = 30.0
    commit_timeout_s: float = 15.0


def default_core_factory(settings: Settings) -> CoreFactory:
    from actors.shard import ShardCore

    def make(partition: int, partitions: int, now_ms: int) -> ShardCore:
        return ShardCore(
            partition=partition,
            partitions=partitions,
            now_ms=now_ms,
            namespace=settings.namespace,
        )

    return make


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Forwards rebalances to the runtime; aiokafka swallows listener errors, we log them."""

    def __init__(self, runtime: SchedulerRuntime) -> None:
        self._runtime = runtime

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        try:
            await self._runtime._on_revoked({tp.partition for tp in revoked})
        except Exception:
            log.exception("dropping revoked shards failed; they are dropped anyway")

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        try:
            self._runtime._on_assigned(set(assigned))
        except Exception:
            log.exception("taking on assigned shards failed")


class SchedulerRuntime:
    def __init__(
        self,
        settings: Settings,
        options: RuntimeOptions | None = None,
        *,
        clock: Clock | None = None,
        core_factory: CoreFactory | None = None,
    ) -> None:
        self.settings = settings
        self.options = options or RuntimeOptions()
        self.clock: Clock = clock or SystemClock()
        self.skew = SkewEstimator(bound_ms=self.options.skew_bound_ms)
        self._core_factory = core_factory
        self._kinds = {
            settings.topic(TopicKind.COMMANDS): TopicKind.COMMANDS,
            settings.topic(TopicKind.RESULTS): TopicKind.RESULTS,
        }
        self._lock = asyncio.Lock()
        self.runners: dict[int, ShardRunner] = {}
        # Revoked shards kept whole until the assignment says whether they come back.
        self._parked: dict[int, ShardRunner] = {}
        # Parked shards the latest assignment did not give back: closed by the loop.
        self._not_given_back: set[int] = set()
        # p -> monotonic instant before which we must not (re)build it
        self._waiting: dict[int, float] = {}
        self._assigned: set[int] = set()
        self._partitions = 0
        self._partitioner: Partitioner | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._restore_consumer: AIOKafkaConsumer | None = None
        self._held_back = False
        self.started = asyncio.Event()
        self._stopping = asyncio.Event()

    # -- the process -------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set, then finish the turn, close every shard, leave."""
        from topics.admin import shard_count  # the foundation's check of the contract

        self._stopping = stop
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)

        self._partitions = await shard_count(self.settings)
        if self._core_factory is None:
            self._core_factory = default_core_factory(self.settings)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.bootstrap,
            group_id=self.settings.scheduler_group,
            client_id=f"{self.settings.namespace}-scheduler",
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            partition_assignment_strategy=(RangePartitionAssignor,),
            session_timeout_ms=self.options.session_timeout_ms,
            heartbeat_interval_ms=self.options.heartbeat_ms,
            rebalance_timeout_ms=max(self.options.session_timeout_ms, 30_000),
        )
        restore_consumer = make_restore_consumer(
            self.settings.bootstrap, f"{self.settings.namespace}-scheduler-restore"
        )
        self._consumer, self._restore_consumer = consumer, restore_consumer
        await restore_consumer.start()
        try:
            self._partitioner = Partitioner(await self._partition_counts())
            consumer.subscribe(list(self._kinds), listener=_Listener(self))
            await consumer.start()
            self.started.set()
            log.info(
                "scheduler started: group %s, %d shards, session timeout %d ms",
                self.settings.scheduler_group,
                self._partitions,
                self.options.session_timeout_ms,
            )
            await self._loop(consumer, stop)
        finally:
            async with self._lock:
                # No transaction is open between turns; closing is stopping producers.
                await asyncio.gather(*(self._drop(p, "shutting down") for p in list(self.runners)))
                await self._close_parked(keep=set())
            await _quietly(consumer.stop())  # leaves the group: the shards move at once
            await self._close_parked(keep=set())
            await _quietly(restore_consumer.stop())
            log.info("scheduler stopped")

    async def _partition_counts(self) -> dict[TopicKind, int]:
        from topics.admin import admin_client

        counts: dict[TopicKind, int] = {}
        names = {self.settings.topic(kind): kind for kind in TopicKind}
        async with admin_client(self.settings) as admin:
            for topic in await admin.describe_topics(list(names)):
                if topic["error_code"] == 0 and topic["partitions"]:
                    counts[names[topic["topic"]]] = len(topic["partitions"])
        missing = sorted(name for name, kind in names.items() if kind not in counts)
        if missing:
            raise RuntimeError(f"topics {missing} are missing; run `kafkron topics create` first")
        return counts

    async def _loop(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        next_figures = time.monotonic() + self.options.figures_interval_s
        max_records = self.options.max_batch
        while not stop.is_set():
            await self._build_waiting(consumer)
            timeout_ms = self._sleep_ms()
            batch = await consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
            async with self._lock:
                await self._turn(consumer, batch)
            if self.options.figures_interval_s > 0 and time.monotonic() >= next_figures:
                next_figures = time.monotonic() + self.options.figures_interval_s
                self._log_figures()

    # -- time --------------------------------------------------------------------

    def now_ms(self) -> int:
        """The shards' now: the local clock, held back if it is proven to run ahead."""
        local_ms = self.clock.now_ms()
        holdback_ms = self.skew.holdback_ms()
        if holdback_ms and not self._held_back:
            log.error(
                "CLOCK AHEAD: the local clock runs at least %d ms ahead of the broker's"
                " (bound %d ms); holding firing back by %d ms so nothing fires early."
                " Fix this machine's time sync (NTP/chrony).",
                self.skew.ahead_ms,
                self.skew.bound_ms,
                holdback_ms,
            )
        elif not holdback_ms and self._held_back:
            log.warning(
                "clock skew back within %d ms; firing no longer held back", self.skew.bound_ms
            )
        self._held_back = bool(holdback_ms)
        return local_ms - holdback_ms

    def _sleep_ms(self) -> int:
        if self._waiting:
            return 100  # come back soon to build queued shards
        now_ms = self.now_ms()
        sleep_ms = MAX_SLEEP_MS
        for runner in self.runners.values():
            if runner.has_unwritten():
                return 0
            due_ms = runner.core.next_due_ms()
            if due_ms is not None:
                sleep_ms = min(sleep_ms, due_ms - now_ms)
        # At least 1 ms: the wheel names the start of a bucket, which may lie up to a
        # tick before its first item is due; without the floor that tick would spin.
        return max(1, sleep_ms)

    # -- one turn ----------------------------------------------------------------

    async def _turn(self, consumer: AIOKafkaConsumer, batch: Batch) -> None:
        now_ms = self.now_ms()
        breather = Breather()
        out: dict[int, list[OutRecord]] = defaultdict(list)
        offsets: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
        for tp, records in batch.items():
            if not records:
                continue
            runner = self.runners.get(tp.partition)
            if runner is None:
                # Not built (or dropped) yet: read these again once it is.
                if tp.partition in self._assigned:
                    consumer.seek(tp, records[0].offset)
                    consumer.pause(tp)
                continue
            kind = self._kinds[tp.topic]
            core = runner.core
            shard_out = out[tp.partition]
            for i, r in enumerate(records):
                shard_out.extend(
                    core.apply(
                        InRecord(kind, r.partition, r.offset, r.key, r.value, r.timestamp),
                        now_ms,
                    )
                )
                if i % 64 == 63:
                    await breather.maybe()
            offsets[tp.partition][tp] = records[-1].offset + 1
        max_fires = self.options.max_fires_per_turn
        for p, runner in self.runners.items():
            out[p].extend(runner.core.advance(now_ms, max_fires))
            await breather.maybe()
        work = [
            (p, runner, out[p], offsets[p])
            for p, runner in self.runners.items()
            if out[p] or offsets[p] or runner.has_unwritten()
        ]
        if not work:
            return
        results = await asyncio.gather(
            *(runner.commit(records, offs) for _, runner, records, offs in work),
            return_exceptions=True,
        )
        for (p, _, _, _), result in zip(work, results, strict=True):
            if isinstance(result, ShardFenced):
                metrics.shard_fenced(p)
                log.error(
                    "ZOMBIE: shard %d was fenced — another scheduler started transactional id"
                    " %s, so it believes it owns shard %d. This process stops writing for it"
                    " now; the transaction it had open is aborted by the broker.",
                    p,
                    self.settings.shard_transactional_id(p),
                    p,
                )
                lease_s = self.options.session_timeout_ms / 1000
                await self._drop(p, "fenced", rebuild_after_s=lease_s)
            elif isinstance(result, BaseException):
                metrics.shard_transaction_failed(p)
                log.error(
                    "shard %d: %s; dropping its state and rebuilding it from the changelog",
                    p,
                    result,
                )
                await self._drop(p, "transaction failed", rebuild_after_s=REBUILD_BACKOFF_S)

    # -- shard lifecycle -------------------------------------------------------------

    def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        consumer = self._consumer
        assert consumer is not None
        by_partition: dict[int, set[str]] = defaultdict(set)
        for tp in assigned:
            by_partition[tp.partition].add(tp.topic)
        if assigned:
            consumer.pause(*assigned)  # nothing is read for p before its shard is built
        owned = set()
        for p, topics in sorted(by_partition.items()):
            if topics != set(self._kinds):
                log.error(
                    "assignment gave this process only %s of shard %d; not taking the shard"
                    " (is another scheduler version in group %s using another assignor?)",
                    sorted(topics),
                    p,
                    self.settings.scheduler_group,
                )
                continue
            owned.add(p)
            self._waiting[p] = 0.0
        self._assigned = owned
        self._not_given_back |= set(self._parked) - owned
        log.info("assigned shards %s", sorted(owned))  # tests read this line's tail
        resumed = sorted(p for p in owned if p in self._parked)
        if resumed:
            log.info("parked shards %s assigned back: resuming them without restore", resumed)

    async def _on_revoked(self, revoked: set[int]) -> None:
        async with self._lock:
            for p in sorted(revoked):
                self._waiting.pop(p, None)
                runner = self.runners.pop(p, None)
                if runner is not None:
                    self._parked[p] = runner  # no transaction is open between turns
            self._assigned -= revoked
        if revoked:
            log.info("revoked shards %s", sorted(revoked))

    async def _drop(self, p: int, why: str, rebuild_after_s: float | None = None) -> None:
        runner = self.runners.pop(p, None)
        if runner is not None:
            await runner.close()
            log.info("shard %d dropped (%s)", p, why)
        if rebuild_after_s is not None and p in self._assigned:
            self._waiting[p] = time.monotonic() + rebuild_after_s
            if self._consumer is not None:
                self._consumer.pause(*self._shard_tps(p))

    async def _close_parked(self, keep: set[int] | None = None) -> None:
        """Close the parked shards the assignment did not give back (all but ``keep``).

        Only once an assignment came: between revocation and assignment a parked
        shard may still come back.
        """
        if keep is None:
            closing, self._not_given_back = self._not_given_back, set()
        else:
            closing = set(self._parked) - keep
        gone = [self._parked.pop(p) for p in sorted(closing) if p in self._parked]
        await asyncio.gather(*(runner.close() for runner in gone))
        for runner in gone:
            log.info("shard %d dropped (revoked, not assigned back)", runner.partition)

    async def _resume(self, consumer: AIOKafkaConsumer, runner: ShardRunner) -> None:
        """Feed a parked shard again: its core and producer are as the last turn left them.

        The clock probe is also the cheap check that our producer is still the
        current epoch: had another process taken the shard meanwhile, it raises
        ProducerFenced here and the caller builds the shard afresh, at once.
        """
        await runner.sample_clock()
        for tp in (runner.commands_tp, runner.results_tp):
            committed = await consumer.committed(tp)
            consumer.seek(tp, 0 if committed is None else committed)
        self.runners[runner.partition] = runner
        consumer.resume(runner.commands_tp, runner.results_tp)
        log.info("shard %d resumed after the rebalance (no restore)", runner.partition)

    def _shard_tps(self, p: int) -> tuple[TopicPartition, ...]:
        return tuple(TopicPartition(topic, p) for topic in self._kinds)

    async def _build_waiting(self, consumer: AIOKafkaConsumer) -> None:
        if not self._waiting and not self._parked:
            return
        now_s = time.monotonic()
        async with self._lock:
            await self._close_parked()
            due = sorted(
                p for p, at in self._waiting.items() if at <= now_s and p in self._assigned
            )
            for p in [p for p in self._waiting if p not in self._assigned]:
                del self._waiting[p]
            for p in [p for p in due if p in self._parked]:
                due.remove(p)
                runner = self._parked.pop(p)
                try:
                    await asyncio.wait_for(self._resume(consumer, runner), BUILD_TIMEOUT_S)
                except Exception as exc:
                    self.runners.pop(p, None)
                    await runner.close()
                    log.error(
                        "shard %d: could not resume it (%s: %s); rebuilding it",
                        p,
                        type(exc).__name__,
                        exc,
                    )
                    continue  # stays in _waiting: built from scratch next time
                self._waiting.pop(p, None)
            if not due:
                return
            runners = [self._new_runner(p) for p in due]
            # Fencing is a round trip to the transaction coordinator per shard: in parallel.
            fenced = await asyncio.gather(
                *(asyncio.wait_for(r.fence(), BUILD_TIMEOUT_S) for r in runners),
                return_exceptions=True,
            )
            for runner, fence_error in zip(runners, fenced, strict=True):
                p = runner.partition
                error = fence_error
                if self._stopping.is_set():
                    await runner.close()
                    continue
                if error is None:
                    try:
                        await asyncio.wait_for(self._take_on(consumer, runner), BUILD_TIMEOUT_S)
                    except Exception as exc:
                        error = exc
                if isinstance(error, BaseException):
                    await runner.close()
                    log.error(
                        "shard %d: could not take it on (%s: %s); retrying in %.0f s",
                        p,
                        type(error).__name__,
                        error,
                        REBUILD_BACKOFF_S,
                    )
                    self._waiting[p] = time.monotonic() + REBUILD_BACKOFF_S
                else:
                    self._waiting.pop(p, None)

    def _new_runner(self, p: int) -> ShardRunner:
        assert self._partitioner is not None and self._core_factory is not None
        return ShardRunner(
            partition=p,
            partitions=self._partitions,
            settings=self.settings,
            clock=self.clock,
            skew=self.skew,
            partitioner=self._partitioner,
            core_factory=self._core_factory,
            commit_timeout_s=self.options.commit_timeout_s,
        )

    async def _take_on(self, consumer: AIOKafkaConsumer, runner: ShardRunner) -> None:
        """Restore a fenced runner, position its inputs, and start feeding it."""
        assert self._restore_consumer is not None
        # Before the first advance: a broker-time sample, so the skew hold-back
        # already applies to the first fires (see ShardRunner.sample_clock).
        await runner.sample_clock()
        await runner.restore(self._restore_consumer, self.now_ms)
        gc.freeze()  # the restored state is long-lived: keep it out of every collection
        # Positions from the committed offsets, read *after* fence() settled the
        # previous owner's transaction: nothing can be committed behind them any more.
        for tp in (runner.commands_tp, runner.results_tp):
            committed = await consumer.committed(tp)
            # Offset 0 when nothing was committed: if retention removed it, the
            # consumer's auto_offset_reset=earliest moves to the first offset kept.
            # (seek_to_beginning would wait for the fetcher's long poll.)
            consumer.seek(tp, 0 if committed is None else committed)
        self.runners[runner.partition] = runner
        consumer.resume(runner.commands_tp, runner.results_tp)
        log.info(
            "shard %d taken on: %d changelog records (%d schedule ids) restored in %.0f ms",
            runner.partition,
            runner.restored_records,
            runner.restored_keys,
            runner.restore_ms or 0.0,
        )

    # -- figures -----------------------------------------------------------------

    def figures(self) -> dict[str, Any]:
        """In-process figures: per shard and for the process (skew)."""
        return {
            "shards": {p: r.figures() for p, r in sorted(self.runners.items())},
            "waiting": sorted(self._waiting),
            **self.skew.figures(),
        }

    def _log_figures(self) -> None:
        figures = self.figures()
        for p, shard in figures["shards"].items():
            log.info("shard %d figures: %s", p, shard)
        log.info(
            "clock skew: %s ms (±%s), held back %s ms",
            figures["skew_ms"],
            figures["skew_uncertainty_ms"],
            figures["holdback_ms"],
        )


async def _quietly(awaitable: Any) -> None:
    try:
        await asyncio.wait_for(awaitable, 15.0)
    except Exception as exc:
        log.debug("ignored during shutdown: %s", exc)
