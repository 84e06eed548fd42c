"""The scheduler process on aiokafka: the executor of `actors.scheduler.lifecycle`.

Every decision (which shards this process holds, when it fences, probes,
restores, fires and writes, what a refusal or a fence means) is the lifecycle
machine's; this module only carries its actions out on Kafka and reports back
(the simulation's `simulation.node` is the other executor of the same machine).

Ownership of shard p is the consumer group's assignment of partition p of
`{ns}.commands` and `{ns}.results` (the lease). The range assignor gives partition
p of both topics to the same member because both have the shard count of
partitions (checked at start); we use it explicitly, since aiokafka's default,
round robin, would split them.

The loop::

    tick(mono)                       start builds that are due (each step a task)
    getmany(timeout = machine.wake_in_ms)
    feed(records) per shard          records of a shard not live are read again later
    turn(local, mono) -> Writes      one transaction per shard, in parallel
    write_done / write_failed        the machine decides what a failure means

Build steps (fence, probe, restore, position) run as tasks beside the loop, so a
shard being restored never delays the turns of the live ones nor a revocation;
restores share one consumer and take turns. The rebalance listener and the turns
take one lock, so a revocation lands between two turns, never inside one (a turn
is bounded: one batch, bounded fires, a commit timeout).

Garbage collection: a shard's state is hundreds of thousands of long-lived
objects (schedules, definitions, timers). CPython's young-generation collections
trigger every 700 allocations and each full collection walks all of them; firing
allocates many short-lived objects, so the collector halved `advance`'s throughput
(measured by the shard core's bench). After every restore the process therefore
calls ``gc.freeze()`` (the restored state moves to the permanent generation: never
scanned, still freed by reference counting when a schedule goes) and it runs with
a young-generation threshold of `actors.collector.YOUNG_THRESHOLD`. The cost: a reference cycle
among frozen objects is never collected until the heap is unfrozen, which a
dropped shard's state needs (`_collect_dropped_soon`).

Every client close is bounded (`topics.closing`): a broker that never answers a
request cannot hang a shutdown, a rebuild or a revocation.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.consumer.fetcher import ConsumerRecord
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.structs import OffsetAndMetadata

from actors.collector import YOUNG_THRESHOLD
from actors.monotonic import monotonic_ms
from actors.observe import metrics
from actors.scheduler.breather import Breather
from actors.scheduler.calendar_follower import (
    CalendarFollower,
    CalendarLearner,
    read_failure,
)
from actors.scheduler.clock import Clock, SystemClock
from actors.scheduler.lifecycle import (
    MAX_SLEEP_MS,
    Action,
    CatchUp,
    Close,
    Fence,
    Note,
    Pause,
    Phase,
    Position,
    Probe,
    Restore,
    SchedulerMachine,
    Tail,
    Untail,
    Write,
)
from actors.scheduler.limits import topic_limits
from actors.scheduler.restore import make_restore_consumer, read_to_end
from actors.scheduler.shard_runner import ShardFenced, ShardRunner, ShardWriteFailed
from actors.scheduler.skew import DEFAULT_BOUND_MS
from actors.scheduler.standby import StandbyTailer
from actors.scheduler.target_table import INF, TargetTable, refused_target
from actors.scheduler.target_table import REFRESH_S as TARGETS_REFRESH_S
from actors.scheduler.warm import WarmShard
from actors.scheduler.writer import Partitioner, TargetDest, shard_partitioner
from topics.clients import admin_kwargs, consumer_kwargs
from topics.closing import bounded, within
from topics.committed import CommittedUnknown, fetch_committed
from topics.names import Settings, TopicKind
from topics.records import InRecord
from topics.refusals import denied_in

log = logging.getLogger("kafkron.scheduler")

Batch = dict[TopicPartition, list[ConsumerRecord[Any, Any]]]
# (partition, partitions, now_ms) -> a fresh core
CoreFactory = Callable[[int, int, int], Any]

# Fencing, probing, restoring or positioning one shard; beyond this the broker is unwell.
BUILD_TIMEOUT_S = 120.0
COMMITTED_RETRY_S, COMMITTED_RETRY_MAX_S = 0.5, 5.0  # a silent group coordinator
CLOSE_S = 10.0  # the shard tasks, then each client's close (those at once), at a stop
# Records fed to a core between two chances for the event loop to breathe.
FEED_CHUNK = 256
Step = Fence | Probe | Restore | CatchUp | Position
# How long a standby's fetch waits at the end of its changelogs.
STANDBY_POLL_MS = 500
_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


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
    ``target_ack_timeout_s``: a Kafka target's batch not acknowledged by then, while the
    rest of its transaction was, refuses its topic (`actors.scheduler.target_acks`);
    None (the default): no such deadline, the commit timeout alone.
    ``max_standbys``: shards not owned this process keeps warm (tails their changelog),
    so that taking one over is a catch-up, not a restore; each holds its shard's state.
    """

    session_timeout_ms: int = 10_000
    heartbeat_ms: int = 3_000
    max_batch: int = 5_000
    max_fires_per_turn: int = 5_000
    skew_bound_ms: int = DEFAULT_BOUND_MS
    figures_interval_s: float = 30.0
    commit_timeout_s: float = 15.0
    target_ack_timeout_s: float | None = None
    max_standbys: int = 0
    target_topics: tuple[str, ...] = ()
    """The Kafka target topics this namespace allows (`actors.scheduler.target_table`)."""


