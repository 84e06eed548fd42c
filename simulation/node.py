"""A simulated scheduler process running the REAL `actors.shard.ShardCore`.

The loop is shaped like `actors.scheduler.runtime.SchedulerRuntime`, step for step:

1. poll: learn the group's generation; on a new one (eager rebalancing) drop every
   shard and queue the assigned ones for building;
2. build queued shards: ``init_transactions`` of ``{ns}-shard-{p}`` (fences every
   earlier owner and aborts its open transaction), then restore ``schedules[p]``
   read_committed (latest record per key, as `actors.scheduler.restore`), then
   ``finish_restore``, then seek ``commands[p]``/``results[p]`` to the committed
   offsets;
3. one turn: fetch, ``apply`` each record, ``advance(now)`` every shard, and per shard
   ONE transaction holding its records and its consumed offsets;
4. a fenced shard is dropped and rebuilt only a session timeout later; a failed
   transaction drops it and rebuilds it after `REBUILD_BACKOFF_MS`.

``now`` is the node's clock minus the real `actors.scheduler.skew.SkewEstimator`'s
holdback, fed from the broker's append time of the node's own run records, as the
runtime does with LogAppendTime, and, before a shard's first advance, from a clock
probe (an aborted one-record transaction to runs, as ``ShardRunner.sample_clock``).

A transaction takes a drawn round trip to commit; a process paused in between
commits when it resumes (a zombie, fenced if someone took over), a crashed one
never does (the next owner's ``init_transactions`` or the broker's timeout aborts it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.scheduler.shard_runner import CLOCK_PROBE_KEY, CLOCK_PROBE_VALUE
from actors.scheduler.skew import SkewEstimator
from actors.shard import ShardCore
from simulation.clock import NodeClock
from simulation.host import Host
from simulation.kafka import BrokerUnavailable, ProducerFenced, Txn
from topics.messages import parse_run, result_value
from topics.names import TopicKind
from topics.records import InRecord, OutRecord

REBUILD_BACKOFF_MS = 1_000
LATE_MS = 1_000  # a fire further than this from its instant is narrated as "late"
MAX_BATCH = 5_000
UNAVAILABLE_RETRY_MS = 1_000

_INPUTS = (TopicKind.COMMANDS, TopicKind.RESULTS)


@dataclass(slots=True)
class _Shard:
    core: ShardCore
    epoch: int
    positions: dict[TopicKind, int]
    unwritten: list[OutRecord] = field(default_factory=list)


@dataclass(slots=True)
class _Pending:
    """A turn's transactions, sent and waiting for their commit round trip."""

    txns: dict[int, tuple[Txn, dict[TopicKind, int], list[OutRecord]]]
    sent_local_ms: int
    runs_append_ms: int | None


