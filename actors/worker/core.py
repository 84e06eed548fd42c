"""The worker's behaviour as a pure state machine: runs in, results and offsets out.

Rules of this file: no asyncio, no Kafka, no clock reads. Everything that decides
what a worker does lives here; the runtime (``runtime.py``) and the simulation feed
it events with the time passed in and carry out the actions it returns.

Theory of operation
-------------------
Inputs (methods)                         Outputs
  assign(p, committed, metadata)           -
  receive(run record)                      StartJob / Discarded
  job_exited(key, outcome)                 StartJob (the freed slot's next run)
  jobs_exited([(key, outcome), ...])       StartJob (a turn's exits, one fill)
  advance(now)                             CancelJob(timeout) / LeaseLost + CancelJob
  lease_renewed(now)                       -
  revoke(p)                                CancelJob(revoked)
  take_commit(p) / commit_done / _failed   Commit(results, offset, metadata)

A run record goes through: delivered -> queued (waiting for one of ``concurrency``
slots) -> running -> decided (its result is recorded) -> committed (result and
offset written by the runtime in one transaction). The offset bookkeeping is
``offsets.PartitionOffsets``: a result is recorded and its offset finished in the
same step, so any commit taken afterwards covers both or neither.

Decisions made here:
- A run whose ``deadline`` passes while it runs is ``timed_out`` at that instant
  (never earlier); the job is asked to stop, and its slot stays taken until it has
  actually exited (a thread cannot be killed), whatever it returns is ignored.
  A run whose deadline passed before a slot was free is ``timed_out`` without
  starting.
- From ``deadline + TIMEOUT_MARGIN_MS`` on (``topics.deadlines``) the attempt's
  verdict is the shard's: it writes ``timed_out`` itself and retries. So the worker
  writes no result it would decide at or after that instant (a run received or
  reaching a slot that late, a job still running or exiting that late): the offset
  is finished without a result (counted as ``left_to_shard``), and a job still
  running is cancelled as at any deadline. That keeps one visible result per
  (run_id, attempt) as long as a result decided before that instant is committed
  before it (the margin is the room for commit latency and clock skew between
  worker and shard hosts).
- A cancel record (``run.cancel``, ``overlap: cancel_other``; docs/DESIGN.md §6.6)
  comes on the run's partition after the run: a queued run is recorded
  ``cancelled`` without starting; a running one's job is asked to stop
  (``CancelJob``) and its ``cancelled`` result is recorded when the job has really
  exited (whatever it returned), or at its deadline if it never exits: "ended"
  means stopped, so ``cancel_other`` never starts the next run beside a job that
  still runs; a decided one keeps its result. The cancel record's offset stays
  open until that result, so a commit taken meanwhile never lets the next owner
  redeliver the run without its cancel. A cancel record held in the backlog (the
  partition at its open limit) is applied at once to the run it names: a delivered
  run as above, a run still in the backlog decided ``cancelled`` when delivered
  (``cancels_ahead``); the record's offset is still delivered in order.
- A partition adopted from another owner is *caught up* before any of its runs
  start: the executor reads the partition's end (its last stable offset) after the
  fence and hands it to `assign`; runs delivered below it are queued but not
  started until the consumer's position has reached it (`caught_up`). So a run
  whose cancel record was committed before the adoption is never started, however
  the fetches split the two (docs/DESIGN.md §6.6). A partition whose backlog fills
  before its end (``max_backlog_per_partition`` records of any kind fetched past
  its first ``max_open_per_partition`` unfinished runs) is caught up there: it
  cannot fetch further until runs finish.
- A run naming a job this worker does not have fails with ``UnknownJob`` (retried
  by the schedule actor with backoff, time enough to deploy a worker that has it).
- A revoked partition's runs are cancelled and their results are dropped, committed
  or not yet: the next owner starts from the committed offset and runs them again.
- Lease: Kafka's group membership is the worker's lease on its partitions. If no
  heartbeat has succeeded for ``lease_loss_ms`` (the runtime reports successes via
  ``lease_renewed``), the worker must assume its partitions are being given to
  someone else, so it cancels everything and drops every partition (Dropbox ATF's
  rule: stop after consecutive failed heartbeats). The runtime re-establishes what
  it still owns once the coordinator answers again. No run starts past the lease,
  even before the turn that declares it lost: a process thawed after a freeze may
  handle a fetched batch or a job's exit first, and its partitions may be another
  owner's by then (``_fill``). Only the group's answers renew the lease: ``assign``
  (an adoption) does not, or a partition gone live at the lease's last instant
  would stretch it past the session.
- A partition holds at most ``max_open_per_partition`` delivered, unfinished runs
  (which bounds the commit metadata). Records fetched beyond that wait in the
  partition's backlog, undelivered: no commit mentions them, so losing the partition
  loses nothing. The partition is still fetched until its backlog holds
  ``max_backlog_per_partition`` records, and only then paused (``paused()``; a
  fetch already returned is kept whole, so the backlog may exceed that by one
  fetch, at most ``MAX_BATCH`` records of the runtime): a
  cancel record behind a burst reaches the burst's jobs, and an adoption past the
  limit goes on catching up. A cancel met in the backlog is applied at once to its
  run, delivered or not yet (``cancels_ahead``).
  Open runs restored from the previous owner's commit and not fetched again yet do
  not count as held: they come first in the log, and a partition handed over at the
  limit must fetch them (pausing it would wait for runs it never fetches).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from actors.worker.errors import CANCELLED_ERROR
from actors.worker.keys import KeySlots
from actors.worker.lanes import Lane, SlotPool
from actors.worker.offsets import (
    MAX_BACKLOG_PER_PARTITION,
    MAX_OPEN_PER_PARTITION,
    PartitionOffsets,
)
from actors.worker.outcome import Outcome as Outcome  # where executors and tests name it
from actors.worker.ratelimit import RateGate
from actors.worker.waiting import Waiting
from topics.concurrency import CONCURRENCY_ERROR
from topics.deadlines import TIMEOUT_MARGIN_MS, shard_decides
from topics.messages import (
    PROGRESS_INTERVAL_MS,
    PROGRESS_STATUS,
    Run,
    RunCancelRecord,
    is_cancel,
    parse_cancel,
    parse_result,
    parse_run,
    result_value,
)
from topics.names import TopicKind
from topics.records import InRecord, OutRecord
from topics.timefmt import format_ms
from topics.vocabulary import ConcurrencyStrategy, RunStatus

RunKey = tuple[int, int, int]
"""(partition, offset, lease) of a run record. ``lease`` numbers the adoptions of the
partition in this process (``assign``): a run delivered again after the partition
was dropped and adopted afresh (a lost lease, a fence) is a different key, so the
old job's late exit can never be taken for the new one's."""

JOB_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)

UNENCODABLE_ERROR = {
    "type": "UnencodableResult",
    "message": "the result of this attempt could not be encoded as JSON (a bug)",
}
"""The error of a result written in place of one that could not be encoded (text
no UTF-8 can carry, a value JSON cannot): the exit still finishes its offset."""


@dataclass(frozen=True, slots=True)
class StartJob:
    key: RunKey
    run: Run


@dataclass(frozen=True, slots=True)
class CancelJob:
    key: RunKey
    reason: str  # "timeout" | "revoked" | "lease lost"


@dataclass(frozen=True, slots=True)
class Discarded:
    """A record that cannot be a run (malformed); acknowledged without a result."""

    key: RunKey
    reason: str


@dataclass(frozen=True, slots=True)
class LeaseLost:
    partitions: tuple[int, ...]
    silent_ms: int


Action = StartJob | CancelJob | Discarded | LeaseLost


@dataclass(frozen=True, slots=True)
class Commit:
    """Write ``results`` and commit ``offset`` (with ``metadata``) in one transaction."""

    partition: int
    offset: int
    metadata: str
    results: tuple[OutRecord, ...]
    runs: tuple[Run, ...] = ()
    """The run of each result, in the same order."""
    lease: int = 0
    """The adoption of ``partition`` these results belong to (``assign``)."""

    @property
    def deadlines(self) -> tuple[int, ...]:
        return tuple(run.deadline_ms for run in self.runs)

    @property
    def commit_by_ms(self) -> int | None:
        """The instant from which the shard decides one of these attempts itself: a
        transaction carrying them must not commit at or after it (None: no result)."""
        if not self.runs:
            return None
        return min(run.deadline_ms for run in self.runs) + TIMEOUT_MARGIN_MS


@dataclass(slots=True)
class _Running:
    run: Run
    started_ms: int
    decided: bool = False  # result already recorded (timed out); ignore the exit outcome
    dropped: bool = False  # partition gone; never record a result
    # Asked to stop by a cancel record: its one result, ``cancelled`` with this
    # error, is recorded when the job exits (or at its deadline), not before.
    cancelled: Mapping[str, str] | None = None
    # The offset of that cancel record: left open until the result is recorded, so a
    # commit taken while the job is stopping names it open with its run, and an owner
    # restored from that commit delivers both again (never the run alone).
    cancel_offset: int | None = None
    progress_ms: int | None = None  # when its last progress report was taken


@dataclass(slots=True)
class _Partition:
    offsets: PartitionOffsets
    lease: int = 0
    results: list[OutRecord] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)  # the run of each result
    in_commit: Commit | None = None
    dirty: bool = False  # something finished since the last commit was taken
    # Fetched records beyond the open limit, in offset order, not yet delivered.
    backlog: deque[InRecord] = field(default_factory=deque)
    # Cancels met in the backlog for runs not delivered yet, by (run_id, attempt):
    # such a run is decided cancelled when delivered, not started before its cancel
    # record's turn. Each leaves when its record is delivered.
    cancels_ahead: dict[tuple[str, int], RunCancelRecord] = field(default_factory=dict)
    # Adopted, and not yet fetched up to the end it had then: no job starts.
    catch_up_to: int | None = None
    # No run with a concurrency key starts before this instant: the previous owner's
    # jobs may still run until its lease is known lost (`actors.worker.keys`).
    keyed_from_ms: int = 0


class WorkerCore:
    """Runs received from ``{ns}.runs`` partitions, decided into results."""

    def __init__(
        self,
        *,
        worker: str,
        concurrency: int,
        known_job: Callable[[str], bool],
        now_ms: int,
        lease_loss_ms: int,
        rebalance_hold_ms: int = 0,
        sync_hold_ms: int = 0,
        max_open_per_partition: int = MAX_OPEN_PER_PARTITION,
        max_backlog_per_partition: int = MAX_BACKLOG_PER_PARTITION,
        key_adoption_wait_ms: int | None = None,
        pool: SlotPool | None = None,
        lane: Lane = Lane.NORMAL,
        rate_adoption_full: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if not 1 <= max_open_per_partition <= MAX_OPEN_PER_PARTITION:
            raise ValueError(
                f"max_open_per_partition must be in 1..{MAX_OPEN_PER_PARTITION}, "
                f"got {max_open_per_partition}"
            )
        self._worker = worker
        self._concurrency = concurrency
        self._known_job = known_job
        self._lease_loss_ms = lease_loss_ms
        # How long an adopted partition's keyed and rate-limited runs wait for the
        # previous owner to stop starting them and to stop its jobs: the longest it
        # may hold its lease, by its lease rule (`lease_loss_ms` after its last
        # heartbeat), in a rebalance it joined whose SyncGroup answer it never got,
        # by the rebalance's hold (`LeaseRules.rebalance_hold_ms` after it,
        # `hold_lease_until`), or after an assignment by the SyncGroup's hold
        # (`LeaseRules.sync_hold_ms` after its send): ``LeaseRules.adoption_wait_ms``,
        # docs/DESIGN.md §8.2. The executors pass that (finite with the lease rule off
        # too); a broken variant of the simulation passes 0.
        adoption_wait_ms = max(lease_loss_ms, rebalance_hold_ms, sync_hold_ms)
        self._key_wait_ms = (
            adoption_wait_ms if key_adoption_wait_ms is None else key_adoption_wait_ms
        )
        self._lease_renewed_ms = now_ms
        self._lease_held_until_ms = now_ms
        if max_backlog_per_partition < 1:
            raise ValueError(
                f"max_backlog_per_partition must be at least 1, got {max_backlog_per_partition}"
            )
        self._max_open = max_open_per_partition
        self._starting = True  # False once draining: no queued run starts
        self._max_backlog = max_backlog_per_partition
        self._partitions: dict[int, _Partition] = {}
        self._queue: deque[tuple[RunKey, Run]] | Waiting = deque()
        # Slots shared with the queue's other lane, and a reserve (docs/DESIGN.md §8.4);
        # None (no --lanes, no --reserve): this core's own `concurrency` slots.
        self._pool = pool
        self._lane = lane
        if pool is not None:
            pool.join(lane, lambda: len(self._running))
        self._backlogged: set[int] = set()
        self._running: dict[RunKey, _Running] = {}
        self._deadlines: list[tuple[int, RunKey]] = []
        self._keys = KeySlots()
        # When a keyed run held back (by an adoption or its key's limit) may start, or
        # reaches its deadline (`advance` fills then).
        self._keys_due_ms: int | None = None
        # When a fill found the time past the lease and started nothing (`advance`
        # fills again then, unless it finds the lease lost).
        self._refused_past_lease_ms: int | None = None
        # Rate limits and their pauses (docs/DESIGN.md §8.5; the broken variant only
        # sets ``rate_adoption_full``).
        self.rates = RateGate(adoption_full=rate_adoption_full)
        self.counts: dict[str, int] = {
            "received": 0,
            "started": 0,
            "succeeded": 0,
            "failed": 0,
            "timed_out": 0,
            "cancelled": 0,
            "dropped": 0,
            "discarded": 0,
            "leases_lost": 0,
            "left_to_shard": 0,
            "refused": 0,
            "cancels": 0,
            "progress": 0,
            "key_waits": 0,
            "key_cancels": 0,
            "start_reports": 0,
        }

    # --- assignment ---------------------------------------------------------------

    def assign(
        self,
        partition: int,
        committed: int,
        metadata: str | None,
        now_ms: int,
        lease: int = 0,
        end_offset: int | None = None,
    ) -> None:
        """``partition`` is ours from ``committed`` on (with that commit's metadata).

        ``lease`` numbers this adoption of the partition (see ``RunKey``); the caller
        gives each adoption of a partition in this process a new one. ``end_offset``
        is the partition's end when it was adopted: its runs start only once the
        consumer has read that far (`caught_up`).
        """
        if partition in self._partitions:
            return
        part = _Partition(PartitionOffsets(committed, metadata), lease)
        if end_offset is not None and end_offset > part.offsets.fetch_from():
            part.catch_up_to = end_offset
        # Whoever owned it before may still run a key's jobs until its lease is known
        # lost (docs/DESIGN.md §8.2): its keyed runs wait that long here.
        part.keyed_from_ms = now_ms + self._key_wait_ms
        # Its rate limits' buckets are empty once the previous owner is known stopped.
        self.rates.adopted(partition, now_ms, part.keyed_from_ms)
        self._partitions[partition] = part

    def catching_up(self) -> frozenset[int]:
        """Partitions adopted and not yet read to their end (report `caught_up`)."""
        return frozenset(p for p, part in self._partitions.items() if part.catch_up_to is not None)

    def caught_up(self, partition: int, position: int, now_ms: int) -> list[Action]:
        """The consumer's position in ``partition`` is ``position`` (the next offset it
        fetches): from its adoption's end on, its queued runs may start."""
        part = self._partitions.get(partition)
        if part is None or part.catch_up_to is None or position < part.catch_up_to:
            return []
        part.catch_up_to = None
        return self._fill(now_ms)

    def revoke(self, partition: int, reason: str = "revoked") -> list[Action]:
        """``partition`` is no longer ours: cancel its runs, drop its results."""
        if self._partitions.pop(partition, None) is None:
            return []
        self.rates.revoked(partition)
        self._backlogged.discard(partition)
        if any(key[0] == partition for key, _ in self._queue):
            kept = (item for item in self._queue if item[0][0] != partition)
            self._queue = Waiting(kept) if isinstance(self._queue, Waiting) else deque(kept)
        actions: list[Action] = []
        for key, running in self._running.items():
            if key[0] == partition and not running.dropped:
                running.dropped = True
                self.counts["dropped"] += 1
                actions.append(CancelJob(key, reason))
        return actions

    @property
    def assigned(self) -> frozenset[int]:
        return frozenset(self._partitions)

    def fetch_position(self, partition: int) -> int | None:
        """Where the consumer should fetch ``partition`` from (None if not ours)."""
        part = self._partitions.get(partition)
        if part is None:
            return None
        if part.backlog:
            return part.backlog[-1].offset + 1
        return part.offsets.fetch_from()

    def paused(self) -> frozenset[int]:
        """Partitions that must not be fetched until some of their runs finish: those
        whose backlog is full (at the open limit, the rest is still fetched into the
        backlog, so a cancel record behind the runs reaches the worker)."""
        limit = self._max_backlog
        return frozenset(p for p in self._backlogged if len(self._partitions[p].backlog) >= limit)

    # --- runs ---------------------------------------------------------------------

    def receive(self, record: InRecord, now_ms: int, *, fill: bool = True) -> list[Action]:
        """Take one fetched record. ``fill=False`` delivers without starting jobs (the
        caller ends the batch with `fill`): a run followed by its cancel record in
        the same fetch is then never started."""
        part = self._partitions.get(record.partition)
        if part is None:
            return []  # not ours (any more)
        backlog = part.backlog
        offsets = part.offsets
        full = offsets.held_count() >= self._max_open
        if offsets.adds_open(record.offset) and (backlog or (full and not is_cancel(record.value))):
            # Held back, not delivered: the commit metadata never names it, so if we
            # lose the partition now it is simply fetched again by the next owner.
            # (A record below that, a restored open run, is delivered whatever the
            # limit: it is already counted, and only its run can free room. So is a
            # cancel record with nothing backlogged before it: it opens no run, and
            # the run it stops is already delivered, maybe running.)
            actions: list[Action] = []
            if not backlog or record.offset > backlog[-1].offset:
                backlog.append(record)
                self._backlogged.add(record.partition)
                if is_cancel(record.value):
                    actions = self._cancel_ahead(part, record, now_ms)
            if len(backlog) >= self._max_backlog and part.catch_up_to is not None:
                # Its backlog full, the partition fetches no further until runs
                # finish: its catch-up ends here (a cancel record beyond comes later).
                part.catch_up_to = None
                if fill:
                    actions = actions + self._fill(now_ms)
            return actions
        actions = self._deliver(part, record, now_ms)
        if fill:
            actions.extend(self._fill(now_ms))
        return actions

    def fill(self, now_ms: int) -> list[Action]:
        """Start queued runs while slots are free (after ``receive(..., fill=False)``)."""
        return self._fill(now_ms)

    def _deliver(self, part: _Partition, record: InRecord, now_ms: int) -> list[Action]:
        """Hand ``record`` to the offset tracker and queue its run (or decide it now)."""
        if not part.offsets.deliver(record.offset):
            return []  # already finished before (a restore, or a fetch after a seek)
        self.counts["received"] += 1
        key = (record.partition, record.offset, part.lease)
        if is_cancel(record.value):
            return self._cancel(part, record, key, now_ms)
        try:
            if record.value is None:
                raise ValueError("the record has no value")
            run = parse_run(record.value)
        except ValueError as exc:
            self._finish(part, record.offset)
            self.counts["discarded"] += 1
            return [Discarded(key, f"not a run record: {exc}")]
        if part.cancels_ahead:
            cancel = part.cancels_ahead.get((run.run_id, run.attempt))
            if cancel is not None:  # its cancel record waits in the backlog
                self._record(
                    part,
                    record.offset,
                    run,
                    RunStatus.CANCELLED,
                    None,
                    now_ms,
                    _cancel_error(cancel),
                )
                return []
        if not self._known_job(run.job.name):
            self._record(
                part,
                record.offset,
                run,
                RunStatus.FAILED,
                now_ms,
                now_ms,
                {
                    "type": "UnknownJob",
                    "message": (
                        f"worker {self._worker} has no job named {run.job.name!r}; "
                        "start workers with --jobs naming the module that defines it"
                    ),
                },
            )
            return []
        if run.job.concurrency is not None:
            return self._key_arrives(part, key, run, now_ms)
        if run.job.priority and type(self._queue) is deque:
            self._queue = Waiting(self._queue)  # from now on, highest priority first
        self._queue.append((key, run))
        return []

    def _key_arrives(self, part: _Partition, key: RunKey, run: Run, now_ms: int) -> list[Action]:
        """A run with a concurrency key is delivered: its strategy decides at once if
        its key is at its limit here (docs/DESIGN.md §8.2); else it is queued, and
        `_fill` starts it when its key has a free slot."""
        concurrency = run.job.concurrency
        assert concurrency is not None
        partition, name, limit = key[0], concurrency.key, concurrency.limit
        queued = [
            (queued_key, other)
            for queued_key, other in self._queue
            if queued_key[0] == partition and _key_of(other) == name
        ]
        strategy = concurrency.strategy
        actions: list[Action] = []
        if strategy == ConcurrencyStrategy.CANCEL_NEWEST:
            if self._keys.count(partition, name) + len(queued) >= limit:
                self.counts["key_cancels"] += 1
                self._record(
                    part,
                    key[1],
                    run,
                    RunStatus.CANCELLED,
                    None,
                    now_ms,
                    _key_error(name, limit, "cancel_newest: the key was at its limit"),
                )
                return actions
        elif strategy == ConcurrencyStrategy.CANCEL_IN_PROGRESS:
            # The newest wins: the oldest of the key stop (running ones first, then
            # waiting ones) until it fits; it starts once the stopped jobs exited.
            live = [
                (running_key, self._running[running_key])
                for running_key, _ in self._keys.oldest(partition, name)
                if running_key in self._running
                and self._running[running_key].cancelled is None
                and not self._running[running_key].decided
                and not self._running[running_key].dropped
            ]
            excess = len(live) + len(queued) + 1 - limit
            why = _key_error(name, limit, f"cancel_in_progress: a newer run {run.run_id} came")
            for running_key, running in live:
                if excess <= 0:
                    break
                running.cancelled = why
                self.counts["key_cancels"] += 1
                actions.append(CancelJob(running_key, f"cancelled: {why['message']}"))
                excess -= 1
            for queued_key, other in queued:
                if excess <= 0:
                    break
                self._queue.remove((queued_key, other))
                self.counts["key_cancels"] += 1
                self._record(part, queued_key[1], other, RunStatus.CANCELLED, None, now_ms, why)
                excess -= 1
        self._queue.append((key, run))
        return actions

    def _cancel(self, part: _Partition, record: InRecord, key: RunKey, now_ms: int) -> list[Action]:
        """A cancel record (docs/DESIGN.md §6.6): stop the attempt it names if this
        partition holds it, and write its one ``cancelled`` result now.

        It comes after its run on the same partition, so the run is queued, running
        or finished here already (or was finished by an earlier owner). A queued run
        never starts; a running job is asked to stop (an async job at its ``await``,
        a sync one at its next ``ctx.heartbeat()``) and its ``cancelled`` result is
        recorded once it has exited, whatever it returned (`job_exited`), or at its
        deadline if it never does (`advance`): the result says the job has stopped,
        so the shard's ``cancel_other`` starts the next run only then. A run already
        decided keeps its result: that is the attempt's one result.
        """
        try:
            cancel = parse_cancel(record.value or b"")
        except ValueError as exc:
            self._finish(part, record.offset)
            self.counts["discarded"] += 1
            return [Discarded(key, f"not a cancel record: {exc}")]
        self.counts["cancels"] += 1
        if part.cancels_ahead:  # its turn: its run was delivered before it
            part.cancels_ahead.pop((cancel.run_id, cancel.attempt), None)
        actions, stopping = self._apply_cancel(part, cancel, key[0], key[2], now_ms)
        if stopping is not None and stopping.cancel_offset is None:
            stopping.cancel_offset = record.offset  # finished with the job's result
        else:
            self._finish(part, record.offset)
        return actions

    def _cancel_ahead(self, part: _Partition, record: InRecord, now_ms: int) -> list[Action]:
        """A cancel record held in the backlog (the partition is at its open limit)
        is applied at once to the run it names: it would otherwise wait for room
        behind the backlogged runs while its job runs on. A delivered run is
        cancelled as by the record's turn; a run still in the backlog is decided
        ``cancelled`` when delivered (``cancels_ahead``). The record itself stays in
        the backlog, so its offset is still delivered and finished in order (then a
        no-op, or it settles with the job's exit).
        """
        try:
            cancel = parse_cancel(record.value or b"")
        except ValueError:
            return []  # discarded when its turn comes
        # Its run may still be in the backlog: then it is decided cancelled when
        # delivered (a run delivered already is never delivered again, so keeping
        # it whatever happens below is harmless).
        part.cancels_ahead[(cancel.run_id, cancel.attempt)] = cancel
        return self._apply_cancel(part, cancel, record.partition, part.lease, now_ms)[0]

    def _apply_cancel(
        self, part: _Partition, cancel: RunCancelRecord, partition: int, lease: int, now_ms: int
    ) -> tuple[list[Action], _Running | None]:
        """Stop the attempt ``cancel`` names, if this partition holds it: the actions,
        and the job that is stopping (None: decided now, or not held here)."""
        for i, (queued_key, run) in enumerate(self._queue):
            if queued_key[0] == partition and queued_key[2] == lease and _names(cancel, run):
                del self._queue[i]
                self._record(
                    part,
                    queued_key[1],
                    run,
                    RunStatus.CANCELLED,
                    None,
                    now_ms,
                    _cancel_error(cancel),
                )
                return [], None
        for running_key, running in self._running.items():
            if (
                running_key[0] == partition
                and running_key[2] == lease
                and not running.decided
                and not running.dropped
                and _names(cancel, running.run)
            ):
                if running.cancelled is not None:
                    return [], running  # asked to stop already
                running.cancelled = _cancel_error(cancel)
                return [CancelJob(running_key, f"cancelled: {cancel.reason}")], running
        return [], None

    def job_exited(self, key: RunKey, outcome: Outcome, now_ms: int) -> list[Action]:
        """The job of ``key`` returned, raised or was cancelled; its slot is free."""
        return self.jobs_exited(((key, outcome),), now_ms)

    def jobs_exited(self, exits: Iterable[tuple[RunKey, Outcome]], now_ms: int) -> list[Action]:
        """The jobs that ended in one turn of the loop, in the order they ended: each
        is recorded as by `job_exited`, then the freed slots are filled once (the same
        runs start as after one `job_exited` each, without a pass over the queue, a
        lease check and an action list per exit: docs/DESIGN.md §8.3)."""
        backlogged = self._backlogged
        refill: list[int] = []
        for key, outcome in exits:
            exited = self._exited(key, outcome, now_ms)
            if exited and key[0] in backlogged and key[0] not in refill:
                refill.append(key[0])
        if refill:
            actions = self._refill(refill, now_ms)
            actions.extend(self._fill(now_ms))
            return actions
        return self._fill(now_ms)

    def _exited(self, key: RunKey, outcome: Outcome, now_ms: int) -> bool:
        """Record the exit of ``key``'s job; False if it was not running (reported
        twice, or dropped with its partition)."""
        running = self._running.get(key)
        if running is None:
            return False
        if not running.decided and not running.dropped:
            part = self._partitions.get(key[0])
            if part is not None and part.lease == key[2]:
                # Recorded before the run leaves `_running`: a result that cannot be
                # encoded must not lose the exit (its offset unfinished for good).
                self._record_exit(part, key[1], running, outcome, now_ms)
                if running.cancel_offset is not None:
                    self._finish(part, running.cancel_offset)
        del self._running[key]
        concurrency = running.run.job.concurrency
        if concurrency is not None:  # its key's slot is free only now, the job gone
            self._keys.exited(key, concurrency)
        return True

    def _record_exit(
        self, part: _Partition, offset: int, running: _Running, outcome: Outcome, now_ms: int
    ) -> None:
        cancelled = running.cancelled
        status = outcome.status if cancelled is None else RunStatus.CANCELLED
        try:
            self._record(
                part,
                offset,
                running.run,
                status,
                running.started_ms,
                now_ms,
                outcome.error if cancelled is None else cancelled,
                outcome.target if cancelled is None else None,
            )
        except (TypeError, ValueError):  # what the outcome carries is not JSON (a bug)
            # A cancelled attempt stays cancelled (final: a retry would run what was
            # stopped on purpose); any other becomes failed, so it is retried.
            self.counts["unencodable"] = self.counts.get("unencodable", 0) + 1
            self._record(
                part,
                offset,
                running.run,
                RunStatus.CANCELLED if status == RunStatus.CANCELLED else RunStatus.FAILED,
                running.started_ms,
                now_ms,
                UNENCODABLE_ERROR,
            )

    def progress(self, key: RunKey, details: Any, at_ms: int, now_ms: int) -> None:
        """The job of ``key`` reported progress (``ctx.heartbeat(details)`` at ``at_ms``).

        A ``running`` result carrying the details and the time goes out with the
        partition's next commit, at most one per `PROGRESS_INTERVAL_MS` per attempt.
        It finishes no offset and is not the attempt's result (docs/DESIGN.md §3.5):
        none is taken once the attempt is decided, asked to stop, dropped, or so late
        that its verdict is the shard's.
        """
        running = self._running.get(key)
        if running is None or running.decided or running.dropped or running.cancelled:
            return
        part = self._partitions.get(key[0])
        run = running.run
        if part is None or part.lease != key[2] or shard_decides(run.deadline_ms, now_ms):
            return
        last = running.progress_ms
        if last is not None and at_ms - last < PROGRESS_INTERVAL_MS:
            return
        running.progress_ms = at_ms
        value = self._result(
            run, PROGRESS_STATUS, running.started_ms, None, None, progress=(details, at_ms)
        )
        part.results.append(OutRecord(TopicKind.RESULTS, run.schedule_id.encode(), value))
        part.runs.append(run)
        part.dirty = True
        self.counts["progress"] += 1

    def _report_start(self, part: _Partition, run: Run, started_ms: int) -> None:
        """The run's schedule has a start deadline: its shard learns the start from a
        progress report (no details) in the partition's next commit, the one record a
        worker writes per attempt for it (docs/WORKER-PROTOCOL.md §8.3). It is not a
        job's heartbeat: the job's first ``ctx.heartbeat`` still goes out at once."""
        value = self._result(
            run, PROGRESS_STATUS, started_ms, None, None, progress=(None, started_ms)
        )
        part.results.append(OutRecord(TopicKind.RESULTS, run.schedule_id.encode(), value))
        part.runs.append(run)
        part.dirty = True
        self.counts["start_reports"] += 1

    def advance(self, now_ms: int) -> list[Action]:
        """Time passed: enforce deadlines and the lease."""
        actions: list[Action] = []
        silent_ms = now_ms - self._lease_renewed_ms
        if self._partitions and now_ms > self._lease_expires_ms():
            self.counts["leases_lost"] += 1
            lost = tuple(sorted(self._partitions))
            actions.append(LeaseLost(lost, silent_ms))
            for partition in lost:
                actions.extend(self.revoke(partition, "lease lost"))
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now_ms:
            _, key = heapq.heappop(deadlines)
            running = self._running.get(key)
            if running is None or running.decided or running.dropped:
                continue
            running.decided = True
            part = self._partitions[key[0]]
            if running.cancelled is not None:
                # Asked to stop and still running at its deadline (a sync job that
                # never calls ctx.heartbeat()): the attempt ends as it was asked to.
                self._record(
                    part,
                    key[1],
                    running.run,
                    RunStatus.CANCELLED,
                    running.started_ms,
                    now_ms,
                    {
                        "type": running.cancelled["type"],
                        "message": f"{running.cancelled['message']} (the job was still "
                        f"running at its deadline {format_ms(running.run.deadline_ms)})",
                    },
                )
                if running.cancel_offset is not None:
                    self._finish(part, running.cancel_offset)
                continue  # it was told to stop already
            self._record(
                part,
                key[1],
                running.run,
                RunStatus.TIMED_OUT,
                running.started_ms,
                now_ms,
                _timeout_error(running.run),
            )
            actions.append(CancelJob(key, "timeout"))
        # Woken by the other lane (a slot it left us, docs/DESIGN.md §8.4).
        woken = self._pool is not None and self._pool.take_wake(self._lane)
        if self._backlogged:
            actions.extend(self._refill(list(self._backlogged), now_ms))
            actions.extend(self._fill(now_ms))
        elif (
            woken
            or _reached(self._keys_due_ms, now_ms)
            or _reached(self.rates.due_ms, now_ms)
            or _reached(self._refused_past_lease_ms, now_ms)
        ):
            actions.extend(self._fill(now_ms))
        return actions

    def time_moved(self, moved_ms: int) -> None:
        """The worker's time moved ``moved_ms`` off the monotonic clock (`clock.TimeMoves`:
        a wall clock stepped, a clock behind raised to the broker's): the waits are
        moved with it, so each lasts as long as it was meant to. An adopted partition's
        keyed runs still wait out the previous owner's longest hold (§8.2), and a rate
        limit's bucket gains no token from the move (§8.5). The instants the broker
        judges (deadlines) stay where they are; held runs are judged again at once."""
        for part in self._partitions.values():
            part.keyed_from_ms += moved_ms
        self.rates.time_moved(moved_ms)
        self._keys_due_ms = 0

    def lease_moved(self, moved_ms: int) -> None:
        """A backward move of the worker's time (`WorkerMachine.time_moved`): the lease's
        instants move with it, so it holds no longer than its rule says."""
        self._lease_renewed_ms += moved_ms
        if self._lease_held_until_ms:
            self._lease_held_until_ms += moved_ms

    def lease_renewed(self, now_ms: int) -> None:
        """A group heartbeat succeeded at ``now_ms``: our partitions are still ours."""
        self._lease_renewed_ms = max(self._lease_renewed_ms, now_ms)

    def hold_lease_until(self, until_ms: int) -> None:
        """The lease holds until ``until_ms`` whatever the heartbeats (a rebalance we
        joined: the group cannot give our partitions away before then); 0 ends a hold."""
        self._lease_held_until_ms = until_ms

    def lease_holds(self, now_ms: int) -> bool:
        """The lease still holds at ``now_ms`` (the last instant included)."""
        return now_ms <= self._lease_expires_ms()

    def lease_ends_ms(self) -> int:
        """The last instant the lease holds, as the answers heard so far say."""
        return self._lease_expires_ms()

    def _lease_expires_ms(self) -> int:
        return max(self._lease_renewed_ms + self._lease_loss_ms, self._lease_held_until_ms)

    def next_due_ms(self, *, lease: bool = True) -> int | None:
        """When ``advance`` next has something to decide (None: nothing pending).

        ``lease=False`` leaves out the lease check: a caller that knows heartbeats
        are succeeding (the simulation, while its broker answers) needs no wake-up
        just to find that out.
        """
        due: int | None = None
        deadlines = self._deadlines
        while deadlines:  # drop entries of runs that exited or were decided already
            running = self._running.get(deadlines[0][1])
            if running is not None and not running.decided and not running.dropped:
                due = deadlines[0][0]
                break
            heapq.heappop(deadlines)
        if lease and self._partitions:
            lease_due = self._lease_expires_ms() + 1
            due = lease_due if due is None else min(due, lease_due)
        for other_due in (self._keys_due_ms, self._refused_past_lease_ms):
            if other_due is not None:
                due = other_due if due is None else min(due, other_due)
        rates_due = self.rates.due_ms
        if rates_due is not None:
            due = rates_due if due is None else min(due, rates_due)
        return due

    # --- commits ------------------------------------------------------------------

    def take_commit(self, partition: int) -> Commit | None:
        """What to write for ``partition`` now, or None (nothing new, or one in flight)."""
        part = self._partitions.get(partition)
        if part is None or part.in_commit is not None or not part.dirty:
            return None
        offsets = part.offsets
        commit = Commit(
            partition,
            offsets.commit_offset(),
            offsets.metadata(),
            tuple(part.results),
            tuple(part.runs),
            part.lease,
        )
        part.results.clear()
        part.runs.clear()
        part.dirty = False
        part.in_commit = commit
        return commit

    def commit_done(self, commit: Commit) -> None:
        part = self._partitions.get(commit.partition)
        if part is not None and part.in_commit is commit:
            part.offsets.mark_committed(commit.offset)
            part.in_commit = None

    def commit_failed(self, commit: Commit, now_ms: int | None = None, guard_ms: int = 0) -> None:
        """The transaction aborted for a passing reason: take it again later.

        With ``now_ms``: a result whose attempt the shard decides by ``now_ms +
        guard_ms`` (the earliest a retried transaction could commit) is not taken
        again: its offset stays finished, the shard writes ``timed_out`` and retries
        (counted as ``left_to_shard``). So no retry ever commits a result after the
        shard's own verdict, and failed commits cannot hold a result forever.
        """
        part = self._partitions.get(commit.partition)
        if part is None or part.in_commit is not commit:
            return
        results, runs = list(commit.results), list(commit.runs)
        if now_ms is not None and runs:
            kept = [
                i
                for i, run in enumerate(runs)
                if not shard_decides(run.deadline_ms, now_ms + guard_ms)
            ]
            self.counts["left_to_shard"] += len(results) - len(kept)
            results = [results[i] for i in kept]
            runs = [runs[i] for i in kept]
        part.results[:0] = results
        part.runs[:0] = runs
        part.dirty = True
        part.in_commit = None

    def commit_refused(self, commit: Commit, refused: Iterable[int], reason: str) -> None:
        """The broker refused the records of these results for good (too large, say);
        the transaction was aborted.

        A refused result is replaced by the smallest one that says what happened
        (status ``failed``, error ``ResultRefused``, the job's own error dropped); if
        that one was refused as well, the result is dropped and its offset stays
        finished: the shard decides the attempt at its deadline (``timed_out``,
        retried or dead-lettered), so the run still ends visibly.
        """
        part = self._partitions.get(commit.partition)
        if part is None or part.in_commit is not commit:
            return
        bad = set(refused)
        results: list[OutRecord] = []
        runs: list[Run] = []
        for i, (record, run) in enumerate(zip(commit.results, commit.runs, strict=True)):
            if i not in bad:
                results.append(record)
                runs.append(run)
                continue
            self.counts["refused"] += 1
            if _is_progress(record):
                continue  # a progress report is not the attempt's result: drop it
            why = {
                "type": "ResultRefused",
                "message": f"the broker refused this attempt's result record ({reason})",
            }
            value = self._result(run, RunStatus.FAILED, None, None, why)
            if record.value == value:  # the smallest one was refused too
                self.counts["left_to_shard"] += 1
                continue
            results.append(OutRecord(TopicKind.RESULTS, run.schedule_id.encode(), value))
            runs.append(run)
        part.results[:0] = results
        part.runs[:0] = runs
        part.dirty = True
        part.in_commit = None

    # --- views --------------------------------------------------------------------

    @property
    def running(self) -> int:
        """Jobs holding a slot (including timed-out ones that have not exited yet)."""
        return len(self._running)

    @property
    def queued(self) -> int:
        return len(self._queue)

    def queued_runs(self) -> list[Run]:
        """The runs waiting for a slot, a key or a rate limit (a view, for stats)."""
        return [run for _, run in self._queue]

    def running_runs(self) -> list[Run]:
        """The runs whose jobs hold a slot (a view, for the per-key metrics)."""
        return [running.run for running in self._running.values()]

    def committed_offset(self, partition: int) -> int | None:
        part = self._partitions.get(partition)
        return None if part is None else part.offsets.committed

    def stop_starting(self) -> None:
        """Drain: no queued run starts from now on (running jobs go on). The queued
        runs stay open in the partitions' commits, so their next owner runs them."""
        self._starting = False

    def drained(self) -> bool:
        """Nothing running, nothing waiting to be committed (queued runs aside: a
        draining worker leaves them to the next owner)."""
        return not self._running and all(
            not p.dirty and p.in_commit is None for p in self._partitions.values()
        )

    def drain_waits_for(self) -> str:
        """What ``drained`` still waits for, for the stop's log."""
        writing = sorted(p for p, part in self._partitions.items() if part.in_commit is not None)
        dirty = sorted(p for p, part in self._partitions.items() if part.dirty)
        return f"{len(self._running)} jobs running, commits in flight {writing}, unwritten {dirty}"

    def idle(self) -> bool:
        """Nothing running, queued, or waiting to be committed."""
        return (
            not self._running
            and not self._queue
            and not self._backlogged
            and all(not p.dirty and p.in_commit is None for p in self._partitions.values())
        )

    # --- internals ----------------------------------------------------------------

    def _refill(self, partitions: Iterable[int], now_ms: int) -> list[Action]:
        """Deliver backlog records of ``partitions`` while they have room for open runs."""
        actions: list[Action] = []
        for partition in partitions:
            part = self._partitions.get(partition)
            if part is None:
                continue
            backlog = part.backlog
            while backlog and part.offsets.held_count() < self._max_open:
                actions.extend(self._deliver(part, backlog.popleft(), now_ms))
            if not backlog:
                self._backlogged.discard(partition)
        return actions

    def _fill(self, now_ms: int) -> list[Action]:
        """Start queued runs while slots are free."""
        actions: list[Action] = []
        pool = self._pool
        self.rates.due_ms = None  # set again by the runs it holds
        self._refused_past_lease_ms = None
        self._keys_due_ms = None
        queue = self._queue
        if not queue:  # nothing waits (most calls, a run's exit among them): no more to do
            if pool is not None:
                pool.filled(self._lane, None)
            return actions
        past_lease = now_ms > self._lease_expires_ms()
        if not self._starting or past_lease:
            # Draining; or past the lease (a process thawed after a freeze handling a
            # batch or a job's exit before the turn that declares the lease lost): the
            # partitions may be another owner's by now, so nothing starts
            # (docs/DESIGN.md §8.2, §8.5). The next `advance` (due at once) drops
            # them, or fills if a heartbeat renewed the lease meanwhile.
            if past_lease and self._starting:
                self._refused_past_lease_ms = now_ms
            if pool is not None:
                pool.filled(self._lane, None)
            return actions
        refused: int | None = None  # the priority of a run the shared slots refused
        held: list[tuple[RunKey, Run]] = []
        keys = self._keys
        rates = self.rates
        while queue and len(self._running) < self._concurrency:
            key, run = queue.popleft()
            part = self._partitions[key[0]]
            if part.catch_up_to is not None:  # adopted, not read to its end yet
                held.append((key, run))
                continue
            job = run.job
            concurrency, rate = job.concurrency, job.rate_limit
            if run.deadline_ms <= now_ms:
                self._record(
                    part,
                    key[1],
                    run,
                    RunStatus.TIMED_OUT,
                    now_ms,
                    now_ms,
                    _timeout_error(run, started=False)
                    if rate is None
                    else rates.timeout_error(run, now_ms),
                )
                continue
            # One test for the common run, which names no key, no rate and no lane (a
            # per-run cost every worker pays: bench/worker_core.py).
            if concurrency is not None or rate is not None or pool is not None:
                if concurrency is not None:
                    # A held run is woken at its deadline too, and ended `timed_out`
                    # then (above), not left open until its key's slot frees.
                    if now_ms < part.keyed_from_ms:  # the previous owner's jobs may run
                        held.append((key, run))
                        self._keys_due(min(part.keyed_from_ms, run.deadline_ms))
                        continue
                    if keys.count(key[0], concurrency.key) >= concurrency.limit:
                        held.append((key, run))  # waits for a run of its key to exit
                        self._keys_due(run.deadline_ms)
                        self.counts["key_waits"] += 1
                        continue
                if pool is not None and not pool.may_start(self._lane, job.priority):
                    held.append((key, run))  # the other lane's turn, or the reserve's slots
                    refused = job.priority
                    break
                if rate is not None:  # last: a run it lets through takes its token
                    wait_until_ms = rates.take(key[0], rate, now_ms)
                    if wait_until_ms is not None:
                        held.append((key, run))
                        rates.hold(min(wait_until_ms, run.deadline_ms))
                        continue
                if concurrency is not None:
                    keys.started(key, concurrency, run)
                if pool is not None:
                    pool.started(self._lane)
            self._running[key] = _Running(run, now_ms)
            heapq.heappush(self._deadlines, (run.deadline_ms, key))
            self.counts["started"] += 1
            actions.append(StartJob(key, run))
            if run.report_start:
                self._report_start(part, run, now_ms)
        if held:
            queue.extendleft(reversed(held))
        if pool is not None:
            pool.filled(self._lane, refused)
        return actions

    def _keys_due(self, at_ms: int) -> None:
        due = self._keys_due_ms
        if due is None or at_ms < due:
            self._keys_due_ms = at_ms

    def _record(
        self,
        part: _Partition,
        offset: int,
        run: Run,
        status: RunStatus,
        started_ms: int | None,
        finished_ms: int,
        error: Mapping[str, str] | None,
        target: Mapping[str, Any] | None = None,
    ) -> None:
        if shard_decides(run.deadline_ms, finished_ms):
            # The shard has written (or is writing) timed_out for this attempt; a
            # result of ours would be a second one for the same (run_id, attempt).
            self.counts["left_to_shard"] += 1
            self._finish(part, offset)
            return
        value = self._result(
            run,
            status,
            started_ms,
            finished_ms,
            error if status != RunStatus.SUCCEEDED else None,
            target=target,
        )
        part.results.append(OutRecord(TopicKind.RESULTS, run.schedule_id.encode(), value))
        part.runs.append(run)
        self.counts[status] = self.counts.get(status, 0) + 1
        self._finish(part, offset)

    def _result(
        self,
        run: Run,
        status: RunStatus,
        started_ms: int | None,
        finished_ms: int | None,
        error: Mapping[str, str] | None,
        progress: tuple[Any, int] | None = None,
        target: Mapping[str, Any] | None = None,
    ) -> bytes:
        """The ``{ns}.results`` value of an attempt of ``run``, reported by this worker."""
        return result_value(
            run_id=run.run_id,
            schedule_id=run.schedule_id,
            task=run.task,
            attempt=run.attempt,
            status=status,
            scheduled_ms=run.scheduled_ms,
            started_ms=started_ms,
            finished_ms=finished_ms,
            worker=self._worker,
            error=error,
            progress=progress,
            target=target,
        )

    def _finish(self, part: _Partition, offset: int) -> None:
        part.offsets.finish(offset)
        part.dirty = True


