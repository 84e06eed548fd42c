"""A simulated scheduler process: the second executor of the scheduler's lifecycle machine.

Every decision of this process (which shards it holds, when it fences, probes,
restores, fires and writes, what a fence or a failed transaction means, the
clock-skew holdback, bounded turns, parking and resuming shards across a
rebalance) is made by `actors.scheduler.lifecycle.SchedulerMachine`, the same
machine `actors.scheduler.runtime` executes on aiokafka, around the REAL
`actors.shard.ShardCore`. This module only carries the machine's actions out on
the simulated Kafka and reports back:

- ``Fence``: ``init_transactions`` of ``{ns}-shard-{p}`` (fences every earlier
  owner, aborts its open transaction); the epoch is the attempt's producer;
- ``Probe``: one record to runs in a transaction that is aborted; the broker's
  append time is the sample (none if the topic is not LogAppendTime);
- ``Restore``: ``schedules[p]`` read_committed, the latest record per key (as
  `actors.scheduler.restore`), into a fresh core, then ``finish_restore``;
- ``Tail``/``Untail``: keep a standby, a core fed ``schedules[p]`` read_committed
  at the start of every turn (reporting ``standby_caught_up``), or forget it;
- ``CatchUp``: the standby's core fed from its position to the end (after the
  fence, so final), then ``finish_restore``: the takeover without a restore;
- ``Position``: the committed offsets of ``commands[p]``/``results[p]``;
- ``Write``: one transaction per shard holding its records and consumed offsets,
  committed a drawn round trip later. A process paused in between commits when it
  resumes (a zombie, fenced if someone took over); a crashed one never does (the
  next owner's ``init_transactions`` or the broker's timeout aborts it).

Build steps run at once here (the world's clock does not move during them);
their order and their failures are the machine's, as in production. Group
membership is polled each turn: a new generation is a revocation of every shard
followed by the new assignment (eager rebalancing), which parks live shards and
resumes the ones given back without a restore.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.scheduler.lifecycle import (
    INPUTS,
    Action,
    CatchUp,
    ClockSample,
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
from actors.scheduler.probe import CLOCK_PROBE_KEY, CLOCK_PROBE_VALUE
from actors.scheduler.skew import SkewEstimator
from actors.scheduler.warm import WarmShard
from actors.shard import ShardCore
from simulation.clock import NodeClock
from simulation.forgetful import REARM_FROM_NOW_VARIANT, as_restored
from simulation.host import Host, exact_bytes
from simulation.kafka import BrokerUnavailable, ProducerFenced, Txn
from simulation.targets import send_target
from topics.messages import is_cancel, parse_run, result_value
from topics.names import TopicKind
from topics.records import InRecord, OutRecord, TargetRecord
from topics.targets import TargetTopics
from topics.vocabulary import RunStatus

LATE_MS = 1_000  # a fire further than this from its instant is narrated as "late"
MAX_BATCH = 5_000
MAX_FIRES_PER_TURN = 5_000  # the runtime's default (RuntimeOptions.max_fires_per_turn)
UNAVAILABLE_RETRY_MS = 1_000


@dataclass(slots=True)
class _Producer:
    """The simulated producer of one build attempt: its epoch, its consumer positions."""

    token: int
    epoch: int
    positions: dict[TopicKind, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Pending:
    """A turn's transactions, sent and waiting for their commit round trip."""

    txns: dict[int, tuple[Txn, Write]]
    sent_local_ms: int
    sent_mono_ms: int
    runs_append_ms: int | None


