"""A simulated worker process running the REAL `actors.worker.core.WorkerCore`.

Shaped like `actors.worker.runtime`: consumer group ``{ns}-workers`` on
``{ns}.runs`` (read_committed); on assignment of partition p a producer
``{ns}-worker-{p}`` whose ``init_transactions`` fences the previous owner, then the
committed offset and its metadata are read and handed to ``core.assign``; each
partition's results and offset go out in ONE transaction (``take_commit``). A
fenced producer revokes its partition. The runtime reports successful heartbeats
with ``lease_renewed``; while the broker does not answer they stop, and the core's
lease rule drops everything; when the broker answers again the worker adopts its
partitions afresh, as the runtime does.

Jobs take simulated time (`simulation.jobs`): a started job's exit is an event at
its drawn end; a job asked to stop (timeout, revoked) exits a few ms later. A job
performs its side effect just before it returns success, so a crash between the
effect and the commit re-runs an attempt whose effect already happened: exactly
the case idempotency keys are for.
"""

from __future__ import annotations

from dataclasses import dataclass

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
from simulation.clock import NodeClock
from simulation.host import Host
from simulation.jobs import Jobs
from simulation.kafka import BrokerUnavailable, ProducerFenced
from topics.messages import Run
from topics.names import TopicKind

LEASE_LOSS_MS = 6_000  # 3 heartbeats of a 10 s session / 5, as the runtime's default
MAX_FETCH = 500
CANCEL_EXIT_MS = 5
UNAVAILABLE_RETRY_MS = 1_000


@dataclass(slots=True)
class _Job:
    run: Run
    outcome: Outcome
    cancelled: bool = False