def _is_progress(record: OutRecord) -> bool:
    try:
        return parse_result(record.value or b"").status == PROGRESS_STATUS
    except ValueError:
        return False


def _names(cancel: RunCancelRecord, run: Run) -> bool:
    return cancel.run_id == run.run_id and cancel.attempt == run.attempt


def _reached(due_ms: int | None, now_ms: int) -> bool:
    return due_ms is not None and now_ms >= due_ms


def _key_of(run: Run) -> str | None:
    concurrency = run.job.concurrency
    return None if concurrency is None else concurrency.key


def _key_error(key: str, limit: int, why: str) -> dict[str, str]:
    return {
        "type": CONCURRENCY_ERROR,
        "message": f"concurrency key {key!r} (limit {limit}): {why}",
    }


def _cancel_error(cancel: RunCancelRecord) -> dict[str, str]:
    return {"type": CANCELLED_ERROR, "message": cancel.reason}


def _timeout_error(run: Run, *, started: bool = True) -> dict[str, str]:
    deadline = format_ms(run.deadline_ms)
    if started:
        message = (
            f"run {run.run_id} attempt {run.attempt} was still running at its deadline {deadline}"
        )
    elif run.job.concurrency is not None:
        key = run.job.concurrency
        message = (
            f"run {run.run_id} attempt {run.attempt} reached its deadline {deadline} "
            f"before it started: waiting for a worker slot or for its concurrency key "
            f"{key.key!r} (limit {key.limit})"
        )
    else:
        message = (
            f"run {run.run_id} attempt {run.attempt} reached its deadline {deadline} "
            "before a worker slot was free; add workers or raise --concurrency"
        )
    return {"type": "Timeout", "message": message}