class SchedulerNode:
    role = "scheduler"

    def __init__(
        self,
        host: Host,
        name: str,
        clock: NodeClock,
        session_timeout_ms: int,
        *,
        max_fires_per_turn: int = MAX_FIRES_PER_TURN,
        max_standbys: int = 0,
        targets: TargetTopics | None = None,
    ) -> None:
        self.host = host
        # The Kafka target topics every core is handed (as `TargetTable.snapshot` in
        # the runtime): constant here, the world's topics neither come nor go.
        self.targets = targets or TargetTopics(own_prefix=f"{host.settings.namespace}.")
        self.max_standbys = max_standbys
        self.warm: dict[int, WarmShard] = {}  # standbys: cores tailing a changelog
        self.max_fires_per_turn = max_fires_per_turn
        self.name = name
        self.clock = clock
        self.session_timeout_ms = session_timeout_ms
        self.state = "down"  # down | up | paused
        self.incarnation = 0
        self.member_id: str | None = None
        self.generation = -1
        self.machine = self._new_machine()
        self.producers: dict[int, _Producer] = {}
        self._pending: _Pending | None = None
        self._wake_ms: int | None = None
        self._stale = False
        self._served: frozenset[int] = frozenset()

    def _new_machine(self) -> SchedulerMachine:
        return SchedulerMachine(
            session_timeout_ms=self.session_timeout_ms,
            max_fires_per_turn=self.max_fires_per_turn,
            runs_topic=self.host.settings.topic(TopicKind.RUNS),
            detect_clock_steps="no-clock-step-check" not in self.host.broken,
            shard_count=self.host.kafka.partitions[TopicKind.COMMANDS],
            max_standbys=self.max_standbys,
        )

    @property
    def skew(self) -> SkewEstimator:
        """The process's clock-skew estimate (the machine's; checkers read it)."""
        return self.machine.skew

    # -- process lifecycle (driven by faults) --------------------------------------

    def start(self) -> None:
        if self.state != "down":
            return  # already running (a restart fault ending after a scripted start)
        now = self.host.time.true_ms
        self.state = "up"
        self.incarnation += 1
        self.machine = self._new_machine()
        self.producers, self.warm = {}, {}
        self._stale = False
        self._pending, self._wake_ms = None, None
        self.member_id = self.host.scheduler_group.join(self.name)
        self.generation = -1
        self._log(now, "start", f"process started, joined the scheduler group as {self.member_id}")
        self.wake(now)

    def crash(self) -> None:
        now = self.host.time.true_ms
        if self.member_id is not None:
            self.host.scheduler_group.silent(self.member_id, now)
        lost = self.held()
        self.state = "down"
        self.incarnation += 1
        self.machine = self._new_machine()
        self.producers, self._pending, self.warm = {}, None, {}
        self._log(now, "crash", f"process died holding shards {lost}; its memory is gone")
        self._track()

    def pause(self) -> None:
        if self.state != "up":
            return
        now = self.host.time.true_ms
        if self.member_id is not None:
            self.host.scheduler_group.silent(self.member_id, now)
        self.state = "paused"
        self._log(now, "pause", f"process frozen holding shards {self.held()}")
        self._track()

    def resume(self) -> None:
        if self.state != "paused":
            return  # it died while frozen: nothing to thaw
        now = self.host.time.true_ms
        self.state = "up"
        self._stale = True
        self._log(now, "resume", "process thawed; it does not know what happened meanwhile")
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._finish(pending)  # the commit it was waiting for completes now
        else:
            self.wake(now)

    def held(self) -> list[int]:
        """The partitions this process works on right now, as it believes."""
        return sorted(self.machine.live())

    def consumes(self, kind: TopicKind, partition: int) -> bool:
        # Every scheduler follows {ns}.calendars, whatever it owns: an edit wakes it
        # (the runtime turns at least every second and tells each core what its
        # follower read; without this a shard whose schedules all wait for a
        # calendar slept until something else woke its node).
        return kind is TopicKind.CALENDARS or (kind in INPUTS and partition in self.machine.live())

    # -- the loop ----------------------------------------------------------------------

    def wake(self, true_ms: int) -> None:
        if self.state != "up" or (self._wake_ms is not None and self._wake_ms <= true_ms):
            return
        self._wake_ms = true_ms
        incarnation = self.incarnation
        self.host.at(true_ms, lambda: self._woken(incarnation, true_ms))

    def _woken(self, incarnation: int, true_ms: int) -> None:
        if incarnation != self.incarnation or self._wake_ms != true_ms:
            return
        self._wake_ms = None
        if self.state == "up" and self._pending is None:
            self.turn()

    def now_ms(self) -> int:
        return self.machine.now_ms(self.clock.now_ms())

    def turn(self) -> None:
        host = self.host
        true_ms = host.time.true_ms
        kafka = host.kafka
        if not kafka.available:
            self.wake(true_ms + UNAVAILABLE_RETRY_MS)
            return
        assert self.member_id is not None
        host.scheduler_group.heard(self.member_id)
        if self._stale:
            # Thawed: the poll it was in returns what it had, and the turn runs on the old
            # view of ownership; the group's news arrives with the next poll (aiokafka).
            self._stale = False
            self.wake(true_ms + self.host.latency_ms())
        else:
            self._sync_membership(true_ms)
        machine = self.machine
        self._tail()
        self._execute(machine.tick(self.clock.mono_ms()))
        self._execute(machine.begin_turn(self.clock.now_ms(), self.clock.mono_ms()))
        now_ms = self.now_ms()
        for p in sorted(machine.live()):
            producer = self.producers.get(p)
            if producer is None:
                continue
            for kind in INPUTS:
                position = producer.positions[kind]
                batch, next_position = kafka.fetch(kind, p, position, MAX_BATCH)
                if machine.feed(p, kind, batch, now_ms):
                    producer.positions[kind] = next_position
        for slot in machine.slots.values():  # as the runtime: edits re-arm before firing
            if isinstance(slot.core, ShardCore):
                self._tell_calendars(slot.core)
        actions = machine.turn(self.clock.now_ms(), self.clock.mono_ms())
        writes = [a for a in actions if isinstance(a, Write)]
        self._execute([a for a in actions if not isinstance(a, Write)])
        if "dag-early-release" in host.broken:
            for write in writes:
                core = machine.live().get(write.partition)
                if isinstance(core, ShardCore):
                    write.records.extend(
                        _release_early(core, write.partition, write.records, now_ms)
                    )
        if writes:
            self._send(writes, true_ms)
        else:
            self._schedule_next()
        self._track()

    def _tail(self) -> None:
        """Feed every standby what its changelog gained (as `StandbyTailer.run_once`)."""
        kafka = self.host.kafka
        for p, warm in sorted(self.warm.items()):
            records, end = kafka.fetch(TopicKind.SCHEDULES, p, warm.position, 1 << 62)
            for record in records:
                warm.feed(record.offset, record.key, as_restored(record.value, self.host.broken))
            warm.reached(end, self.now_ms())
            self._execute(self.machine.standby_caught_up(p, self.clock.mono_ms()))

    def _track(self) -> None:
        """Tell the world's ownership record which shards this process serves now."""
        served = frozenset(self.machine.live()) if self.state == "up" else frozenset()
        if served != self._served:
            self._served = served
            self.host.ownership.serving(self.name, set(served), self.host.time.true_ms)

    def _sync_membership(self, true_ms: int) -> None:
        group = self.host.scheduler_group
        assert self.member_id is not None
        if group.assigned(self.member_id) is None:
            self._log(
                true_ms,
                "kicked",
                "found itself out of the group (its session expired); "
                f"dropping shards {self.held()} and rejoining",
            )
            self._execute(self.machine.leave())
            self.member_id = group.join(self.name)
        if group.generation != self.generation:
            self.generation = group.generation
            assigned = group.assigned(self.member_id) or frozenset()
            held = self.held()
            if held:
                self._log(true_ms, "revoke", f"rebalance: revokes shards {held}")
            self._execute(self.machine.revoke(set(self.machine.slots)))
            self._execute(self.machine.assign(assigned, self.clock.mono_ms()))

    # -- carrying out the machine's actions ---------------------------------------------

    def _execute(self, actions: list[Action]) -> None:
        """Carry out actions; a build step's outcome is fed back at once (a worklist)."""
        work = list(actions)
        while work:
            action = work.pop(0)
            if isinstance(action, Fence | Probe | Restore | CatchUp | Position):
                work[:0] = self._step(action)
            elif isinstance(action, Tail):
                kafka = self.host.kafka
                core = ShardCore(
                    partition=action.partition,
                    partitions=kafka.partitions[TopicKind.COMMANDS],
                    now_ms=self.now_ms(),
                )
                core.set_target_topics(self.targets)  # as the runtime's `_retail`
                self.warm[action.partition] = WarmShard(action.partition, core)
            elif isinstance(action, Untail):
                self.warm.pop(action.partition, None)
            elif isinstance(action, Close):
                producer = self.producers.get(action.partition)
                if producer is not None and producer.token == action.token:
                    del self.producers[action.partition]
            elif isinstance(action, Note):
                self._log(self.host.time.true_ms, action.kind, action.text)
            elif isinstance(action, Pause):
                pass  # only live shards are fetched from here
            else:
                raise AssertionError(f"unexpected action outside a turn: {action!r}")

    def _step(self, action: Fence | Probe | Restore | CatchUp | Position) -> list[Action]:
        host, machine = self.host, self.machine
        kafka = host.kafka
        p, token = action.partition, action.token
        true_ms = host.time.true_ms
        mono_ms = self.clock.mono_ms()
        tx_id = host.settings.shard_transactional_id(p)
        try:
            if isinstance(action, Fence):
                # As the runtime's fence: an upgrade mode's other form first (topics/fencing.py).
                for other in host.settings.fenced_ids("shard", p)[1:]:
                    kafka.init_transactions(other, true_ms)
                epoch = kafka.init_transactions(tx_id, true_ms)
                self.producers[p] = _Producer(token, epoch)
                return machine.fence_done(p, token)
            producer = self.producers.get(p)
            if producer is None or producer.token != token:
                return machine.step_failed(
                    p, token, fenced=False, error="no producer for this attempt", mono_ms=mono_ms
                )
            if isinstance(action, Probe):
                return machine.probe_done(p, token, self._probe(tx_id, producer), mono_ms)
            if isinstance(action, Restore):
                core, unwritten = self._restore(p)
                return machine.restore_done(p, token, core, unwritten)
            if isinstance(action, CatchUp):
                warm = self.warm.pop(p, None)
                if warm is None:
                    return machine.step_failed(
                        p, token, fenced=False, error="no standby core", mono_ms=mono_ms
                    )
                # After the fence: the end read now is final (as `read_to_end`).
                records, _ = kafka.fetch(TopicKind.SCHEDULES, p, warm.position, 1 << 62)
                for record in records:
                    warm.feed(record.offset, record.key, as_restored(record.value, host.broken))
                core = warm.core
                self._tell_calendars(core, restoring=True)  # to the end, after the fence
                return machine.restore_done(p, token, core, core.finish_restore(self.now_ms()))
            group = host.settings.scheduler_group
            producer.positions = {kind: kafka.committed(group, kind, p)[0] for kind in INPUTS}
            return machine.position_done(p, token)
        except (ProducerFenced, BrokerUnavailable, Unauthorized) as exc:
            fenced = isinstance(exc, ProducerFenced)
            denied = str(exc) if isinstance(exc, Unauthorized) else None
            if isinstance(action, Probe) and action.refresh:
                return machine.write_failed(
                    p, token, fenced=fenced, error=str(exc), mono_ms=mono_ms, denied=denied
                )
            return machine.step_failed(
                p, token, fenced=fenced, error=str(exc), mono_ms=mono_ms, denied=denied
            )

    def _probe(self, tx_id: str, producer: _Producer) -> ClockSample | None:
        """As `ShardRunner.sample_clock`: an aborted one-record transaction to runs.

        The build is instantaneous here (as the restore is), so the acknowledgement
        comes at the send's instant, by both of the node's clocks.
        """
        kafka = self.host.kafka
        true_ms = self.host.time.true_ms
        txn = kafka.begin(tx_id, producer.epoch, true_ms)
        sent_ms, sent_mono_ms = self.clock.now_ms(), self.clock.mono_ms()
        try:
            kafka.send(txn, TopicKind.RUNS, CLOCK_PROBE_KEY, CLOCK_PROBE_VALUE, None, true_ms)
        finally:
            kafka.abort(txn, true_ms)
        if txn.denied:  # the probe's send fails as the real one does
            raise Unauthorized(_denial(TopicKind.RUNS))
        if not kafka.log_append_time(TopicKind.RUNS):
            return None
        return ClockSample(
            sent_ms, self.clock.now_ms(), true_ms, sent_mono_ms, self.clock.mono_ms()
        )

    def _restore(self, p: int) -> tuple[ShardCore, list[OutRecord]]:
        kafka = self.host.kafka
        core = ShardCore(
            partition=p,
            partitions=kafka.partitions[TopicKind.COMMANDS],
            now_ms=self.now_ms(),
        )
        core.set_target_topics(self.targets)  # before the changelog, as the runtime's restore
        latest: dict[bytes | None, bytes | None] = {}
        records, _ = kafka.fetch(TopicKind.SCHEDULES, p, 0, 1 << 62)
        for record in records:  # as restore.read_to_end: the latest record per key
            latest.pop(record.key, None)
            latest[record.key] = record.value
        for key, value in latest.items():
            if key is not None:
                core.restore(key, as_restored(value, self.host.broken))
        self._tell_calendars(core, restoring=True)  # to the end, after the fence (§5.7)
        return core, core.finish_restore(self.now_ms())

    def _tell_calendars(self, core: ShardCore, restoring: bool = False) -> None:
        """As `actors.scheduler.calendar_follower`: what ``{ns}.calendars`` holds past
        the core's cursor (here an offset), in order, with each record's timestamp;
        read to its end each turn, so the calendars are fresh as of now. The broken
        variant ``restore-rearms-calendars-from-now`` tells a restoring core no
        timestamps, so its restore re-arms from its own now, not from each edit's
        commit (an allowed instant between the two is lost)."""
        untimed = restoring and REARM_FROM_NOW_VARIANT in self.host.broken
        records, position = self.host.kafka.fetch(
            TopicKind.CALENDARS, 0, core.calendar_cursor, 1 << 62
        )
        now_ms = self.now_ms()
        for record in records:
            if record.key is not None:
                name = record.key.decode("utf-8", "replace")
                written_ms = None if untimed else record.timestamp_ms or None
                core.learn_calendar(name, record.value, now_ms, written_ms)
        core.calendar_cursor = position
        core.calendars_fresh(now_ms)

    # -- writes ------------------------------------------------------------------------

    def _send(self, writes: list[Write], true_ms: int) -> None:
        host = self.host
        kafka = host.kafka
        machine = self.machine
        txns: dict[int, tuple[Txn, Write]] = {}
        runs_append_ms: int | None = None
        outside = "changelog-outside-txn" in host.broken
        targets_outside = "target-outside-txn" in host.broken
        drop_reported = "drop-reported-results" in host.broken
        runs_topic = host.settings.topic(TopicKind.RUNS)
        mono_ms = self.clock.mono_ms()
        for write in writes:
            p = write.partition
            producer = self.producers.get(p)
            try:
                if producer is None or producer.token != write.token:
                    raise BrokerUnavailable("no producer for this attempt")
                tx_id = host.settings.shard_transactional_id(p)
                txn = kafka.begin(tx_id, producer.epoch, true_ms)
                for r in write.records:
                    kind = r.topic
                    if kind == runs_topic:  # a concurrency key's run, placed by its key
                        kind = TopicKind.RUNS
                    elif not isinstance(kind, TopicKind):  # a Kafka target's own topic
                        assert isinstance(r, TargetRecord)
                        send_target(kafka, None if targets_outside else txn, r, true_ms)
                        continue
                    if outside and kind is TopicKind.SCHEDULES:
                        kafka.append(kind, r.key, r.value, r.partition, true_ms)
                        continue
                    if drop_reported and kind is TopicKind.RESULTS and _reported(r.value):
                        continue  # an outcome lost: the audit must find the gap
                    value = None if r.value is None else exact_bytes(r.value)
                    kafka.send(txn, kind, r.key, value, r.partition, true_ms, r.timestamp_ms)
                    if kind is TopicKind.RUNS:
                        runs_append_ms = true_ms
                group = host.settings.scheduler_group
                offsets = {(kind, p): (pos, None) for kind, pos in write.offsets.items()}
                if offsets:
                    kafka.send_offsets(txn, group, offsets)
            except (ProducerFenced, BrokerUnavailable) as exc:
                fenced = isinstance(exc, ProducerFenced)
                self._execute(
                    machine.write_failed(
                        p, write.token, fenced=fenced, error=str(exc), mono_ms=mono_ms
                    )
                )
                continue
            txns[p] = (txn, write)
        if not txns:
            self._schedule_next()
            return
        pending = _Pending(txns, self.clock.now_ms(), mono_ms, runs_append_ms)
        self._pending = pending
        incarnation = self.incarnation
        host.at(true_ms + host.latency_ms(), lambda: self._committed(incarnation, pending))

    def _committed(self, incarnation: int, pending: _Pending) -> None:
        if incarnation != self.incarnation or self._pending is not pending:
            return  # crashed meanwhile: the transactions stay open until fenced or expired
        if self.state == "paused":
            return  # frozen mid-commit: resume() finishes it
        self._pending = None
        self._finish(pending)

    def _finish(self, pending: _Pending) -> None:
        host = self.host
        true_ms = host.time.true_ms
        machine = self.machine
        touched: list[tuple[TopicKind, int]] = []
        sample: list[ClockSample] = []
        if pending.runs_append_ms is not None:
            sample.append(
                ClockSample(
                    pending.sent_local_ms,
                    self.clock.now_ms(),
                    pending.runs_append_ms,
                    pending.sent_mono_ms,
                    self.clock.mono_ms(),
                )
            )
        commit_refused = "commit-refused-batch" in host.broken
        for p, (txn, write) in pending.txns.items():
            if txn.refused and not commit_refused:
                # As `ShardRunner.write`: every batch's outcome is read before the commit;
                # a refused one aborts the whole transaction (never a partial commit).
                host.kafka.abort(txn, true_ms)
                kind, partition = txn.refused[0]
                error = f"a batch to {kind.value}[{partition}] was refused"
                self._execute(
                    machine.write_failed(
                        p,
                        write.token,
                        fenced=False,
                        error=error,
                        mono_ms=self.clock.mono_ms(),
                        denied=_denial(kind) if txn.denied else None,
                    )
                )
                continue
            try:
                host.kafka.commit(txn, true_ms)
            except (ProducerFenced, BrokerUnavailable) as exc:
                fenced = isinstance(exc, ProducerFenced)
                self._execute(
                    machine.write_failed(
                        p, write.token, fenced=fenced, error=str(exc), mono_ms=self.clock.mono_ms()
                    )
                )
                continue
            touched.extend(txn.first)
            self._execute(machine.write_done(p, write.token, sample))
            sample = []  # one round trip, one sample
            self._narrate(p, write.records, true_ms)
        host.arrived(touched, true_ms)
        self._schedule_next()
        self._track()

    def _schedule_next(self) -> None:
        true_ms = self.host.time.true_ms
        machine = self.machine
        mono_ms = self.clock.mono_ms()
        due: list[int] = []
        logs = self.host.kafka.logs
        holdback_ms = machine.skew.holdback_ms()
        for p, slot in machine.slots.items():
            if slot.phase is Phase.WAITING:
                due.append(true_ms + max(0, slot.not_before_ms - mono_ms))
            elif slot.phase is Phase.LIVE and slot.core is not None:
                producer = self.producers.get(p)
                if (
                    slot.unwritten
                    or slot.out
                    or slot.held
                    or (
                        producer is not None
                        and any(logs[kind][p].has_data(producer.positions[kind]) for kind in INPUTS)
                    )
                ):
                    due.append(true_ms)
                local_due = slot.core.next_due_ms()
                if local_due is not None:
                    due.append(max(true_ms, self.clock.true_ms_at(local_due + holdback_ms)))
        if due:
            self.wake(max(true_ms, min(due)))

    # -- the story -----------------------------------------------------------------

    def _narrate(self, p: int, records: list[OutRecord], true_ms: int) -> None:
        from topics.messages import parse_dlq, parse_result

        for r in records:
            if r.topic is TopicKind.RUNS and is_cancel(r.value):
                self._log(true_ms, "cancel", f"shard {p} asked the worker to stop a run")
            elif r.topic is TopicKind.RUNS and r.value is not None:
                run = parse_run(r.value)
                late_ms = true_ms - run.scheduled_ms
                if run.attempt == 1:
                    # Late (or early) fires are the story of a failover: never folded away.
                    kind = "fire" if abs(late_ms) <= LATE_MS else "late"
                    self._log(
                        true_ms,
                        kind,
                        f"shard {p} fired {run.run_id} "
                        f"({late_ms:+,} ms vs its instant, by the broker's clock)",
                    )
                else:
                    self._log(
                        true_ms, "retry", f"shard {p} retried {run.run_id} attempt {run.attempt}"
                    )
            elif r.topic is TopicKind.RESULTS and r.value is not None:
                result = parse_result(r.value)
                why = "" if result.error is None else f": {result.error.get('message', '')}"
                self._log(true_ms, result.status, f"shard {p}: {result.run_id}{why}")
            elif r.topic is TopicKind.DLQ and r.value is not None:
                dead = parse_dlq(r.value)
                self._log(
                    true_ms,
                    "dead",
                    f"shard {p}: {dead.run_id} dead-lettered after {len(dead.attempts)} attempts",
                )
            elif r.topic is TopicKind.REJECTED:
                self._log(true_ms, "reject", f"shard {p}: a record was rejected")

    def _log(self, true_ms: int, kind: str, text: str) -> None:
        self.host.timeline.add(true_ms, self.name, kind, text)