class WorkerNode:
    role = "worker"

    def __init__(self, host: Host, name: str, clock: NodeClock, jobs: Jobs, concurrency: int):
        self.host = host
        self.name = name
        self.clock = clock
        self.jobs = jobs
        self.concurrency = concurrency
        self.state = "down"
        self.incarnation = 0
        self.member_id: str | None = None
        self.generation = -1
        self.assigned: frozenset[int] = frozenset()
        self.epochs: dict[int, int] = {}
        self.positions: dict[int, int] = {}
        self.running: dict[RunKey, _Job] = {}
        self.slow_factor = 1.0
        self.core = self._new_core(0)
        self._wake_ms: int | None = None
        self._commits: set[int] = set()

    def _new_core(self, now_ms: int) -> WorkerCore:
        return WorkerCore(
            worker=self.name,
            concurrency=self.concurrency,
            known_job=self.jobs.known,
            now_ms=now_ms,
            lease_loss_ms=LEASE_LOSS_MS,
        )

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        if self.state != "down":
            return  # already running (a restart fault ending after a scripted start)
        now = self.host.time.true_ms
        self.state = "up"
        self.incarnation += 1
        self.core = self._new_core(self.clock.now_ms())
        self.running, self.epochs, self.positions, self._commits = {}, {}, {}, set()
        self.assigned, self.generation, self._wake_ms = frozenset(), -1, None
        self.member_id = self.host.worker_group.join(self.name)
        self._log(now, "start", f"process started, joined the worker group as {self.member_id}")
        self.wake(now)

    def crash(self) -> None:
        now = self.host.time.true_ms
        if self.member_id is not None:
            self.host.worker_group.silent(self.member_id, now)
        jobs = sorted(job.run.run_id for job in self.running.values())
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
        true_ms = host.time.true_ms
        now_ms = self.clock.now_ms()
        if kafka.available:
            assert self.member_id is not None
            host.worker_group.heard(self.member_id)
            self.core.lease_renewed(now_ms)
            self._sync_membership(true_ms, now_ms)
            for p in sorted(self.core.assigned - self.core.paused()):
                position = self.positions.get(p)
                if position is None:
                    continue
                records, self.positions[p] = kafka.fetch(TopicKind.RUNS, p, position, MAX_FETCH)
                for record in records:
                    self._act(self.core.receive(record, now_ms))
        else:
            # Heartbeats (in the background, in the real runtime) succeeded until the
            # broker stopped answering; the lease runs out from that instant.
            self.core.lease_renewed(self.clock.local_ms(kafka.unavailable_since_ms))
        self._act(self.core.advance(now_ms))
        if kafka.available:
            for p in sorted(self.core.assigned):
                self._commit(p, true_ms)
        self._schedule_next()

    def _sync_membership(self, true_ms: int, now_ms: int) -> None:
        group = self.host.worker_group
        assert self.member_id is not None
        if group.assigned(self.member_id) is None:
            # Rejoining as a new member: whatever it kept may have been owned by someone
            # else meanwhile, so nothing is kept (as the runtime's ``rebalanced``).
            self._log(
                true_ms,
                "kicked",
                "found itself out of the worker group; drops "
                f"runs partitions {sorted(self.core.assigned)} and rejoins",
            )
            for p in sorted(self.core.assigned):
                self._act(self.core.revoke(p, "rejoined the group"))
                self.positions.pop(p, None)
            self.member_id = group.join(self.name)
        if group.generation != self.generation:
            self.generation = group.generation
            assigned = group.assigned(self.member_id) or frozenset()
            for p in sorted(self.core.assigned - assigned):
                self._act(self.core.revoke(p))
                self.positions.pop(p, None)
            self.assigned = assigned
            self._log(
                true_ms, "own", f"generation {group.generation}: runs partitions {sorted(assigned)}"
            )
        # Adopt what is ours but not in the core (new, or dropped on a lost lease/fence).
        for p in sorted(self.assigned - self.core.assigned):
            tx_id = self.host.settings.worker_transactional_id(p)
            try:
                self.epochs[p] = self.host.kafka.init_transactions(tx_id, true_ms)
                committed, metadata = self.host.kafka.committed(
                    self.host.settings.worker_group, TopicKind.RUNS, p
                )
            except BrokerUnavailable:
                continue
            self.core.assign(p, committed, metadata, now_ms)
            self.positions[p] = self.core.fetch_position(p) or committed

    def _act(self, actions: list[Action]) -> None:
        host = self.host
        true_ms = host.time.true_ms
        for action in actions:
            if isinstance(action, StartJob):
                duration_ms, outcome = self.jobs.draw(action.run, true_ms, self.slow_factor)
                job = self.running[action.key] = _Job(action.run, outcome)
                self._at_exit(true_ms + duration_ms, action.key, job)
            elif isinstance(action, CancelJob):
                running = self.running.get(action.key)
                if running is not None and not running.cancelled:
                    running.cancelled = True
                    running.outcome = Outcome(
                        "cancelled", {"type": "Cancelled", "message": action.reason}
                    )
                    self._at_exit(true_ms + CANCEL_EXIT_MS, action.key, running)
                    if action.reason != "revoked":
                        self._log(
                            true_ms,
                            "cancel",
                            f"{running.run.run_id} attempt {running.run.attempt}: {action.reason}",
                        )
            elif isinstance(action, LeaseLost):
                self._log(
                    true_ms,
                    "lease",
                    f"no heartbeat for {action.silent_ms} ms: drops runs "
                    f"partitions {list(action.partitions)} and cancels their jobs",
                )
            elif isinstance(action, Discarded):
                self._log(true_ms, "discard", action.reason)

    def _at_exit(self, true_ms: int, key: RunKey, job: _Job) -> None:
        incarnation = self.incarnation
        self.host.at(true_ms, lambda: self._exited(incarnation, key, job))

    def _exited(self, incarnation: int, key: RunKey, job: _Job) -> None:
        if incarnation != self.incarnation or self.running.get(key) is not job:
            return
        if self.state == "paused":  # a frozen process finishes nothing; try again later
            self._at_exit(self.host.time.true_ms + 100, key, job)
            return
        del self.running[key]
        if job.outcome.status == "succeeded":
            self.jobs.effect(job.run)
        self._act(self.core.job_exited(key, job.outcome, self.clock.now_ms()))
        self.wake(self.host.time.true_ms)

    def _commit(self, p: int, true_ms: int) -> None:
        if p in self._commits:
            return
        commit = self.core.take_commit(p)
        if commit is None:
            return
        host = self.host
        kafka = host.kafka
        tx_id = host.settings.worker_transactional_id(p)
        try:
            txn = kafka.begin(tx_id, self.epochs[p], true_ms)
            for r in commit.results:
                kafka.send(txn, r.topic, r.key, r.value, r.partition, true_ms)
            kafka.send_offsets(
                txn,
                host.settings.worker_group,
                {(TopicKind.RUNS, p): (commit.offset, commit.metadata)},
            )
        except ProducerFenced:
            self._fenced(p, commit, true_ms)
            return
        except BrokerUnavailable:
            self.core.commit_failed(commit)
            return
        self._commits.add(p)
        incarnation = self.incarnation

        def done() -> None:
            if incarnation != self.incarnation:
                return  # crashed meanwhile: the open transaction is aborted later
            if self.state == "paused":
                host.at(host.time.true_ms + 100, done)
                return
            self._commits.discard(p)
            now = host.time.true_ms
            try:
                kafka.commit(txn, now)
            except ProducerFenced:
                self._fenced(p, commit, now)
                return
            except BrokerUnavailable:
                self.core.commit_failed(commit)
                self.wake(now + UNAVAILABLE_RETRY_MS)
                return
            self.core.commit_done(commit)
            if commit.results:
                self._log(
                    now,
                    "result",
                    f"runs[{p}]: {len(commit.results)} results and offset "
                    f"{commit.offset} committed",
                )
            host.arrived(txn.first, now)
            self.wake(now)

        host.at(true_ms + host.latency_ms(), done)

    def _fenced(self, p: int, commit: Commit, true_ms: int) -> None:
        self.core.commit_failed(commit)
        self._act(self.core.revoke(p, "fenced"))
        self.positions.pop(p, None)
        # Still ours by the group? Then the next turn adopts it afresh (the runtime's
        # recovery once a heartbeat is heard); if not, the rebalance tells us so.
        self._log(
            true_ms,
            "fenced",
            f"runs[{p}]: ProducerFenced — another worker owns it; "
            f"{len(commit.results)} results discarded, their runs will run again there",
        )

    def _schedule_next(self) -> None:
        true_ms = self.host.time.true_ms
        due: list[int] = []
        # While the broker answers, heartbeats renew the lease (each turn says so);
        # waking only to find that out would cost a turn every few seconds.
        local_due = self.core.next_due_ms(lease=not self.host.kafka.available)
        if local_due is not None:
            due.append(self.clock.true_ms_at(local_due))
        logs = self.host.kafka.logs[TopicKind.RUNS]
        paused = self.core.paused()
        # Records it has not fetched yet: fetch at once, but only while the broker
        # answers (a turn without a broker fetches nothing, and waking for them
        # again at the same instant would never end); the broker's return wakes it.
        if self.host.kafka.available:
            for p, position in self.positions.items():
                if p not in paused and logs[p].has_data(position):
                    due.append(true_ms)
        if self.assigned - self.core.assigned:
            due.append(true_ms + UNAVAILABLE_RETRY_MS)
        if due:
            self.wake(max(true_ms, min(due)))

    def _log(self, true_ms: int, kind: str, text: str) -> None:
        self.host.timeline.add(true_ms, self.name, kind, text)