def collect_frozen_garbage() -> None:
    """Collect what became garbage among frozen objects; freeze what is alive again."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def default_core_factory(settings: Settings) -> CoreFactory:
    from actors.shard import ShardCore

    def make(partition: int, partitions: int, now_ms: int) -> ShardCore:
        return ShardCore(
            partition=partition,
            partitions=partitions,
            now_ms=now_ms,
            namespace=settings.namespace,
            # A live shard's turn comes at least this often (`SchedulerMachine.wake_in_ms`):
            # a longer silence is a stall (a frozen process), even with no timer due in it.
            advance_every_ms=MAX_SLEEP_MS,
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
            log.exception("revoking shards failed")

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        try:
            await self._runtime._on_assigned(set(assigned))
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
        mono: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.settings = settings
        self.options = options or RuntimeOptions()
        self.clock: Clock = clock or SystemClock()
        self._mono = mono
        self._core_factory = core_factory
        self._kinds = {
            settings.topic(TopicKind.COMMANDS): TopicKind.COMMANDS,
            settings.topic(TopicKind.RESULTS): TopicKind.RESULTS,
        }
        self.machine = SchedulerMachine(
            session_timeout_ms=self.options.session_timeout_ms,
            max_fires_per_turn=self.options.max_fires_per_turn,
            skew_bound_ms=self.options.skew_bound_ms,
            runs_topic=settings.topic(TopicKind.RUNS),
            max_standbys=self.options.max_standbys,
        )
        self._warm: dict[int, WarmShard] = {}  # standbys, fed by the tailer
        self._tailer: StandbyTailer | None = None
        self._calendars: CalendarFollower | None = None  # {ns}.calendars, for every core
        self._warm_logged: set[int] = set()  # standbys whose first catch-up was logged
        self._lock = asyncio.Lock()  # turns and rebalances, one at a time
        self._restore_lock = asyncio.Lock()  # restores share one consumer
        self._runners: dict[int, ShardRunner] = {}
        self._collect_pending = False  # a collection of dropped shards is scheduled
        self._tasks: set[asyncio.Task[Any]] = set()
        self._partitions = 0
        self._limits: dict[TopicKind | TargetDest, int] | None = None
        self._targets = TargetTable(settings.namespace, self.options.target_topics)
        self._targets_due_s = 0.0  # when the target topics are read again
        self._marks_end_s = INF  # when a refusal mark in the cores' view ends
        self._partitioner: Partitioner | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._restore_consumer: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None  # reads the group's committed offsets
        self.started = asyncio.Event()
        self._stopping = asyncio.Event()

    # -- the process -------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set, then finish the turn, close every shard, leave."""
        from topics.admin import shard_count  # the foundation's check of the contract

        self._stopping = stop
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, older, oldest)

        self._partitions = await shard_count(self.settings)
        self.machine.shard_count = self._partitions
        await self._refresh_limits()
        await self._refresh_targets()
        if self._core_factory is None:
            self._core_factory = default_core_factory(self.settings)
        consumer = AIOKafkaConsumer(
            **consumer_kwargs(
                self.settings,
                f"{self.settings.namespace}-scheduler",
                self.settings.scheduler_group,
            ),
            partition_assignment_strategy=(RangePartitionAssignor,),
            session_timeout_ms=self.options.session_timeout_ms,
            heartbeat_interval_ms=self.options.heartbeat_ms,
            rebalance_timeout_ms=max(self.options.session_timeout_ms, 30_000),
        )
        restore_consumer = make_restore_consumer(
            self.settings.bootstrap, f"{self.settings.namespace}-scheduler-restore"
        )
        admin = AIOKafkaAdminClient(
            **admin_kwargs(self.settings, f"{self.settings.namespace}-scheduler-offsets")
        )
        self._consumer, self._restore_consumer, self._admin = consumer, restore_consumer, admin
        await restore_consumer.start()
        await admin.start()
        calendar_consumer = make_restore_consumer(
            self.settings.bootstrap,
            f"{self.settings.namespace}-scheduler-calendars",
            fetch_max_wait_ms=STANDBY_POLL_MS,
        )
        await calendar_consumer.start()
        self._calendars = CalendarFollower(
            calendar_consumer, self.settings.topic(TopicKind.CALENDARS), self.clock.now_ms
        )
        following = asyncio.ensure_future(self._follow_calendars(stop))
        standby_consumer, tailing = None, None
        if self.options.max_standbys:
            standby_consumer = make_restore_consumer(
                self.settings.bootstrap,
                f"{self.settings.namespace}-scheduler-standby",
                fetch_max_wait_ms=STANDBY_POLL_MS,
            )
            await standby_consumer.start()
            self._tailer = StandbyTailer(
                standby_consumer,
                self.settings.topic(TopicKind.SCHEDULES),
                self._mono,
                on_reached=self._standby_reached,
            )
            tailing = asyncio.ensure_future(self._tail(stop))
        try:
            counts = await self._partition_counts()
            self._partitioner = shard_partitioner(self.settings, counts)
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
            log.info("scheduler stopping: closing %d shard(s)", len(self._runners))
            async with self._lock:
                # No transaction is open between turns; closing is stopping producers.
                self._execute(self.machine.leave())
            if tailing is not None:  # ends with ``stop``; not when the loop failed
                tailing.cancel()
            following.cancel()
            # The shard tasks first (bounded): a fence still in flight must land before
            # the group moves the shard on, or it would fence the next owner's producer.
            if self._tasks:
                gathered = asyncio.gather(*self._tasks, return_exceptions=True)
                await bounded(gathered, "shard tasks", CLOSE_S)
            # Then the rest at once, each bounded: the stop lasts as long as the slowest
            # close, not their sum (which outlasted a supervisor's patience after a
            # broker lost its disk).
            closes = [
                bounded(consumer.stop(), "leaving the scheduler group", CLOSE_S),
                bounded(restore_consumer.stop(), "stopping the restore consumer", CLOSE_S),
                bounded(admin.close(), "closing the admin client", CLOSE_S),
                bounded(calendar_consumer.stop(), "stopping the calendars consumer", CLOSE_S),
            ]
            if tailing is not None:
                closes.append(bounded(tailing, "stopping the standby tailing", CLOSE_S))
            if standby_consumer is not None:
                closes.append(
                    bounded(standby_consumer.stop(), "stopping the standby consumer", CLOSE_S)
                )
            await asyncio.gather(*closes)
            log.info("scheduler stopped")

    async def _follow_calendars(self, stop: asyncio.Event) -> None:
        """Keep reading ``{ns}.calendars`` (errors only delay it: a turn tells the
        cores what was read, and a restore waits for the end)."""
        follower = self._calendars
        assert follower is not None
        while not stop.is_set():
            try:
                await follower.run_once(STANDBY_POLL_MS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                why = read_failure(exc, self.settings.namespace)
                log.warning(
                    "reading the calendars failed (%s); schedules naming a calendar wait "
                    "for a fresh read; trying again",
                    why,
                )
                await asyncio.sleep(STANDBY_POLL_MS / 1000)
            await asyncio.sleep(0)

    async def _tail(self, stop: asyncio.Event) -> None:
        """Keep the standbys fed until the process stops (errors only delay them: a
        standby not caught up recently is restored in full at a takeover)."""
        tailer = self._tailer
        assert tailer is not None
        while not stop.is_set():
            try:
                await tailer.run_once(STANDBY_POLL_MS)
            except Exception as exc:
                log.warning("standby tailing failed (%s); trying again", exc)
                await asyncio.sleep(STANDBY_POLL_MS / 1000)
            await asyncio.sleep(0)

    async def _partition_counts(self) -> dict[TopicKind, int]:
        from topics.admin import admin_client, describe_topics

        counts: dict[TopicKind, int] = {}
        names = {self.settings.topic(kind): kind for kind in TopicKind}
        async with admin_client(self.settings) as admin:
            for topic in await describe_topics(admin, list(names)):
                if topic["error_code"] == 0 and topic["partitions"]:
                    counts[names[topic["topic"]]] = len(topic["partitions"])
        missing = sorted(name for name, kind in names.items() if kind not in counts)
        if missing:
            raise RuntimeError(f"topics {missing} are missing; run `kafkron topics create` first")
        return counts

    async def _refresh_limits(self) -> None:
        try:
            limits = await topic_limits(self.settings)
        except Exception as exc:  # keep what we knew; the next refusal asks again
            log.warning("could not read the topics' max.message.bytes: %s", exc)
            return
        if self._limits is None:
            self._limits = {}
        for kind, limit in limits.items():  # in place: the shards' runners hold this dict
            self._limits[kind] = limit
        if TopicKind.RATELIMITS in limits:  # its batches are planned as a target's
            ratelimits = TargetDest(self.settings.topic(TopicKind.RATELIMITS))
            self._limits[ratelimits] = limits[TopicKind.RATELIMITS]
        self.machine.runs_limit_bytes = limits[TopicKind.RUNS]

    async def _refresh_targets(self) -> None:
        """Read the allowed target topics again and hand every core the new view."""
        self._targets_due_s = time.monotonic() + TARGETS_REFRESH_S
        try:
            await self._targets.refresh(self.settings)
        except Exception as exc:  # keep what we knew; the next refresh asks again
            log.warning("could not read the target topics: %s", exc)
        if self._limits is None:
            self._limits = {}
        for name, topic in self._targets.known.items():
            if topic.max_message_bytes is not None:
                self._limits[TargetDest(name)] = topic.max_message_bytes
        self._hand_targets()

    def _hand_targets(self) -> None:
        mono_s = time.monotonic()
        # On the shards' clock (held back by the skew guard), which their timers use.
        snapshot = self._targets.snapshot(mono_s, self.machine.now_ms(self.clock.now_ms()))
        self._marks_end_s = self._targets.next_end_s(mono_s)
        # Every core the machine holds, not only the live ones: a shard positioning or
        # parked goes live with this view, not one from before a refusal.
        for slot in self.machine.slots.values():
            if slot.core is not None:
                slot.core.set_target_topics(snapshot)
        for warm in self._warm.values():
            warm.core.set_target_topics(snapshot)

    async def _loop(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        next_figures = time.monotonic() + self.options.figures_interval_s
        max_records = self.options.max_batch
        machine = self.machine
        while not stop.is_set():
            if time.monotonic() >= self._targets_due_s:  # targets and queue topics
                self._targets_due_s = time.monotonic() + TARGETS_REFRESH_S
                self._spawn(self._refresh_targets())
            if time.monotonic() >= self._marks_end_s:  # a refusal ended: say so, now
                self._hand_targets()
            async with self._lock:
                self._execute(machine.tick(self._mono()))
            timeout_ms = machine.wake_in_ms(self.clock.now_ms(), self._mono())
            batch = await consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
            async with self._lock:
                await self._turn(consumer, batch)
            if self.options.figures_interval_s > 0 and time.monotonic() >= next_figures:
                next_figures = time.monotonic() + self.options.figures_interval_s
                self._log_figures()

    # -- one turn ----------------------------------------------------------------

    async def _turn(self, consumer: AIOKafkaConsumer, batch: Batch) -> None:
        machine = self.machine
        self._execute(machine.begin_turn(self.clock.now_ms(), self._mono()))
        now_ms = machine.now_ms(self.clock.now_ms())
        breather = Breather()
        for tp, records in batch.items():
            kind = self._kinds[tp.topic]
            for start in range(0, len(records), FEED_CHUNK):
                chunk = [
                    InRecord(kind, r.partition, r.offset, r.key, r.value, r.timestamp)
                    for r in records[start : start + FEED_CHUNK]
                ]
                if not machine.feed(tp.partition, kind, chunk, now_ms):
                    # Not live (yet, or any more): read these again once it is.
                    if tp.partition in machine.assigned:
                        consumer.seek(tp, chunk[0].offset)
                        consumer.pause(tp)
                    break
                await breather.maybe()
        calendars = self._calendars
        if calendars is not None:  # edits re-arm before this turn fires; how fresh they are
            for slot in machine.slots.values():
                if isinstance(slot.core, CalendarLearner):
                    calendars.tell(slot.core, now_ms)
        actions = machine.turn(self.clock.now_ms(), self._mono())
        writes = [a for a in actions if isinstance(a, Write)]
        self._execute([a for a in actions if not isinstance(a, Write)])
        if not writes:
            return
        outcomes = await asyncio.gather(*(self._write(w) for w in writes), return_exceptions=True)
        refused_seen = False
        for write, outcome in zip(writes, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                fenced = isinstance(outcome, ShardFenced)
                if fenced:
                    metrics.shard_fenced(write.partition)
                else:
                    metrics.shard_transaction_failed(write.partition)
                refused_seen |= isinstance(outcome, ShardWriteFailed) and "refused" in str(outcome)
                target = refused_target(outcome, self.settings.namespace)
                if target is not None:  # before the rebuild: its re-fire must see it
                    self._targets.refuse(target[0], target[1], time.monotonic())
                    self._hand_targets()
                self._execute(
                    machine.write_failed(
                        write.partition,
                        write.token,
                        fenced=fenced,
                        error=str(outcome),
                        mono_ms=self._mono(),
                        denied=denied_in(outcome, self.settings.namespace),
                    )
                )
            else:
                if self._targets.strikes:
                    runner = self._runners.get(write.partition)
                    if runner is not None:
                        self._targets.delivered(runner.last_targets)
                self._execute(machine.write_done(write.partition, write.token, outcome))
        if refused_seen:
            # A topic may have been changed under us: learn its limits before rebuilding.
            self._spawn(self._refresh_limits())
        if any(isinstance(o, BaseException) for o in outcomes):
            self._spawn(self._refresh_targets())  # a target or queue topic may have gone

    async def _write(self, write: Write) -> Any:
        runner = self._runners.get(write.partition)
        if runner is None or runner.token != write.token:
            raise ShardWriteFailed(f"shard {write.partition} has no producer")
        tps = {TopicKind.COMMANDS: runner.commands_tp, TopicKind.RESULTS: runner.results_tp}
        offsets = {tps[kind]: offset for kind, offset in write.offsets.items()}
        return await runner.write(write.records, offsets)

    # -- carrying out the machine's actions ----------------------------------------

    def _execute(self, actions: Iterable[Action]) -> None:
        consumer = self._consumer
        for action in actions:
            if isinstance(action, Pause):
                if consumer is not None:
                    assigned = consumer.assignment()
                    tps = [tp for tp in self._shard_tps(action.partition) if tp in assigned]
                    if tps:
                        consumer.pause(*tps)
            elif isinstance(action, Note):
                log.log(_LEVELS.get(action.level, logging.INFO), "%s", action.text)
            elif isinstance(action, Close):
                runner = self._runners.get(action.partition)
                if runner is not None and runner.token == action.token:
                    del self._runners[action.partition]
                    self._spawn(runner.close())
                    log.info("shard %d dropped (%s)", action.partition, action.why)
                    self._collect_dropped_soon()
            elif isinstance(action, Fence | Probe | Restore | CatchUp | Position):
                self._spawn(self._step(action))
            elif isinstance(action, Tail | Untail):
                self._retail(action)
            else:
                raise AssertionError(f"unexpected action outside a turn: {action!r}")

    async def _step(self, action: Step) -> None:
        p, token = action.partition, action.token
        machine = self.machine
        try:
            event = await within(self._do_step(action), BUILD_TIMEOUT_S)  # abandoned past it
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            denied = denied_in(exc, self.settings.namespace)
            async with self._lock:
                if isinstance(action, Probe) and action.refresh:
                    events = machine.write_failed(
                        p,
                        token,
                        fenced=isinstance(exc, ShardFenced),
                        error=error,
                        mono_ms=self._mono(),
                        denied=denied,
                    )
                else:
                    events = machine.step_failed(
                        p,
                        token,
                        fenced=isinstance(exc, ShardFenced),
                        error=error,
                        mono_ms=self._mono(),
                        denied=denied,
                    )
                self._execute(events)
            return
        async with self._lock:
            self._execute(event())

    async def _do_step(self, action: Step) -> Callable[[], list[Action]]:
        """Carry out one build step; returns the event to feed the machine (under the lock)."""
        p, token = action.partition, action.token
        machine = self.machine
        if isinstance(action, Fence):
            runner = self._new_runner(p, token)
            previous = self._runners.get(p)
            if previous is not None:
                self._spawn(previous.close())
            self._runners[p] = runner
            await runner.fence()
            if self._runners.get(p) is not runner:
                # Closed while InitProducerId was out (a revocation): the producer that
                # just started belongs to nobody; stop it rather than leak it.
                await runner.close()
                raise ShardWriteFailed(f"shard {p}: attempt closed while fencing")
            return lambda: machine.fence_done(p, token)
        current = self._runners.get(p)
        if current is None or current.token != token:
            raise ShardWriteFailed(f"shard {p}: no producer for this attempt")
        runner = current
        if isinstance(action, Probe):
            sample = await runner.sample_clock()
            return lambda: machine.probe_done(p, token, sample, self._mono())
        if isinstance(action, CatchUp):
            # Taken from the tailer now, before any await: from here on only the
            # catch-up feeds this core.
            warm = self._warm.pop(p, None)
            if self._tailer is not None:
                self._tailer.follow(list(self._warm.values()))
            if warm is None:
                raise ShardWriteFailed(f"shard {p}: no standby core to catch up")
            async with self._restore_lock:
                if self._runners.get(p) is not runner:
                    raise ShardWriteFailed(f"shard {p}: attempt closed before its catch-up")
                started = await self._catch_up(runner, warm)
            # Outside the lock: a shard waiting for the calendars never holds up the
            # restores of the others (the lock is the restore consumer's).
            core, unwritten = await self._finish(runner, warm.core, started)
            return lambda: machine.restore_done(p, token, core, unwritten)
        if isinstance(action, Restore):
            async with self._restore_lock:
                if self._runners.get(p) is not runner:  # closed while waiting for its turn
                    raise ShardWriteFailed(f"shard {p}: attempt closed before its restore")
                core, started = await self._restore(runner)
            core, unwritten = await self._finish(runner, core, started)  # as above
            return lambda: machine.restore_done(p, token, core, unwritten)
        consumer, admin = self._consumer, self._admin
        assert consumer is not None and admin is not None
        # Positions from the committed offsets, read *after* the fence settled the
        # previous owner's transaction: nothing can be committed behind them any more.
        # Not consumer.committed(): it answers None, as for nothing committed, when
        # the group coordinator is loading or moved (topics.committed).
        committed = await self._committed(admin, p)
        positions = {tp: None if found is None else found.offset for tp, found in committed.items()}

        def positioned() -> list[Action]:
            events = machine.position_done(p, token)
            slot = machine.slots.get(p)
            if slot is not None and slot.token == token and slot.phase is Phase.LIVE:
                for tp, committed in positions.items():
                    # Offset 0 when nothing was committed: if retention removed it, the
                    # consumer's auto_offset_reset=earliest moves to the first offset kept.
                    consumer.seek(tp, 0 if committed is None else committed)
                consumer.resume(*positions)
            return events

        return positioned

    async def _committed(
        self, admin: AIOKafkaAdminClient, p: int
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Shard p's committed offsets, asking again while the coordinator is silent.

        Retried here, not by failing the step: a failed step drops the shard and
        restores it again, for as long as the coordinator loads (a minute after a
        broker lost its disk). The step's own timeout bounds the retries.
        """
        delay_s = COMMITTED_RETRY_S
        while True:
            try:
                return await fetch_committed(
                    admin, self.settings.scheduler_group, self._shard_tps(p)
                )
            except CommittedUnknown as exc:
                log.warning("shard %d: %s in %.1f s", p, exc, delay_s)
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, COMMITTED_RETRY_MAX_S)

    def _collect_dropped_soon(self) -> None:
        """Free a dropped shard's state, once this turn has let go of it.

        Restores freeze the heap (``gc.freeze``), and frozen reference cycles (the
        wheel's rings, a run and its schedule) are never collected: each dropped
        shard stayed in memory, a few MB per 20k schedules, at every rebalance or
        rebuild. One full collection of the unfrozen heap frees it; what is alive is
        frozen again. A pause, but at a drop, which is rare, not at a fire.
        """
        if self._collect_pending:
            return
        self._collect_pending = True

        def collect() -> None:
            self._collect_pending = False
            collect_frozen_garbage()

        asyncio.get_running_loop().call_soon(collect)

    async def _restore(self, runner: ShardRunner) -> tuple[Any, float]:
        """Rebuild the core from the changelog; only after the fence, so the end is final.
        Returns the core and when the restore started (`_finish` completes it)."""
        assert self._restore_consumer is not None and self._core_factory is not None
        started = time.monotonic()
        now = self.machine.now_ms
        core = self._core_factory(runner.partition, self._partitions, now(self.clock.now_ms()))
        core.set_target_topics(self._targets.snapshot(time.monotonic(), self.clock.now_ms()))
        tp = TopicPartition(self.settings.topic(TopicKind.SCHEDULES), runner.partition)
        result = await read_to_end(self._restore_consumer, tp, core.restore)
        runner.restored_records = result.records
        runner.restored_keys = result.keys
        return core, started

    async def _finish(
        self, runner: ShardRunner, core: Any, started: float
    ) -> tuple[Any, list[Any]]:
        """The calendars (§5.7), then ``finish_restore``: a restored or caught-up core
        made live."""
        await self._tell_calendars(runner.partition, core)
        unwritten = list(core.finish_restore(self.machine.now_ms(self.clock.now_ms())))
        gc.freeze()  # the restored state is long-lived: keep it out of every collection
        runner.restore_ms = (time.monotonic() - started) * 1000.0
        log.info(
            "shard %d: %s in %.0f ms",
            runner.partition,
            runner.restore_text
            or f"{runner.restored_records} changelog records"
            f" ({runner.restored_keys} schedule ids) restored",
            runner.restore_ms,
        )
        return core, unwritten

    async def _tell_calendars(self, partition: int, core: Any) -> None:
        """Before ``finish_restore``: the calendars to the topic's end (read after the
        fence), so nothing that names one is armed before it is known (§5.7). A shard
        whose restored schedules name no calendar does not wait for the follower (a
        refused or lagging one must not keep it from firing): it is told what was read
        so far, and a schedule upserted later that names one is held by the freshness
        rule like any other. One whose schedules name one waits a few seconds at most
        (`tell_for_restore`), then goes live the same way: its calendar-naming
        schedules held by freshness, its plain ones firing."""
        calendars = self._calendars
        assert calendars is not None
        now_ms = self.machine.now_ms(self.clock.now_ms())
        if not core.restored_names_calendars():
            calendars.tell(core, now_ms)
            return
        failure = await calendars.tell_for_restore(core, now_ms)
        if failure is not None:
            log.warning(
                "shard %d: the calendars could not be read to their end (%s): live anyway,"
                " its schedules naming a calendar held until they are (fresh as of %d)",
                partition,
                read_failure(failure, self.settings.namespace),
                calendars.fresh_ms,
            )

    async def _catch_up(self, runner: ShardRunner, warm: WarmShard) -> float:
        """Feed a standby's core from its position to the end (after the fence: final).
        Returns when it started (`_finish` completes it)."""
        assert self._restore_consumer is not None
        started = time.monotonic()
        tp = TopicPartition(self.settings.topic(TopicKind.SCHEDULES), runner.partition)
        from_offset = warm.position
        result = await read_to_end(
            self._restore_consumer, tp, warm.core.restore, start_offset=from_offset
        )
        runner.restored_records = result.records
        runner.restored_keys = result.keys
        runner.restore_text = (
            f"taken over from its standby, {result.records} changelog records from offset "
            f"{from_offset} caught up"
        )
        return started

    def _standby_reached(self, p: int) -> None:
        self._execute(self.machine.standby_caught_up(p, self._mono()))
        warm = self._warm.get(p)
        if warm is not None and p not in self._warm_logged:
            self._warm_logged.add(p)
            log.info("standby of shard %d caught up (changelog offset %d)", p, warm.position)

    def _retail(self, action: Tail | Untail) -> None:
        """Start or forget one standby; the tailer follows the new set at once."""
        p = action.partition
        if isinstance(action, Tail):
            assert self._core_factory is not None
            now_ms = self.machine.now_ms(self.clock.now_ms())
            warm_core = self._core_factory(p, self._partitions, now_ms)
            warm_core.set_target_topics(
                self._targets.snapshot(time.monotonic(), self.clock.now_ms())
            )
            self._warm[p] = WarmShard(p, warm_core)
            self._warm_logged.discard(p)
        elif self._warm.pop(p, None) is None:
            return
        if self._tailer is not None:
            self._tailer.follow(list(self._warm.values()))

    def _new_runner(self, p: int, token: int) -> ShardRunner:
        assert self._partitioner is not None
        return ShardRunner(
            partition=p,
            token=token,
            settings=self.settings,
            clock=self.clock,
            partitioner=self._partitioner,
            commit_timeout_s=self.options.commit_timeout_s,
            limits=self._limits,
            mono=self._mono,
            target_ack_timeout_s=self.options.target_ack_timeout_s,
        )

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- rebalances ----------------------------------------------------------------

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        by_partition: dict[int, set[str]] = {}
        for tp in assigned:
            by_partition.setdefault(tp.partition, set()).add(tp.topic)
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
        consumer = self._consumer
        if assigned and consumer is not None:
            consumer.pause(*assigned)  # nothing is read for p before its shard is live
        async with self._lock:
            self._execute(self.machine.assign(owned, self._mono()))

    async def _on_revoked(self, revoked: set[int]) -> None:
        async with self._lock:
            self._execute(self.machine.revoke(revoked))

    def _shard_tps(self, p: int) -> tuple[TopicPartition, ...]:
        return tuple(TopicPartition(topic, p) for topic in self._kinds)

    # -- figures -----------------------------------------------------------------

    def cores(self) -> dict[int, Any]:
        """The live shards' cores (for in-process readers such as the metrics)."""
        return dict(self.machine.live())

    def figures(self) -> dict[str, Any]:
        """In-process figures: per shard and for the process (skew)."""
        shards: dict[int, dict[str, Any]] = {}
        for p, slot in sorted(self.machine.slots.items()):
            if slot.phase is not Phase.LIVE or slot.core is None:
                continue
            runner = self._runners.get(p)
            figures = {} if runner is None else runner.figures()
            figures.update(slot.core.stats)
            shards[p] = figures
        waiting = sorted(p for p, s in self.machine.slots.items() if s.phase is Phase.WAITING)
        calendars = {} if self._calendars is None else self._calendars.figures()
        return {
            "shards": shards,
            "waiting": waiting,
            **self.machine.skew.figures(),
            **calendars,
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