def _release_early(
    core: ShardCore, p: int, records: list[OutRecord], now_ms: int
) -> list[OutRecord]:
    """The ``dag-early-release`` broken variant (test-only): trust a fire as a success.

    Each DAG task run the shard just fired is fed straight back to the REAL core as a
    ``succeeded`` result that no worker wrote (and that reaches no topic), so the
    core releases the task's dependents at once, before the task has even started.
    The shard core is untouched: the bug lives in this simulated node alone, and the
    dag-order checker must catch it. Chains release too (a released task's own
    dependents follow in the same turn).
    """
    released: list[OutRecord] = []
    pending = list(records)
    while pending:
        record = pending.pop(0)
        if record.topic is not TopicKind.RUNS or record.value is None or is_cancel(record.value):
            continue
        run = parse_run(record.value)
        if run.task is None:
            continue
        value = result_value(
            run_id=run.run_id,
            schedule_id=run.schedule_id,
            task=run.task,
            attempt=run.attempt,
            status=RunStatus.SUCCEEDED,
            scheduled_ms=run.scheduled_ms,
            started_ms=now_ms,
            finished_ms=now_ms,
            worker="early-release",
            error=None,
        )
        fake = InRecord(TopicKind.RESULTS, p, -1, run.schedule_id.encode(), value, now_ms)
        more = core.apply(fake, now_ms)
        released.extend(more)
        pending.extend(more)
    return released


class Unauthorized(Exception):
    """The simulated broker refused the scheduler a topic (the `runs_denied` fault)."""


def _denial(kind: TopicKind) -> str:
    # The words of `topics.refusals.denial_message` for the scheduler's principal.
    return f"User:scheduler may not Write topic {kind.value}: Write is granted to role scheduler"


def _reported(value: bytes | None) -> bool:
    """A ``missed`` or ``skipped`` result the shard wrote (the ``drop-reported-results``
    broken variant drops them)."""
    return value is not None and (b'"status":"missed"' in value or b'"status":"skipped"' in value)