class SchedulerNode:
    role = "scheduler"

    def __init__(self, host: Host, name: str, clock: NodeClock, session_timeout_ms: int) -> None:
        self.host = host
        self.name = name
        self.clock = clock
        self.session_timeout_ms = session_timeout_ms
        self.state = "down"  # down | up | paused
        self.incarnation = 0
        self.member_id: str | None = None
        self.generation = -1
        self.assigned: frozenset[int] = frozenset()
        self.shards: dict[int, _Shard] = {}
        self.waiting: dict[int, int] = {}  # shard -> true instant before which not to build
        self.skew = SkewEstimator()
        self._pending: _Pending | None = None
        self._wake_ms: int | None = None
        self._stale = False
        self._holdback_ms = 0

    # -- process lifecycle (driven by faults) --------------------------------------

    def start(self) -> None:
        if self.state != "down":
            return  # already running (a restart fault ending after a scripted start)
        now = self.host.time.true_ms
        self.state = "up"
        self.incarnation += 1
        self.skew = SkewEstimator()
        self._holdback_ms = 0
        self._stale = False
        self.shards, self.waiting, self.assigned = {}, {}, frozenset()
        self._pending, self._wake_ms = None, None
        self.member_id = self.host.scheduler_group.join(self.name)
        self.generation = -1
        self._log(now, "start", f"process started, joined the scheduler group as {self.member_id}")
        self.wake(now)

    def crash(self) -> None:
        now = self.host.time.true_ms
        if self.member_id is not None:
            self.host.scheduler_group.silent(self.member_id, now)
        lost = sorted(self.shards)
        self.state = "down"
        self.incarnation += 1
        self.shards, self.waiting, self._pending = {}, {}, None
        self._log(now, "crash", f"process died holding shards {lost}; its memory is gone")

    def pause(self) -> None:
        if self.state != "up":
            return
        now = self.host.time.true_ms
        if self.member_id is not None:
            self.host.scheduler_group.silent(self.member_id, now)
        self.state = "paused"
        self._log(now, "pause", f"process frozen holding shards {sorted(self.shards)}")

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
        return sorted(self.shards)

    def consumes(self, kind: TopicKind, partition: int) -> bool:
        return kind in _INPUTS and partition in self.shards

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
        return self.clock.now_ms() - self._holdback_ms

    def turn(self) -> None:
        host = self.host
        true_ms = host.time.true_ms
        kafka = host.kafka
        if not kafka.available:
            self.wake(true_ms + UNAVAILABLE_RETRY_MS)
            return
        assert self.member_id is not None
        group = host.scheduler_group
        group.heard(self.member_id)
        if self._stale:
            # Thawed: the poll it was in returns what it had, and the turn runs on the old
            # view of ownership; the group's news arrives with the next poll (aiokafka).
            self._stale = False
            self.wake(true_ms + self.host.latency_ms())
        else:
            self._sync_membership(true_ms)
        self._build_waiting(true_ms)
        now_ms = self.now_ms()
        early_release = "dag-early-release" in host.broken
        out: dict[int, list[OutRecord]] = {}
        consumed: dict[int, dict[TopicKind, int]] = {}
        for p, shard in self.shards.items():
            records: list[OutRecord] = []
            offsets: dict[TopicKind, int] = {}
            for kind in _INPUTS:
                batch, position = kafka.fetch(kind, p, shard.positions[kind], MAX_BATCH)
                for record in batch:
                    records.extend(shard.core.apply(record, now_ms))
                if position != shard.positions[kind]:
                    shard.positions[kind] = position
                    offsets[kind] = position
            records.extend(shard.core.advance(now_ms))
            if early_release:
                records.extend(_release_early(shard.core, p, records, now_ms))
            if shard.unwritten:
                records = shard.unwritten + records
            if records or offsets:
                out[p], consumed[p] = records, offsets
        if out:
            self._send(out, consumed, true_ms)
        else:
            self._schedule_next()

    def _sync_membership(self, true_ms: int) -> None:
        group = self.host.scheduler_group
        assert self.member_id is not None
        if group.assigned(self.member_id) is None:
            self._log(
                true_ms,
                "kicked",
                "found itself out of the group (its session expired); "
                f"dropping shards {sorted(self.shards)} and rejoining",
            )
            self.shards, self.waiting = {}, {}
            self.member_id = group.join(self.name)
        if group.generation != self.generation:
            self.generation = group.generation
            assigned = group.assigned(self.member_id) or frozenset()
            if self.shards:
                self._log(true_ms, "revoke", f"rebalance: drops shards {sorted(self.shards)}")
            self.shards = {}
            self.waiting = {p: true_ms for p in sorted(assigned)}
            self.assigned = assigned
            self._log(
                true_ms, "own", f"generation {group.generation}: assigned shards {sorted(assigned)}"
            )

    def _build_waiting(self, true_ms: int) -> None:
        host = self.host
        kafka = host.kafka
        for p in sorted(self.waiting):
            if self.waiting[p] > true_ms:
                continue
            tx_id = host.settings.shard_transactional_id(p)
            try:
                epoch = kafka.init_transactions(tx_id, true_ms)
                self._probe_clock(tx_id, epoch, true_ms)
                core = ShardCore(
                    partition=p,
                    partitions=kafka.partitions[TopicKind.COMMANDS],
                    now_ms=self.now_ms(),
                )
                latest: dict[bytes | None, bytes | None] = {}
                records, _ = kafka.fetch(TopicKind.SCHEDULES, p, 0, 1 << 62)
                for record in records:  # as restore.read_to_end: the latest record per key
                    latest.pop(record.key, None)
                    latest[record.key] = record.value
                for key, value in latest.items():
                    if key is not None:
                        core.restore(key, value)
                unwritten = core.finish_restore(self.now_ms())
                group = host.settings.scheduler_group
                positions = {kind: kafka.committed(group, kind, p)[0] for kind in _INPUTS}
            except BrokerUnavailable:
                self.waiting[p] = true_ms + REBUILD_BACKOFF_MS
                continue
            del self.waiting[p]
            self.shards[p] = _Shard(core, epoch, positions, unwritten)
            stats = core.stats
            self._log(
                true_ms,
                "build",
                f"shard {p} taken on (epoch {epoch}, fences older "
                f"owners): {len(latest)} schedules restored, {stats['in_flight']} runs in "
                f"flight",
            )

    def _probe_clock(self, tx_id: str, epoch: int, true_ms: int) -> None:
        """As `ShardRunner.sample_clock`: a broker-time sample before the shard first fires.

        One record (`CLOCK_PROBE_KEY`) to runs in a transaction that is aborted, so
        no read_committed reader sees it; its append time is the broker's clock.
        Without it a process that has not written yet has no sample, and a clock
        running ahead fires its first batch early. The build is instantaneous here
        (as the restore is), so the acknowledgement comes at the send's instant.
        """
        kafka = self.host.kafka
        txn = kafka.begin(tx_id, epoch, true_ms)
        sent_ms = self.clock.now_ms()
        try:
            kafka.send(txn, TopicKind.RUNS, CLOCK_PROBE_KEY, CLOCK_PROBE_VALUE, None, true_ms)
        finally:
            kafka.abort(txn, true_ms)
        was_held_back = self._holdback_ms
        self.skew.observe(sent_ms=sent_ms, acked_ms=self.clock.now_ms(), broker_ms=true_ms)
        self._holdback_ms = self.skew.holdback_ms()
        if self._holdback_ms and not was_held_back:
            self._log(
                true_ms,
                "clock",
                f"clock probe: its clock runs at least {self.skew.ahead_ms:,} ms ahead of "
                f"the broker's; firing held back by {self._holdback_ms:,} ms",
            )

    def _send(
        self,
        out: dict[int, list[OutRecord]],
        consumed: dict[int, dict[TopicKind, int]],
        true_ms: int,
    ) -> None:
        host = self.host
        kafka = host.kafka
        txns: dict[int, tuple[Txn, dict[TopicKind, int], list[OutRecord]]] = {}
        runs_append_ms: int | None = None
        outside = "changelog-outside-txn" in host.broken
        for p, records in out.items():
            shard = self.shards[p]
            try:
                txn = kafka.begin(host.settings.shard_transactional_id(p), shard.epoch, true_ms)
                for r in records:
                    if outside and r.topic is TopicKind.SCHEDULES:
                        kafka.append(r.topic, r.key, r.value, r.partition, true_ms)
                        continue
                    kafka.send(txn, r.topic, r.key, r.value, r.partition, true_ms)
                    if r.topic is TopicKind.RUNS:
                        runs_append_ms = true_ms
                group = host.settings.scheduler_group
                offsets = {(kind, p): (pos, None) for kind, pos in consumed.get(p, {}).items()}
                if offsets:
                    kafka.send_offsets(txn, group, offsets)
            except ProducerFenced:
                self._fenced(p, true_ms)
                continue
            except BrokerUnavailable:
                self._failed(p, true_ms, "broker unavailable")
                continue
            txns[p] = (txn, consumed.get(p, {}), records)
        if not txns:
            self._schedule_next()
            return
        pending = _Pending(txns, self.clock.now_ms(), runs_append_ms)
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
        touched: list[tuple[TopicKind, int]] = []
        for p, (txn, _, records) in pending.txns.items():
            try:
                host.kafka.commit(txn, true_ms)
            except ProducerFenced:
                self._fenced(p, true_ms)
                continue
            except BrokerUnavailable:
                self._failed(p, true_ms, "broker unavailable")
                continue
            touched.extend(txn.first)
            shard = self.shards.get(p)
            if shard is not None:
                shard.unwritten = []
            self._narrate(p, records, true_ms)
        if pending.runs_append_ms is not None:
            self.skew.observe(
                sent_ms=pending.sent_local_ms,
                acked_ms=self.clock.now_ms(),
                broker_ms=pending.runs_append_ms,
            )
            self._holdback_ms = self.skew.holdback_ms()
        host.arrived(touched, true_ms)
        self._schedule_next()

    def _fenced(self, p: int, true_ms: int) -> None:
        self.shards.pop(p, None)
        if p in self.assigned:
            self.waiting[p] = true_ms + self.session_timeout_ms
        self._log(
            true_ms,
            "fenced",
            f"shard {p}: ProducerFenced — another scheduler took it; "
            "its transaction is aborted, it stops writing for shard "
            f"{p} and looks again in {self.session_timeout_ms // 1000} s",
        )

    def _failed(self, p: int, true_ms: int, why: str) -> None:
        self.shards.pop(p, None)
        if p in self.assigned:
            self.waiting[p] = true_ms + REBUILD_BACKOFF_MS
        self._log(
            true_ms,
            "abort",
            f"shard {p}: transaction failed ({why}); state dropped, rebuilt from the changelog",
        )

    def _schedule_next(self) -> None:
        true_ms = self.host.time.true_ms
        due: list[int] = [at for at in self.waiting.values()]
        holdback_ms = self._holdback_ms
        logs = self.host.kafka.logs
        for p, shard in self.shards.items():
            if shard.unwritten or any(
                logs[kind][p].has_data(shard.positions[kind]) for kind in _INPUTS
            ):
                due.append(true_ms)
            local_due = shard.core.next_due_ms()
            if local_due is not None:
                due.append(max(true_ms, self.clock.true_ms_at(local_due + holdback_ms)))
        if due:
            self.wake(max(true_ms, min(due)))

    # -- the story -----------------------------------------------------------------

    def _narrate(self, p: int, records: list[OutRecord], true_ms: int) -> None:
        from topics.messages import parse_dlq, parse_result

        for r in records:
            if r.topic is TopicKind.RUNS and r.value is not None:
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
        if record.topic is not TopicKind.RUNS or record.value is None:
            continue
        run = parse_run(record.value)
        if run.task is None:
            continue
        value = result_value(
            run_id=run.run_id,
            schedule_id=run.schedule_id,
            task=run.task,
            attempt=run.attempt,
            status="succeeded",
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
