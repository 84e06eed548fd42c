"""A simulated worker process: the REAL `actors.worker.membership.WorkerMachine` (with
its `WorkerCore`) executed over the simulated Kafka.

This file decides nothing about ownership, lease, retries or writes: as
`actors.worker.runtime` does on aiokafka, it turns the simulated consumer group and
broker into the machine's inputs and carries out its actions. What it models of
the client:

- **The consumer.** Consumer group ``{ns}-workers`` on ``{ns}.runs``
  (read_committed). A member learns of a new generation at its next poll and then
  rejoins: from ``rebalance_started`` to ``assigned`` it sends no heartbeats (as
  aiokafka), for the scenario's ``join_ms`` (a JoinGroup that waits for a dead
  member's session: the fault of finding 6). A new assignment starts every
  partition's fetch at the group's committed offset, unpaused (aiokafka's new
  partition states). ``Seek``, ``Pause`` and ``Resume`` act on that position. With
  the scenario's ``fetch_during_adoption`` the consumer hands over records of a
  partition still being adopted, paused or not (aiokafka returns records of a new
  assignment before the rebalance listener has run).
- **Adoption.** ``StartProducer`` and ``ReadCommitted`` answer a broker round trip
  later (plus the scenario's ``adopt_delay_ms``); the broker may answer with a
  coordinator error (`simulation.kafka` worker faults) or not at all.
- **Producers.** Each declares the workers' ``transaction.timeout.ms``
  (``membership.TRANSACTION_TIMEOUT_MS``), as the runtime's producers do: a
  transaction a dead worker left open holds ``{ns}.results`` back from the shards
  until the next owner fences it or the broker's reaper aborts it.
- **Writes.** A ``Write`` begins a transaction, sends the results and the offsets,
  checks every send's answer (a refused record aborts: the rule of
  ``actors.worker.committer``) and commits a round trip later; the outcome goes
  back as ``commit_done``, ``commit_failed``, ``commit_refused`` or ``fenced``.
- **Heartbeats.** Each poll while the broker answers, the member is in the group
  and not rejoining counts as a successful heartbeat.

Jobs take simulated time (`simulation.jobs`): a started job's exit is an event at
its drawn end; a job asked to stop (timeout, revoked) exits a few ms later. A job
performs its side effect just before it returns success, so a crash between the
effect and the commit re-runs an attempt whose effect already happened: exactly
the case idempotency keys are for.

Broken variants (test-only, ``simulation.host.BROKEN_VARIANTS``) undo one fix each
here, in the executor, so a checker must catch the machine's rule missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.worker.clock import BrokerFloor, TimeMoves
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
from actors.worker.membership import (
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
from simulation.broken_machine import AdoptionOutlivesLease, NoSyncHold
from simulation.clock import NodeClock
from simulation.host import Host
from simulation.jobs import Execution, Jobs
from simulation.kafka import (
    TRANSACTION_TIMEOUT_MS as CLIENT_DEFAULT_TRANSACTION_TIMEOUT_MS,
)
from simulation.kafka import BrokerUnavailable, CoordinatorBusy, ProducerFenced, RecordRefused
from topics.messages import Run
from topics.names import TopicKind
from topics.records import OutRecord
from topics.vocabulary import RunStatus

MAX_FETCH = 500
CANCEL_EXIT_MS = 5
PAUSED_RETRY_MS = 100


@dataclass(slots=True)
class _Job:
    run: Run
    outcome: Outcome
    cancelled: bool = False
    started_ms: int = 0  # true ms
    heartbeat_every_ms: int = 0  # a stop request takes effect at the next check-in
    exited: bool = False  # broken variant only (its exit is reported once)
    execution: Execution | None = None  # its entry in the jobs' start/end log

    def stops_at(self, true_ms: int) -> int:
        """When the job ends if asked to stop at ``true_ms``."""
        every = self.heartbeat_every_ms
        if every <= 0:
            return true_ms + CANCEL_EXIT_MS
        checks = (true_ms - self.started_ms) // every + 1
        return self.started_ms + checks * every


class WorkerNode:
    role = "worker"

    def __init__(self, host: Host, name: str, clock: NodeClock, jobs: Jobs, concurrency: int):
        self.host = host
        self.name = name
        self.clock = clock
        self.jobs = jobs
        self.concurrency = concurrency
        self._max_fetch = host.max_fetch_records() or MAX_FETCH
        session_ms = host.worker_group.session_timeout_ms
        # The fix undone: an assignment holds the lease by the heartbeat rule alone.
        rules = NoSyncHold if "no-sync-hold" in host.broken else LeaseRules
        self.rules = rules(session_timeout_ms=session_ms)
        self.state = "down"
        self.incarnation = 0
        self.member_id: str | None = None
        self.generation = -1
        self.joining_until_ms: int | None = None  # true ms: a rejoin in progress
        self.sync_sent_ms: int | None = None  # true ms: the rejoin's SyncGroup went out
        self.group_cut = False  # the group coordinator unreachable, the rest reachable
        self.assigned: frozenset[int] = frozenset()  # the consumer's assignment
        self.positions: dict[int, int] = {}
        self.paused: set[int] = set()
        self.producers: dict[tuple[int, int], int] = {}  # (partition, lease) -> epoch
        self.running: dict[RunKey, _Job] = {}
        # true ms -> the exits due then, (incarnation, key, job) in the order they
        # were scheduled: handed to the core together (`_exits_due_now`).
        self._exits_due: dict[int, list[tuple[int, RunKey, _Job]]] = {}
        self.slow_factor = 1.0
        # (true ms, what): a lease lost while the group counted us, an adoption after
        # it removed us (the lease checker's evidence)
        self.lease_breaches: list[tuple[int, str]] = []
        self.floor = BrokerFloor()
        self.moves = TimeMoves()
        self.machine = self._new_machine(0)
        self._wake_ms: int | None = None
        self._unbounded: dict[int, dict[bytes | None, OutRecord]] = {}  # broken variant only
        self._by_offset: dict[tuple[int, int], RunKey] = {}  # broken variant only
        self.dies_mid_commit = False  # the script's crash_mid_commit: armed

    @property
    def core(self) -> WorkerCore:
        return self.machine.core

    def _now(self) -> int:
        """The machine's time, read as the runtime reads it (``clock.BrokerFloor``); a
        move off the monotonic clock moves the machine's waits first (``TimeMoves``)."""
        mono_ms = self.clock.mono_ms()
        now_ms = self.floor.now_ms(self.clock.now_ms(), mono_ms)
        moved_ms = self.moves.moved_ms(now_ms, mono_ms)
        if moved_ms and "worker-time-moves-ignored" not in self.host.broken:
            self.machine.time_moved(moved_ms)
        return now_ms

    def _now_at(self, true_ms: int) -> int:
        """The machine's time at the past true instant ``true_ms``."""
        ago_ms = self.host.time.true_ms - true_ms
        floor = self.floor.floor_ms(self.clock.mono_ms() - ago_ms)
        wall = self.clock.local_ms(true_ms)
        return wall if floor is None or floor < wall else floor

    def _true_ms_at(self, machine_ms: int) -> int:
        """The true instant by which the machine's time reads ``machine_ms``."""
        true_now = self.host.time.true_ms
        by_wall = self.clock.true_ms_at(machine_ms)
        floor = self.floor.floor_ms(self.clock.mono_ms())
        if floor is None:
            return by_wall
        # The floor advances with the monotonic clock, as fast as true time.
        return max(true_now, min(by_wall, true_now + machine_ms - floor))

    def _new_machine(self, now_ms: int) -> WorkerMachine:
        core = WorkerCore(
            worker=self.name,
            concurrency=self.concurrency,
            known_job=self.jobs.known,
            now_ms=now_ms,
            lease_loss_ms=self.rules.lease_loss_ms,
            rebalance_hold_ms=self.rules.rebalance_hold_ms,
            # The fix undone: an adopted partition's keyed runs start at once, beside
            # the previous owner's jobs that may still run.
            key_adoption_wait_ms=(
                0 if "key-no-adoption-wait" in self.host.broken else self.rules.adoption_wait_ms
            ),
            # The fix undone: a new owner's rate-limit buckets start full, so its first
            # burst adds to the previous owner's last one (docs/DESIGN.md §8.5).
            rate_adoption_full="rate-adoption-full" in self.host.broken,
        )
        if "adoption-outlives-lease" in self.host.broken:
            return AdoptionOutlivesLease(core, self.rules, now_ms)
        return WorkerMachine(core, self.rules, now_ms)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        if self.state != "down":
            return  # already running (a restart fault ending after a scripted start)
        now = self.host.time.true_ms
        self.state = "up"
        self.incarnation += 1
        self.floor = BrokerFloor()  # a new process knows nothing of the broker's clock
        self.moves = TimeMoves()
        self.machine = self._new_machine(self._now())
        self.running, self.producers, self.positions, self.paused = {}, {}, {}, set()
        self.assigned, self.generation, self._wake_ms = frozenset(), -1, None
        self.joining_until_ms = None
        self.sync_sent_ms = None
        self._unbounded = {}
        self._by_offset = {}
        self.member_id = self.host.worker_group.join(self.name)
        self._log(now, "start", f"process started, joined the worker group as {self.member_id}")
        self.wake(now)

    def crash(self) -> None:
        now = self.host.time.true_ms
        if self.member_id is not None:
            self.host.worker_group.silent(self.member_id, now)
        jobs = sorted(job.run.run_id for job in self.running.values())
        for job in self.running.values():  # kill -9: every job dies with the process
            if job.execution is not None and job.execution.end_ms is None:
                job.execution.end_ms = now
        self.state = "down"
        self.incarnation += 1
        self.running = {}
        self._log(
            now,
            "crash",
            f"process died with {len(jobs)} jobs running"
            + (f" ({', '.join(jobs[:3])}{', ...' if len(jobs) > 3 else ''})" if jobs else ""),
        )

    def pause(self) -> None:
        if self.state != "up":
            return
        now = self.host.time.true_ms
        if self.member_id is not None:
            self.host.worker_group.silent(self.member_id, now)
        self.state = "paused"
        self._log(now, "pause", f"process frozen with {len(self.running)} jobs running")

    def resume(self) -> None:
        if self.state != "paused":
            return  # it died while frozen: nothing to thaw
        now = self.host.time.true_ms
        self.state = "up"
        self._log(now, "resume", "process thawed")
        self.wake(now)

    def cut_from_group(self, cut: bool) -> None:
        """The group coordinator stops (or starts again) answering this process alone."""
        if self.group_cut == cut:
            return
        self.group_cut = cut
        now = self.host.time.true_ms
        text = "cut from the group coordinator (heartbeats fail; produces still go through)"
        self._log(now, "cut", text if cut else "reaches the group coordinator again")
        self.wake(now)

    def held(self) -> list[int]:
        """The partitions this process works on right now, as it believes."""
        return sorted(self.core.assigned)

    def consumes(self, kind: TopicKind, partition: int) -> bool:
        return kind is TopicKind.RUNS and partition in self.assigned

    # -- the loop ---------------------------------------------------------------------

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
        if self.state == "up":
            self.turn()

    def turn(self) -> None:
        host = self.host
        kafka = host.kafka
        now_ms = self._now()
        if kafka.available:
            self._poll_group(now_ms)
            self._fetch(now_ms)
        else:
            # Heartbeats (in the background, in the real runtime) succeeded until the
            # broker stopped answering; the lease runs out from that instant.
            self.core.lease_renewed(self._now_at(kafka.unavailable_since_ms))
        self._act(self.machine.tick(now_ms))
        self._schedule_next()

    def _poll_group(self, now_ms: int) -> None:
        """Heartbeat and rebalance, as aiokafka's coordinator does it in the background."""
        group = self.host.worker_group
        true_ms = self.host.time.true_ms
        assert self.member_id is not None
        if self.group_cut:
            # Heartbeats, JoinGroup and SyncGroup fail: the group stops hearing us
            # (its session runs out), while produces still go through.
            group.silent(self.member_id, true_ms)
            return
        if self.joining_until_ms is not None:
            if true_ms < self.joining_until_ms:
                return  # still in JoinGroup/SyncGroup: no heartbeat
            self.joining_until_ms = None
            self._join_done(now_ms)
            return
        rejoin = group.assigned(self.member_id) is None
        if rejoin or group.generation != self.generation:
            if not rejoin:
                # Heartbeats flowed in the background until the rebalance began (each
                # turn stands for them); the last one was at most an interval ago.
                self._act(self.machine.heartbeat(now_ms - self.rules.heartbeat_interval_ms))
            join_ms = self.host.join_ms()
            # A follower's SyncGroup is answered only once the leader's arrives (a
            # slow leader): sent after the JoinGroup, read that much later.
            leader = rejoin or group.leader() == self.member_id
            sync_ms = 0 if leader else self.host.sync_wait_ms()
            if join_ms + sync_ms > 0 and not rejoin:
                self.joining_until_ms = true_ms + join_ms + sync_ms
                self.sync_sent_ms = true_ms + join_ms if sync_ms > 0 else None
                if "rebalance-not-held" not in self.host.broken:
                    self._act(self.machine.rebalance_started(now_ms))
                self.wake(self.joining_until_ms)
                return
            self._join_done(now_ms)
            return
        group.heard(self.member_id)
        self._act(self.machine.heartbeat(now_ms))

    def _join_done(self, now_ms: int) -> None:
        group = self.host.worker_group
        true_ms = self.host.time.true_ms
        assert self.member_id is not None
        rejoined = group.assigned(self.member_id) is None
        if rejoined:
            self._log(true_ms, "kicked", "found itself out of the worker group; rejoins")
            self.member_id = group.join(self.name)
        group.heard(self.member_id)
        self.generation = group.generation
        assigned = group.assigned(self.member_id) or frozenset()
        sent_ms = None
        if self.sync_sent_ms is not None:
            # The answer proves the group had us when the broker handled the request,
            # after its send: the machine counts it from there (sync_hold_ms).
            waited_ms = true_ms - self.sync_sent_ms
            sent_ms = self._now_at(self.sync_sent_ms)
            self.sync_sent_ms = None
            if waited_ms > self.rules.lease_loss_ms:
                self._log(
                    true_ms,
                    "sync",
                    f"SyncGroup answered {waited_ms} ms after its send (the leader's was late)",
                )
        # New partition states: fetch from the committed offset, unpaused.
        self.positions = {
            p: self.host.kafka.committed_offset(self.host.settings.worker_group, TopicKind.RUNS, p)
            for p in assigned
        }
        self.paused = set()
        self.assigned = assigned
        self._log(
            true_ms, "own", f"generation {group.generation}: runs partitions {sorted(assigned)}"
        )
        self._act(self.machine.assigned(assigned, now_ms, rejoined=rejoined, sent_ms=sent_ms))

    def _fetch(self, now_ms: int) -> None:
        kafka = self.host.kafka
        machine = self.machine
        during_adoption = self.host.scenario_flag("fetch_during_adoption")
        for p in sorted(self.assigned):
            position = self.positions.get(p)
            if position is None:
                continue
            adopting = machine.state(p) in ("adopting", "reading")
            if p in self.paused and not (during_adoption and adopting):
                continue
            records, self.positions[p] = kafka.fetch(TopicKind.RUNS, p, position, self._max_fetch)
            if records:
                if "worker-wall-clock" not in self.host.broken:  # else: no floor at all
                    self.floor.observe(records[-1].timestamp_ms, self.clock.mono_ms())
                self._act(machine.records(records, self._now()))
            if p in machine.catching_up():
                self._act(machine.fetched_to(p, self.positions[p], self._now()))

    def _act(self, actions: list[Action]) -> None:
        host = self.host
        true_ms = host.time.true_ms
        for action in actions:
            if isinstance(action, StartJob):
                duration_ms, outcome = self.jobs.draw(action.run, true_ms, self.slow_factor)
                job = self.running[action.key] = _Job(
                    action.run, outcome, False, true_ms, self.jobs.heartbeat_every_ms(action.run)
                )
                job.execution = self.jobs.started(action.run, self.name, true_ms)
                self._by_offset[action.key[:2]] = action.key
                self._at_exit(true_ms + duration_ms, action.key, job)
            elif isinstance(action, CancelJob):
                running = self.running.get(action.key)
                if running is not None and not running.cancelled:
                    running.cancelled = True
                    running.outcome = Outcome(
                        RunStatus.CANCELLED, {"type": "Cancelled", "message": action.reason}
                    )
                    self._at_exit(running.stops_at(true_ms), action.key, running)
                    if action.reason != "revoked":
                        self._log(
                            true_ms,
                            "cancel",
                            f"{running.run.run_id} attempt {running.run.attempt}: {action.reason}",
                        )
            elif isinstance(action, Write):
                self._write(action)
            elif isinstance(action, WakeAt):
                pass  # _schedule_next asks the machine after every event
            elif isinstance(action, Seek):
                if "adopt-no-seek" not in host.broken and action.partition in self.assigned:
                    self.positions[action.partition] = action.offset
            elif isinstance(action, Pause):
                self.paused.add(action.partition)
            elif isinstance(action, Resume):
                self.paused.discard(action.partition)
                self.wake(true_ms)
            elif isinstance(action, StartProducer):
                self._start_producer(action.partition, action.lease)
            elif isinstance(action, ReadCommitted):
                self._read_committed(action.partition, action.lease)
            elif isinstance(action, CloseProducer):
                self.producers.pop((action.partition, action.lease), None)
            elif isinstance(action, Owns):
                self._log(true_ms, "live", f"works on runs partitions {list(action.partitions)}")
            elif isinstance(action, Note):
                if action.warning:
                    self._log(true_ms, "note", action.text)
            elif isinstance(action, LeaseLost):
                self._lease_lost(action, true_ms)
            elif isinstance(action, Discarded):
                self._log(true_ms, "discard", action.reason)

    def _lease_lost(self, action: LeaseLost, true_ms: int) -> None:
        self._log(
            true_ms,
            "lease",
            f"no heartbeat for {action.silent_ms} ms: drops runs "
            f"partitions {list(action.partitions)} and cancels their jobs",
        )
        group = self.host.worker_group
        member = None if self.member_id is None else group.members.get(self.member_id)
        if self.host.kafka.available and member is not None and member.silent_since_ms is None:
            # The group never stopped counting us: nobody could have taken them.
            why = "rejoining" if self.joining_until_ms is not None else "heard by the group"
            self.lease_breaches.append(
                (
                    true_ms,
                    f"declared its lease lost while {why}: every job of its partitions "
                    "was cancelled for nothing",
                )
            )

    # -- adoption ---------------------------------------------------------------------

    def _later(self, delay_ms: int, step: object) -> None:
        incarnation = self.incarnation
        host = self.host

        def run() -> None:
            if incarnation != self.incarnation:
                return  # the process died meanwhile
            if self.state == "paused":
                host.at(host.time.true_ms + PAUSED_RETRY_MS, run)
                return
            step()  # type: ignore[operator]
            self._schedule_next()

        host.at(host.time.true_ms + delay_ms, run)

    def _start_producer(self, p: int, lease: int) -> None:
        host = self.host
        if self.member_id is None or host.worker_group.assigned(self.member_id) is None:
            # Sent after the group removed us (its session ran out): nothing proves the
            # lease, and the partition may be the next owner's, whom the init fences.
            self.lease_breaches.append(
                (
                    host.time.true_ms,
                    f"started a producer of runs partition {p} after the group had removed "
                    "it: its init_transactions fences the partition's new owner",
                )
            )

        def answer() -> None:
            now_ms = self._now()
            tx_id = host.settings.worker_transactional_id(p)
            timeout_ms = TRANSACTION_TIMEOUT_MS
            if "worker-txn-timeout-default" in host.broken:
                # The fix undone: the producer keeps the client default.
                timeout_ms = CLIENT_DEFAULT_TRANSACTION_TIMEOUT_MS
            try:
                # As the runtime: an upgrade mode's other form first (topics/fencing.py).
                for other in host.settings.fenced_ids("worker", p)[1:]:
                    host.kafka.init_for_adoption(other, host.time.true_ms, timeout_ms)
                epoch = host.kafka.init_for_adoption(tx_id, host.time.true_ms, timeout_ms)
            except (BrokerUnavailable, CoordinatorBusy) as exc:
                self._adoption_failed(p, lease, str(exc), now_ms)
                return
            self.producers[(p, lease)] = epoch
            self._act(self.machine.producer_started(p, lease, now_ms))

        self._later(host.latency_ms() + host.adopt_delay_ms(), answer)

    def _read_committed(self, p: int, lease: int) -> None:
        host = self.host

        def answer() -> None:
            now_ms = self._now()
            try:
                try:
                    committed, metadata = host.kafka.committed_for_adoption(
                        host.settings.worker_group, TopicKind.RUNS, p
                    )
                except CoordinatorBusy:
                    if "committed-silence-trusted" not in host.broken:
                        raise
                    # aiokafka's reading of a loading coordinator's answer: nothing
                    # committed, so the partition starts again from its first run.
                    committed, metadata = 0, None
                end = host.kafka.end_offset(TopicKind.RUNS, p)
            except (BrokerUnavailable, CoordinatorBusy) as exc:
                self._adoption_failed(p, lease, str(exc), now_ms)
                return
            self._act(self.machine.committed_read(p, lease, committed, metadata, now_ms, end))

        self._later(host.latency_ms() + host.adopt_delay_ms(), answer)

    def _adoption_failed(self, p: int, lease: int, reason: str, now_ms: int) -> None:
        if "adoption-failure-lost" in self.host.broken:
            # The fix undone: the failure escapes (an exception out of the adoptions'
            # gather) and nothing tries again until the next rebalance.
            self._log(self.host.time.true_ms, "note", f"adopting runs partition {p}: {reason}")
            return
        self._act(self.machine.adoption_failed(p, lease, reason, now_ms))

    # -- jobs -------------------------------------------------------------------------

    def _at_exit(self, true_ms: int, key: RunKey, job: _Job) -> None:
        due = self._exits_due.get(true_ms)
        if due is None:
            due = self._exits_due[true_ms] = []
            self.host.at(true_ms, lambda: self._exits_due_now(true_ms))
        due.append((self.incarnation, key, job))

    def _exits_due_now(self, true_ms: int) -> None:
        """The jobs that end at this instant reach the core in one `jobs_exited`, as
        the executor hands over a turn's exits (docs/DESIGN.md §8.3), in the order
        they were scheduled, so a seed replays the same batches. They are handed
        over at once, with no event between an exit and its report: a cancel that
        reached the core after the job returned would turn its success into
        ``cancelled`` (WORKER-PROTOCOL §9.1, "whatever it returned")."""
        exits: list[tuple[RunKey, Outcome]] = []
        for incarnation, key, job in self._exits_due.pop(true_ms, ()):
            if self._exited(incarnation, key, job):
                exits.append((key, job.outcome))
        if exits:
            self._act(self.machine.jobs_exited(exits, self._now()))
            self.wake(self.host.time.true_ms)

    def _exited(self, incarnation: int, key: RunKey, job: _Job) -> bool:
        """Whether the job's exit is to be reported now (its effect done if it did
        its work); an exit that is stale or waits for a thaw is False."""
        if incarnation != self.incarnation:
            return False
        if "run-key-no-lease" in self.host.broken:
            self._exited_by_offset(key, job)
            return False
        if self.running.get(key) is not job:
            return False
        if self.state == "paused":  # a frozen process finishes nothing; try again later
            self._at_exit(self.host.time.true_ms + PAUSED_RETRY_MS, key, job)
            return False
        del self.running[key]
        if job.execution is not None:
            job.execution.end_ms = self.host.time.true_ms
        if job.outcome.status == RunStatus.SUCCEEDED:
            self.jobs.effect(job.run, job.execution)
        return True

    def _exited_by_offset(self, key: RunKey, job: _Job) -> None:
        """The fix of finding 3 undone: the executor knows a job by (partition, offset)
        alone, as the old runtime did. A run delivered again at that offset (after a
        lost lease or a fence) while the old job still runs takes its place in the
        maps; the old job's exit is then reported for the new run, and the new job's
        own exit finds nothing."""
        if job.exited:
            return
        if self.state == "paused":
            self._at_exit(self.host.time.true_ms + PAUSED_RETRY_MS, key, job)
            return
        job.exited = True
        if job.execution is not None:
            job.execution.end_ms = self.host.time.true_ms
        if job.outcome.status == RunStatus.SUCCEEDED:
            self.jobs.effect(job.run, job.execution)  # the job did its work, whoever hears of it
        self.running.pop(key, None)
        reported = self._by_offset.pop(key[:2], key)
        if reported != key and self.running.pop(reported, None) is None:
            return
        self._act(self.machine.job_exited(reported, job.outcome, self._now()))
        self.wake(self.host.time.true_ms)

    # -- writes -----------------------------------------------------------------------

    def _write(self, action: Write) -> None:
        host = self.host
        kafka = host.kafka
        commit = action.commit
        p = commit.partition
        true_ms = host.time.true_ms
        epoch = self.producers.get((p, commit.lease))
        machine = self.machine
        if epoch is None:
            self._act(machine.commit_failed(commit, "producer closed", self._now()))
            return
        results = list(commit.results)
        unbounded = "unbounded-commit-retry" in host.broken
        if unbounded:
            # The fix undone: every result of a failed commit is written with the next
            # one, however late (the old retry-forever loop).
            mine = {r.value for r in results}
            results.extend(r for v, r in self._unbounded.get(p, {}).items() if v not in mine)
        tx_id = host.settings.worker_transactional_id(p)
        refused: dict[int, RecordRefused] = {}
        try:
            txn = kafka.begin(tx_id, epoch, true_ms)
            for i, r in enumerate(results):
                kind = r.topic
                assert isinstance(kind, TopicKind)  # a worker writes kafkron's results only
                try:
                    kafka.send_result(txn, kind, r.key, r.value, r.partition, true_ms)
                except RecordRefused as exc:
                    refused[i] = exc
            kafka.send_offsets(
                txn,
                host.settings.worker_group,
                {(TopicKind.RUNS, p): (commit.offset, commit.metadata)},
            )
        except ProducerFenced:
            self._act(machine.fenced(p, commit.lease, self._now()))
            return
        except BrokerUnavailable as exc:
            self._failed(commit, str(exc), results)
            return
        if refused and "worker-commit-refused-batch" not in host.broken:
            # Every send's answer is read before the commit (``committer``'s rule).
            kafka.abort(txn, true_ms)
            now_ms = self._now()
            for_good = [i for i, exc in refused.items() if exc.for_good and i < len(commit.results)]
            if len(for_good) == len(refused):
                self._act(machine.commit_refused(commit, for_good, "MESSAGE_TOO_LARGE", now_ms))
            else:
                self._failed(commit, f"results refused ({next(iter(refused.values()))})", results)
            return
        if self.dies_mid_commit and txn.first:
            # kill -9 between the produce and EndTxn: the transaction stays open.
            self.dies_mid_commit = False
            self._log(true_ms, "fault", f"killed with a transaction of runs[{p}] open")
            self.crash()
            return
        incarnation = self.incarnation

        def done() -> None:
            if incarnation != self.incarnation:
                return  # crashed meanwhile: the open transaction is aborted later
            if self.state == "paused":
                host.at(host.time.true_ms + PAUSED_RETRY_MS, done)
                return
            now = host.time.true_ms
            local = self._now()
            if action.abort_from_ms is not None and local >= action.abort_from_ms and not unbounded:
                kafka.abort(txn, now)
                self._failed(commit, "too close to the shard's timed_out verdict", results)
                self._schedule_next()
                return
            try:
                kafka.commit(txn, now)
            except ProducerFenced:
                self._act(machine.fenced(p, commit.lease, local))
                self._schedule_next()
                return
            except BrokerUnavailable as exc:
                self._failed(commit, str(exc), results)
                self._schedule_next()
                return
            self._unbounded.pop(p, None)
            self._act(machine.commit_done(commit, local))
            if results:
                self._log(
                    now,
                    "result",
                    f"runs[{p}]: {len(results)} results and offset {commit.offset} committed",
                )
            host.arrived(txn.first, now)
            self.wake(now)

        host.at(true_ms + host.latency_ms(), done)

    def _failed(self, commit: Commit, reason: str, written: list[OutRecord]) -> None:
        if "unbounded-commit-retry" in self.host.broken:
            self._unbounded[commit.partition] = {r.value: r for r in written}
        self._act(self.machine.commit_failed(commit, reason, self._now()))

    def _schedule_next(self) -> None:
        if self.state != "up":
            return
        true_ms = self.host.time.true_ms
        due: list[int] = []
        kafka = self.host.kafka
        group = self.host.worker_group
        # While heartbeats succeed (each turn makes one) the lease holds; waking only
        # to find that out would cost a turn every few seconds.
        heard = (
            kafka.available
            and not self.group_cut
            and self.joining_until_ms is None
            and self.member_id is not None
            and group.assigned(self.member_id) is not None
        )
        local_due = self.machine.next_wake_ms(lease=not heard)
        if local_due is not None:
            due.append(self._true_ms_at(local_due))
        if heard and self.machine.awaits_heartbeat():
            # aiokafka's background heartbeat would report the next success by then.
            due.append(true_ms + self.rules.heartbeat_interval_ms)
        # Records it has not fetched yet: fetch at once, but only while the broker
        # answers (a turn without a broker fetches nothing, and waking for them
        # again at the same instant would never end); the broker's return wakes it.
        if kafka.available:
            logs = kafka.logs[TopicKind.RUNS]
            for p, position in self.positions.items():
                if p not in self.paused and logs[p].has_data(position):
                    due.append(true_ms)
        if self.joining_until_ms is not None:
            due.append(self.joining_until_ms)
        if due:
            self.wake(max(true_ms, min(due)))

    def _log(self, true_ms: int, kind: str, text: str) -> None:
        self.host.timeline.add(true_ms, self.name, kind, text)
