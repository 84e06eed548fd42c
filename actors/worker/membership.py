"""The worker's membership as a pure state machine: which runs partitions it works on,
and when it may write for them.

Rules of this file: no asyncio, no Kafka, no clock reads. The executors (the aiokafka
runtime, ``runtime.py`` with ``committer.py``; the simulation, ``simulation/worker_node.py``)
report what happened with the time passed in and carry out the actions returned, in
order. ``WorkerCore`` (``core.py``) decides the runs; this machine decides ownership
around it and forwards the core's actions.

Theory of operation
-------------------
Inputs (methods)                              Outputs
  assigned(partitions, rejoined)                StartProducer / CloseProducer / CancelJob / Seek
  rebalance_started                             -
  producer_started(p, lease)                    ReadCommitted(p, lease)
  committed_read(p, lease, offset, metadata,    Seek(p, position), Resume(p), Owns;
                 end_offset)                    after a renewal: Write, or as fenced
  fetched_to(p, position)                       StartJob (caught up after adoption)
  adoption_failed(p, lease, reason)             CloseProducer(p, lease), WakeAt
  fenced(p, lease)                              CancelJob..., CloseProducer(p, lease)
  records(records)                              StartJob / Discarded
  job_exited(key, outcome)                      StartJob
  jobs_exited([(key, outcome), ...])            StartJob
  progress(key, details, at)                    - (a report in the next Write)
  commit_done / commit_failed / commit_refused  WakeAt
  commit_unknown                                StartProducer (a fresh producer; past
                                                the lease, as tick: LeaseLost)
  heartbeat                                     StartProducer (recovery)
  tick                                          Write(commit), CancelJob(timeout), LeaseLost,
                                                StartProducer (a retry), Pause / Resume, WakeAt
  stop / close                                  Pause everything / CloseProducer everything

Each partition the group assigns to us goes through

    adopting --producer_started--> reading --committed_read--> live
        |                             |                          |
        +------adoption_failed--------+--> backoff --tick--> adopting (a new lease)
                                                                 |
    live --fenced / lease lost--> lost --heartbeat--> adopting   |
    live --commit_unknown / too many failed commits--> adopting  +
    adopting, reading, backoff --lease lost--> lost

and leaves the machine when a new assignment no longer has it. Every adoption gets a
new ``lease`` (a number unique in this process): a producer, a committed-offset read,
a write and a fence all name the lease they belong to, and an answer naming an older
lease only closes what that lease started. So a process fenced by its own
re-adoption (the old producer's late ``ProducerFenced``) never drops the new one,
and a run delivered again under a new lease is a new ``RunKey``.

Rules:
- **Fence first, then read, then fetch.** ``StartProducer`` (``init_transactions``
  of ``{ns}.worker.{p}``) fences the previous owner; only then is the committed
  offset read (``ReadCommitted``), so it includes every transaction the previous
  owner completed. The core learns of ``p`` at ``committed_read`` and the same call
  returns ``Seek(p, where the core wants the next record)``: the executor applies it
  before it hands the machine any further record of ``p``.
- **Caught up before anything starts.** The executor reads the partition's last
  stable offset after the fence, with the committed offset, and reports the
  consumer's position (`fetched_to`) while the core says the partition is catching
  up: its runs are delivered as they come and start only once that end is
  reached, so a run and its cancel record committed before the adoption never
  start, however the fetches split them.
- **Nothing from a partition that is not live.** A partition being adopted (or lost,
  or backing off) is paused (``Pause``), and records of it that arrive anyway (a
  fetch already in flight; aiokafka returns records of a new assignment before the
  rebalance listener has run) are ignored. They are not lost: the ``Seek`` at
  ``committed_read`` fetches them again. Without that seek the consumer's position
  would have moved past them, and the offset tracker would take the first record it
  sees for the first one there is.
- **A kept partition is sought again after every rebalance.** The eager protocol
  revokes everything; aiokafka then restarts a kept partition's fetch from the
  committed offset, so ``assigned`` seeks each live partition to the core's position.
- **Adoption failures retry.** ``adoption_failed`` (a coordinator that is loading or
  moving, a timeout) closes what the attempt started and tries again after a backoff
  (``ADOPT_RETRY_MS`` doubling to ``ADOPT_RETRY_MAX_MS``) as long as the group
  assigns ``p`` to us: a partition is never left assigned and dead.
- **Fenced.** A producer of the current lease fenced means someone adopted ``p``
  after us: its runs are cancelled and their results dropped. If the group still
  assigns ``p`` to us (the fence came from our own earlier adoption, or from a
  zombie view of a newer owner), the next successful heartbeat proves the group
  has not moved on and ``p`` is adopted afresh; otherwise the coming rebalance says
  where it went.
- **Lease (Dropbox ATF's rule).** With no successful heartbeat for
  ``LeaseRules.lease_loss_ms`` the core drops every partition and cancels its jobs;
  the partitions are adopted again after the next successful heartbeat. During a
  rebalance we joined (``rebalance_started`` until ``assigned``) aiokafka sends no
  heartbeats at all, and the group cannot give our partitions to anyone before the
  rebalance ends or its timeout passes: the lease then holds until
  ``last heartbeat + rebalance_timeout_ms - heartbeat_interval_ms``. A heartbeat
  counts from when its request was *sent* (``heartbeat``/``assigned``'s ``sent_ms``):
  a process frozen between the broker's answer and reading it must not renew a
  lease the group has ended; a lost or newly assigned partition is adopted only by
  an answer sent after it was lost and read while the lease it renews holds. An
  assignment holds the lease until ``sent + session_timeout_ms -
  heartbeat_interval_ms`` (``LeaseRules.sync_hold_ms``): the coordinator restarted
  the member's session when it answered the SyncGroup, which a follower's request
  may wait for longer than the heartbeat rule (a slow leader). The lease ends an
  adoption too: the core reports ``LeaseLost`` only while it holds a live
  partition, so ``tick`` moves every partition being adopted, read or backed off to
  lost once the lease no longer holds (and says ``LeaseLost`` for them), and a
  ``producer_started`` or ``committed_read`` answered past the lease goes no further
  (a process thawed mid-adoption); going live does not renew the lease. Otherwise a
  worker cut from the group coordinator but reaching the transaction coordinator
  retried its adoptions for as long as the split lasted, each ``init_transactions``
  fencing the partition's new owner.
- **Writes.** ``Write(commit)`` carries results and the offset of one partition for
  one transaction; one is in flight per partition. A failed one (aborted, nothing
  visible) is taken again after ``COMMIT_RETRY_MS`` doubling to
  ``COMMIT_RETRY_MAX_MS``; after ``COMMIT_FAILURES_BEFORE_READOPT`` failures in a
  row, or one whose outcome is unknown, the partition is adopted afresh with a new
  producer (whose fence settles the old transaction; the committed offset read
  after it says what made it). A result whose attempt the shard decides itself
  (``topics.deadlines``) before a write could commit it (``COMMIT_GUARD_MS``) is
  not written: no retry commits after the shard's ``timed_out``.
- **A missing ACL parks the partition.** A transaction refused for authorization
  (``commit_denied``: Write on ``{ns}.results``, Read on the group; the executor
  names the ACL and the role that grants it) is aborted, so nothing of it is
  visible. Retrying at once, or adopting afresh, would only run the jobs again
  for results that cannot be written: instead the partition is paused (no new runs
  are fetched from it), its results are kept, and the same write is tried again
  after ``COMMIT_RETRY_MS`` doubling to ``DENIED_RETRY_MAX_MS``, with no
  re-adoption: only a fresh producer of the same lease (a refused batch leaves the
  idempotent producer's sequence numbers out of step with the broker's; see
  **Renewal** below). The
  refusal is noted when it starts and then once per ``DENIED_NOTE_INTERVAL_MS``;
  once the ACL is back the results and the offset commit together, the partition
  is resumed and a note says so. A result whose shard verdict comes first is
  dropped as on any failed commit.
- **Refused records end visibly.** A result record the broker refuses for good (too
  large for ``{ns}.results``, an invalid record) aborts the transaction (the
  executor reads every batch's outcome before it commits: aiokafka commits a
  transaction whose batch failed) and comes back as ``commit_refused``: the result is
  replaced by a small ``failed`` one with error ``ResultRefused`` (the shard retries
  or dead-letters it as any failure); if even that is refused, the shard's own
  ``timed_out`` at the deadline ends the attempt.
- **Renewal reads the committed offset again.** The fresh producer's
  ``init_transactions`` fences whoever holds ``{ns}.worker.{p}`` now, which is not
  necessarily our old producer: between the refused commit and the renewal ``p`` may
  have been adopted by another worker, which read our last commit, ran the runs
  again and committed their results. Writing ours then would make two visible
  results of one attempt and move the committed offset back (a transactional offset
  commit carries no group generation: the coordinator does not stop it). So, as at
  adoption, ``producer_started`` of a renewal answers ``ReadCommitted``, and
  ``committed_read`` compares the answer with what this lease last committed (or
  read at its adoption): the same, the kept results are written; different, the
  partition is handled as fenced (its results dropped, adopted afresh once a
  heartbeat proves the group still assigns it here).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

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
from topics.deadlines import shard_decides
from topics.records import InRecord

ADOPT_RETRY_MS = 500
ADOPT_RETRY_MAX_MS = 10_000
COMMIT_RETRY_MS = 500
COMMIT_RETRY_MAX_MS = 5_000
COMMIT_FAILURES_BEFORE_READOPT = 6
DENIED_RETRY_MAX_MS = 30_000
"""A partition whose writes are refused for a missing ACL is tried at most this rarely."""
DENIED_NOTE_INTERVAL_MS = 60_000
"""While a refusal lasts, its note is repeated at most this often."""
LEASE_LOSS_HEARTBEATS = 3
TRANSACTION_TIMEOUT_MS = 10_000
"""The workers' ``transaction.timeout.ms``: a transaction left open by a dead process
blocks read_committed readers of ``{ns}.results`` until the next owner's fence or
until the broker aborts it, whichever comes first (the client default is 30 s,
Kafka's own 60 s)."""
BROKER_TXN_CLEANUP_INTERVAL_MS = 10_000
"""How often the broker aborts timed-out transactions (its
``transaction.abort.timed.out.transaction.cleanup.interval.ms``, default 10 s): a dead
worker's transaction blocks ``{ns}.results`` for up to its timeout plus this."""
COMMIT_ROOM_MS = 5_000
"""The room a transaction that begins now has to commit."""
COMMIT_GUARD_MS = TRANSACTION_TIMEOUT_MS + BROKER_TXN_CLEANUP_INTERVAL_MS + COMMIT_ROOM_MS
"""How long before the shard's verdict a result stops being written (the executor
aborts instead of committing once it is inside this guard). A result must be
*visible* to the shard before its verdict, not only committed: another worker's
transaction left open by a kill -9 hides every later record of the shard's results
partition until the broker aborts it, up to the transaction timeout plus the
reaper's interval after it began (a new owner's fence usually ends it sooner, but
only once the dead member's session has expired). So a result is written only
while that whole wait, plus the room to commit, still ends before the verdict."""


@dataclass(frozen=True, slots=True)
class LeaseRules:
    """The group timings the lease rule is derived from (one place for every executor)."""

    session_timeout_ms: int = 10_000
    lease_loss_heartbeats: int = LEASE_LOSS_HEARTBEATS
    """0 turns the lease rule off (fencing alone stops zombies; tests use it)."""
    rebalance_timeout_ms: int | None = None
    """Default: twice the session, so a rebalance that waits for a dead member's
    session to expire ends well inside it."""

    def __post_init__(self) -> None:
        if self.session_timeout_ms < 500:
            raise ValueError(f"session_timeout_ms must be >= 500, got {self.session_timeout_ms}")
        if self.lease_loss_heartbeats < 0:
            raise ValueError("lease_loss_heartbeats must be >= 0")
        if self.rebalance_timeout_ms is not None and self.rebalance_timeout_ms < (
            self.session_timeout_ms
        ):
            raise ValueError("rebalance_timeout_ms must be at least session_timeout_ms")

    @property
    def heartbeat_interval_ms(self) -> int:
        return max(100, self.session_timeout_ms // 5)

    @property
    def rebalance_ms(self) -> int:
        if self.rebalance_timeout_ms is not None:
            return self.rebalance_timeout_ms
        return 2 * self.session_timeout_ms

    @property
    def lease_loss_ms(self) -> int:
        """Silence after which the partitions are dropped: below the session timeout,
        so the worker stops before the broker can give its partitions away."""
        if self.lease_loss_heartbeats <= 0:
            return NEVER_MS
        return self.lease_loss_heartbeats * self.heartbeat_interval_ms

    @property
    def rebalance_hold_ms(self) -> int:
        """How long after the last heartbeat a rebalance we joined holds the lease."""
        if self.lease_loss_heartbeats <= 0:
            return NEVER_MS
        return self.rebalance_ms - self.heartbeat_interval_ms

    @property
    def sync_hold_ms(self) -> int:
        """How long after a SyncGroup request was sent its answer holds the lease:
        the coordinator restarted the member's session when it answered, so the
        group cannot evict us for a session from then; less a heartbeat interval,
        the margin the lease rule keeps below the session too."""
        if self.lease_loss_heartbeats <= 0:
            return NEVER_MS
        return self.session_timeout_ms - self.heartbeat_interval_ms

    @property
    def adoption_wait_ms(self) -> int:
        """How long an adopted partition's keyed and rate-limited runs wait for the
        previous owner to stop (docs/DESIGN.md §8.2): the longest it may hold its
        lease, by the lease rule, a rebalance's hold or an assignment's. Computed from this
        worker's own timeouts: every worker of a queue must use the same ones.

        With the lease rule off (``lease_loss_heartbeats`` 0) a previous owner cut
        off from the group never stops by it (only its fence, at its next commit,
        stops it), so no wait covers it, and the rule's infinite wait meant keyed
        and rate-limited runs never started. The wait is then the hold the rule
        would give a rebalance: it covers an owner still heard by the group."""
        if self.lease_loss_heartbeats <= 0:
            return self.rebalance_ms - self.heartbeat_interval_ms
        return max(self.lease_loss_ms, self.rebalance_hold_ms, self.sync_hold_ms)


NEVER_MS = 1 << 62


# --- actions --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartProducer:
    """Start ``{ns}.worker.{partition}``'s producer (``init_transactions``: fences the
    previous holder); answer ``producer_started`` or ``adoption_failed``."""

    partition: int
    lease: int


@dataclass(frozen=True, slots=True)
class ReadCommitted:
    """Read the group's committed offset and metadata of the partition; answer
    ``committed_read`` or ``adoption_failed``."""

    partition: int
    lease: int


@dataclass(frozen=True, slots=True)
class Seek:
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Pause:
    partition: int


@dataclass(frozen=True, slots=True)
class Resume:
    partition: int


@dataclass(frozen=True, slots=True)
class Write:
    """Results and offset of ``commit.partition`` in one transaction of the producer
    of ``commit.lease``; answer ``commit_done``, ``commit_failed`` or ``commit_unknown``.
    The executor aborts instead of committing from ``abort_from_ms`` on."""

    commit: Commit
    abort_from_ms: int | None


@dataclass(frozen=True, slots=True)
class CloseProducer:
    """Stop the producer of this lease (bounded; then abandon it), if there is one."""

    partition: int
    lease: int


@dataclass(frozen=True, slots=True)
class WakeAt:
    """Call ``tick`` at ``at_ms`` (earlier is harmless)."""

    at_ms: int


@dataclass(frozen=True, slots=True)
class Owns:
    """The partitions now live here (for the log)."""

    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Note:
    """Something an operator should read (``warning``) or may read."""

    text: str
    warning: bool = False


Action = (
    StartJob
    | CancelJob
    | Discarded
    | LeaseLost
    | StartProducer
    | ReadCommitted
    | Seek
    | Pause
    | Resume
    | Write
    | CloseProducer
    | WakeAt
    | Owns
    | Note
)

ADOPTING = "adopting"
READING = "reading"
LIVE = "live"
BACKOFF = "backoff"
LOST = "lost"


@dataclass(slots=True)
class _Slot:
    state: str
    lease: int = -1
    producer: bool = False  # a producer of ``lease`` may exist (close it when leaving)
    since_ms: int = 0  # LOST: when; BACKOFF: when to retry
    adopt_failures: int = 0
    commit_failures: int = 0
    write_after_ms: int = 0
    denied: _Denied | None = None  # writes refused for a missing ACL
    # A refused batch still took its sequence number in the idempotent producer, so
    # the broker would answer the next one OutOfOrderSequenceNumber: the retry of a
    # denied write takes a fresh producer of the same lease (no re-adoption: we own
    # the partition and its aborted transaction left nothing to settle).
    renew_producer: bool = False
    renewing: bool = False  # that producer is starting, then the offset is read again
    # The committed offset and metadata as this lease last knew them (read at its
    # adoption, then each of its commits). The renewed producer's init_transactions
    # fences whoever holds ``{ns}.worker.{p}`` now, not only our old producer: a
    # different committed offset read after it means the partition was taken over in
    # between, and the kept results were run and reported there.
    committed: tuple[int, str | None] | None = None


@dataclass(slots=True)
class _Denied:
    text: str
    retry_ms: int
    noted_ms: int
    unnoted: int = 0


@dataclass(slots=True)
class MembershipCounts:
    denied: int = 0
    adoptions: int = 0
    adoption_failures: int = 0
    fenced: int = 0
    stale_answers: int = 0
    ignored_records: int = 0
    readoptions: int = 0
    commit_failures: int = 0
    refused: int = 0


class WorkerMachine:
    """Membership of one worker process around its ``WorkerCore``."""

    def __init__(self, core: WorkerCore, rules: LeaseRules, now_ms: int) -> None:
        self.core = core
        self.rules = rules
        self.counts = MembershipCounts()
        self._slots: dict[int, _Slot] = {}
        self._next_lease = 0
        self._paused: set[int] = set()  # what the executor was told
        self._live: tuple[int, ...] = ()
        self._last_heartbeat_ms = now_ms
        self._stopping = False
        self._next_wake_ms: int | None = None

    # --- views ----------------------------------------------------------------------

    @property
    def wanted(self) -> frozenset[int]:
        """The partitions the group assigns to us."""
        return frozenset(self._slots)

    def state(self, partition: int) -> str | None:
        slot = self._slots.get(partition)
        return None if slot is None else slot.state

    def lease(self, partition: int) -> int | None:
        slot = self._slots.get(partition)
        return None if slot is None or slot.state not in (ADOPTING, READING, LIVE) else slot.lease

    @property
    def live(self) -> tuple[int, ...]:
        return self._live

    @property
    def stopping(self) -> bool:
        return self._stopping

    # --- the group ------------------------------------------------------------------

    def rebalance_started(self, now_ms: int) -> list[Action]:
        """We are rejoining the group (aiokafka stops heartbeating until it ends)."""
        self.core.hold_lease_until(self._last_heartbeat_ms + self.rules.rebalance_hold_ms)
        return self._wake([])

    def assigned(
        self,
        partitions: Iterable[int],
        now_ms: int,
        *,
        rejoined: bool,
        sent_ms: int | None = None,
    ) -> list[Action]:
        """The group's new assignment for us (a rebalance ended; we are heard).

        ``sent_ms``: when the SyncGroup request this answers was sent (default
        ``now_ms``). The group had us when the broker handled it, which may be long
        before the answer is read: a process frozen in between would otherwise renew
        a lease the group has ended. The answer holds the lease until ``sent_ms +
        LeaseRules.sync_hold_ms`` (the session the coordinator restarted, less a
        heartbeat). An answer read when even that has run out (``now_ms`` past the
        lease) adopts nothing: the partitions wait, lost,
        for a heartbeat sent after now (`_heard`)."""
        heard_ms = self._heard(now_ms, sent_ms)
        # The coordinator restarted our session when it answered this SyncGroup, after
        # it was sent: the group cannot evict us before a session from the send. A
        # follower's request waits for the leader's, for longer than the lease rule's
        # heartbeats at times; renewed from its send alone, a healthy member found its
        # lease lost at the assignment and dropped its partitions. From here the hold
        # of the rebalance ends and heartbeats count again.
        self.core.hold_lease_until(heard_ms + self.rules.sync_hold_ms)
        fresh = self.core.lease_holds(now_ms)
        wanted = set(partitions)
        # A new assignment means new partition states in the consumer: unpaused,
        # fetching from the committed offset.
        self._paused.clear()
        actions: list[Action] = []
        for p in sorted(self._slots):
            if rejoined or p not in wanted:
                # Rejoined as a new member: whatever we kept may have been owned by
                # someone else meanwhile, so nothing is kept.
                actions.extend(self._drop(p, "rejoined the group" if p in wanted else "revoked"))
                del self._slots[p]
        for p in sorted(wanted):
            slot = self._slots.get(p)
            if slot is None:
                self._slots[p] = slot = _Slot(LOST, since_ms=now_ms)
                if fresh:
                    actions.extend(self._adopt(p, slot))
            elif slot.state == LIVE:
                position = self.core.fetch_position(p)
                if position is not None:
                    actions.append(Seek(p, position))
            elif slot.state == LOST and fresh and slot.since_ms < heard_ms:
                # Lost (fenced, the lease) after this request went out: the answer
                # says nothing of the group since, and a fence now could be the
                # partition's new owner's.
                actions.extend(self._adopt(p, slot))
        return self._settle(actions, now_ms)

    def heartbeat(self, now_ms: int, *, sent_ms: int | None = None) -> list[Action]:
        """A group heartbeat succeeded: the group still has us with this assignment.

        ``sent_ms``: when its request was sent (default ``now_ms``), the instant
        the lease is renewed from, as for `assigned`. A lost partition is adopted
        again only by an answer to a request sent after it was lost, and read while
        the lease that answer renews still holds."""
        heard_ms = self._heard(now_ms, sent_ms)
        if not self.core.lease_holds(now_ms):
            return []  # stale: the next tick finds the lease lost
        actions: list[Action] = []
        for p, slot in sorted(self._slots.items()):
            if slot.state == LOST and slot.since_ms < heard_ms:
                actions.append(Note(f"runs partition {p}: the group still assigns it here"))
                actions.extend(self._adopt(p, slot))
        return self._settle(actions, now_ms) if actions else []

    def _heard(self, now_ms: int, sent_ms: int | None) -> int:
        """Renew the lease from when the answered request was sent."""
        heard_ms = now_ms if sent_ms is None else min(sent_ms, now_ms)
        self._last_heartbeat_ms = max(self._last_heartbeat_ms, heard_ms)
        self.core.lease_renewed(heard_ms)
        return heard_ms

    # --- adoption -------------------------------------------------------------------

    def producer_started(self, partition: int, lease: int, now_ms: int) -> list[Action]:
        if not self.core.lease_holds(now_ms):
            return self._past_lease(partition, lease, now_ms)
        renewed = self._current(partition, lease, LIVE)
        if renewed is not None and renewed.renewing:
            # The fresh producer after a refusal fenced whoever holds the id now:
            # as at adoption, the committed offset is read before anything is written.
            renewed.renew_producer = False
            return [ReadCommitted(partition, lease)]
        slot = self._current(partition, lease, ADOPTING)
        if slot is None:
            self.counts.stale_answers += 1
            return [CloseProducer(partition, lease)]
        slot.state = READING
        return [ReadCommitted(partition, lease)]

    def committed_read(
        self,
        partition: int,
        lease: int,
        offset: int,
        metadata: str | None,
        now_ms: int,
        end_offset: int | None = None,
    ) -> list[Action]:
        """The committed offset (and metadata) read after the fence; ``end_offset``,
        the partition's last stable offset read then, is where its catch-up ends
        (`WorkerCore.assign`: no run starts before the consumer has read that far)."""
        if not self.core.lease_holds(now_ms):
            return self._past_lease(partition, lease, now_ms)
        renewed = self._current(partition, lease, LIVE)
        if renewed is not None and renewed.renewing and not renewed.renew_producer:
            return self._reread(partition, renewed, (offset, metadata), now_ms)
        slot = self._current(partition, lease, READING)
        if slot is None:
            self.counts.stale_answers += 1
            return []
        slot.state = LIVE
        slot.committed = (offset, metadata)
        slot.adopt_failures = 0
        slot.commit_failures = 0
        slot.write_after_ms = 0
        slot.denied = None  # a new adoption proves nothing yet; its first write will
        slot.renew_producer = slot.renewing = False
        self.counts.adoptions += 1
        core = self.core
        core.assign(partition, offset, metadata, now_ms, lease, end_offset)
        position = core.fetch_position(partition)
        actions: list[Action] = [Seek(partition, offset if position is None else position)]
        return self._settle(actions, now_ms)

    def _past_lease(self, partition: int, lease: int, now_ms: int) -> list[Action]:
        """An adoption's (or a renewal's) step answered past the lease: a process
        thawed mid-adoption reads it before the tick that finds the lease gone. It
        goes no further: that tick now, which loses every partition and closes the
        producers of their leases; then the answering producer, if older."""
        actions = self.tick(now_ms)
        self.counts.stale_answers += 1
        close = CloseProducer(partition, lease)
        if close not in actions:
            actions.insert(0, close)
        return actions

    def adoption_failed(self, partition: int, lease: int, reason: str, now_ms: int) -> list[Action]:
        actions: list[Action] = [CloseProducer(partition, lease)]
        slot = self._slots.get(partition)
        if slot is not None and slot.lease == lease and slot.state == LIVE and slot.renewing:
            # The fresh producer after a refusal did not start, or the committed
            # offset could not be read after it: a fresh one again later.
            slot.renewing = False
            slot.renew_producer = True
            slot.write_after_ms = now_ms + (slot.denied.retry_ms if slot.denied else ADOPT_RETRY_MS)
            actions.append(Note(f"runs partition {partition}: {reason}", warning=True))
            return self._settle(actions, now_ms)
        if slot is None or slot.lease != lease or slot.state not in (ADOPTING, READING):
            self.counts.stale_answers += 1
            return actions
        self.counts.adoption_failures += 1
        slot.producer = False
        slot.adopt_failures += 1
        delay = min(ADOPT_RETRY_MAX_MS, ADOPT_RETRY_MS << min(slot.adopt_failures - 1, 16))
        slot.state = BACKOFF
        slot.since_ms = now_ms + delay
        actions.append(
            Note(
                f"adopting runs partition {partition} failed ({reason}); "
                f"trying again in {delay} ms",
                warning=True,
            )
        )
        return self._settle(actions, now_ms)

    def fenced(self, partition: int, lease: int, now_ms: int) -> list[Action]:
        """The producer of ``lease`` was fenced (a newer ``init_transactions``)."""
        slot = self._slots.get(partition)
        if slot is None or slot.lease != lease or slot.state not in (ADOPTING, READING, LIVE):
            # An older producer of ours, fenced by our own newer adoption: close it only.
            self.counts.stale_answers += 1
            return [CloseProducer(partition, lease)]
        self.counts.fenced += 1
        actions = self._drop(partition, "fenced")
        slot.state = LOST
        slot.since_ms = now_ms
        actions.append(
            Note(
                f"producer of runs partition {partition} was fenced: another worker adopted "
                "it; its runs here are cancelled and not reported",
                warning=True,
            )
        )
        return self._settle(actions, now_ms)

    # --- runs -----------------------------------------------------------------------

    def records(self, records: Iterable[InRecord], now_ms: int) -> list[Action]:
        """Records fetched from ``{ns}.runs``; only a live partition's count."""
        actions: list[Action] = []
        core = self.core
        slots = self._slots
        for record in records:
            slot = slots.get(record.partition)
            if slot is None or slot.state != LIVE:
                self.counts.ignored_records += 1
                continue
            actions.extend(core.receive(record, now_ms, fill=False))
        # Jobs start after the whole batch is delivered: a run and its cancel record
        # fetched together (a new owner after a failover) never start the job.
        actions.extend(core.fill(now_ms))
        return actions

    def fetched_to(self, partition: int, position: int, now_ms: int) -> list[Action]:
        """The consumer's position in a partition still catching up after its
        adoption (`catching_up`); its runs start once it has reached the end."""
        slot = self._slots.get(partition)
        if slot is None or slot.state != LIVE:
            return []
        return list(self.core.caught_up(partition, position, now_ms))

    def catching_up(self) -> frozenset[int]:
        """Live partitions whose runs wait for the consumer to reach their end."""
        return self.core.catching_up()

    def job_exited(self, key: RunKey, outcome: Outcome, now_ms: int) -> list[Action]:
        return list(self.core.job_exited(key, outcome, now_ms))

    def jobs_exited(self, exits: Iterable[tuple[RunKey, Outcome]], now_ms: int) -> list[Action]:
        """The jobs that ended in one turn of the loop (`WorkerCore.jobs_exited`)."""
        return list(self.core.jobs_exited(exits, now_ms))

    def progress(self, key: RunKey, details: Any, at_ms: int, now_ms: int) -> list[Action]:
        """A running job's ``ctx.heartbeat(details)``: a progress report to write with
        the partition's next commit (`WorkerCore.progress`)."""
        self.core.progress(key, details, at_ms, now_ms)
        return []

    # --- writes ---------------------------------------------------------------------

    def commit_done(self, commit: Commit, now_ms: int) -> list[Action]:
        self.core.commit_done(commit)
        slot = self._slots.get(commit.partition)
        if slot is not None and slot.lease == commit.lease:
            slot.commit_failures = 0
            slot.committed = (commit.offset, commit.metadata)
            if slot.denied is not None:
                slot.denied = None
                note = Note(f"runs partition {commit.partition}: authorized again; resumed")
                return self._settle([note], now_ms)
        return []

    def commit_denied(self, commit: Commit, denied: str, now_ms: int) -> list[Action]:
        """The transaction was refused for a missing ACL and aborted (nothing of it is
        visible); ``denied`` names the operation, the resource and the granting role."""
        self.counts.denied += 1
        self.core.commit_failed(commit, now_ms, COMMIT_GUARD_MS)
        slot = self._slots.get(commit.partition)
        if slot is None or slot.lease != commit.lease or slot.state != LIVE:
            return []
        state = slot.denied
        if state is None:
            state = slot.denied = _Denied(denied, COMMIT_RETRY_MS, now_ms)
            noted = True
        else:
            state.retry_ms = min(DENIED_RETRY_MAX_MS, state.retry_ms * 2)
            state.unnoted += 1
            noted = denied != state.text or now_ms - state.noted_ms >= DENIED_NOTE_INTERVAL_MS
        slot.write_after_ms = now_ms + state.retry_ms
        slot.renew_producer = True
        actions: list[Action] = []
        if noted:
            again = f" (refused {state.unnoted} more times since)" if state.unnoted else ""
            state.text, state.noted_ms, state.unnoted = denied, now_ms, 0
            actions.append(
                Note(
                    f"runs partition {commit.partition}: {denied}{again}. The transaction was"
                    " aborted: nothing of it is visible. No more runs are fetched from this"
                    f" partition; its results are kept and written again in {state.retry_ms} ms"
                    f" (then at most every {DENIED_RETRY_MAX_MS // 1000} s) until the ACL is"
                    " granted",
                    warning=True,
                )
            )
        return self._settle(actions, now_ms)

    def commit_failed(self, commit: Commit, reason: str, now_ms: int) -> list[Action]:
        """The transaction was aborted (nothing of it is visible)."""
        self.counts.commit_failures += 1
        self.core.commit_failed(commit, now_ms, COMMIT_GUARD_MS)
        slot = self._slots.get(commit.partition)
        if slot is None or slot.lease != commit.lease or slot.state != LIVE:
            return []
        slot.commit_failures += 1
        if slot.commit_failures >= COMMIT_FAILURES_BEFORE_READOPT:
            why = f"{slot.commit_failures} commits failed in a row ({reason})"
            return self._readopt(commit, why, now_ms, recorded=True)
        delay = min(COMMIT_RETRY_MAX_MS, COMMIT_RETRY_MS << (slot.commit_failures - 1))
        slot.write_after_ms = now_ms + delay
        return self._wake(
            [
                Note(
                    f"commit of runs partition {commit.partition} failed ({reason}); "
                    f"retrying in {delay} ms",
                    warning=True,
                )
            ]
        )

    def commit_refused(
        self, commit: Commit, refused: Iterable[int], reason: str, now_ms: int
    ) -> list[Action]:
        """The transaction was aborted because the broker refused these results'
        records for good (``commit.results`` indices): too large for ``{ns}.results``,
        say. Retrying the same records would fail forever; the core replaces them
        (``WorkerCore.commit_refused``) and the rest is written again at once, by a
        fresh producer of the same lease."""
        bad = sorted(set(refused))
        self.counts.refused += len(bad)
        self.core.commit_refused(commit, bad, reason)
        slot = self._slots.get(commit.partition)
        if slot is not None and slot.lease == commit.lease and slot.state == LIVE:
            # A refused batch leaves the idempotent producer's sequence numbers out of
            # step with the broker's: every later write of this producer would fail
            # with OutOfOrderSequenceNumber (and the re-adoption after six would run
            # the refused attempt again, for ever). A fresh producer of the same lease
            # writes the replacements (`producer_started`).
            slot.renew_producer = True
            slot.write_after_ms = 0
        return self._wake(
            [
                Note(
                    f"runs partition {commit.partition}: the broker refused {len(bad)} result "
                    f"records ({reason}); they are written again as ResultRefused failures "
                    "without the job's error, or left to the shard's timed_out; raise "
                    "max.message.bytes of the results topic if results are this large",
                    warning=True,
                )
            ]
        )

    def commit_unknown(self, commit: Commit, reason: str, now_ms: int) -> list[Action]:
        """The transaction's outcome is unknown (its producer is unusable)."""
        self.counts.commit_failures += 1
        slot = self._slots.get(commit.partition)
        if slot is None or slot.lease != commit.lease or slot.state != LIVE:
            self.core.commit_failed(commit, now_ms, COMMIT_GUARD_MS)
            return []
        return self._readopt(commit, f"commit outcome unknown ({reason})", now_ms, recorded=False)

    # --- time -------------------------------------------------------------------------

    def time_moved(self, moved_ms: int) -> None:
        """The worker's time moved off the monotonic clock (`clock.TimeMoves`): the
        core's waits move with it (`WorkerCore.time_moved`), and a backward move moves the
        lease's instants too. A clock ahead of the broker's (which the floor cannot see)
        stepped back by NTP would otherwise hold the lease for the whole step after the
        group gave the partitions away: runs started twice. A forward move leaves the
        lease as it is: it may be time the monotonic clock did not count (a suspended
        host), and then ending the lease sooner is right."""
        self.core.time_moved(moved_ms)
        if moved_ms >= 0:
            return
        self.core.lease_moved(moved_ms)
        self._last_heartbeat_ms += moved_ms
        for slot in self._slots.values():
            slot.since_ms += moved_ms  # a loss's instant, or a backoff's end
            if slot.write_after_ms:
                slot.write_after_ms += moved_ms

    def tick(self, now_ms: int) -> list[Action]:
        """Time passed: deadlines, the lease, retries; then writes, pauses, the next wake."""
        core = self.core
        actions: list[Action] = list(core.advance(now_ms))
        reported = any(isinstance(a, LeaseLost) for a in actions)
        if reported or not core.lease_holds(now_ms):
            # The core reports LeaseLost only while it holds a live partition: the
            # partitions being adopted, read or backed off go with the lease too, or
            # a worker cut from the group coordinator (and reaching the transaction
            # coordinator) would keep retrying, each init_transactions fencing the
            # partition's new owner.
            lapsed = []
            for p, slot in sorted(self._slots.items()):
                if slot.state in (ADOPTING, READING, LIVE, BACKOFF):
                    if slot.producer:
                        actions.append(CloseProducer(p, slot.lease))
                    slot.producer = False
                    slot.state = LOST
                    slot.since_ms = now_ms
                    lapsed.append(p)
            if lapsed and not reported:
                actions.append(LeaseLost(tuple(lapsed), now_ms - self._last_heartbeat_ms))
        for p, slot in sorted(self._slots.items()):
            if slot.state == BACKOFF and slot.since_ms <= now_ms:
                actions.extend(self._adopt(p, slot))
        for p, slot in sorted(self._slots.items()):
            if slot.state == LIVE and slot.write_after_ms <= now_ms and not slot.renewing:
                slot.write_after_ms = 0
                if slot.renew_producer:
                    slot.renewing = True
                    actions += [CloseProducer(p, slot.lease), StartProducer(p, slot.lease)]
                    continue
                actions.extend(self._write(p, now_ms))
        return self._settle(actions, now_ms)

    def stop(self, now_ms: int) -> list[Action]:
        """Drain: every partition paused, no queued run starts; running jobs and
        writes go on."""
        self._stopping = True
        self.core.stop_starting()
        return self._settle([], now_ms)

    def close(self, now_ms: int) -> list[Action]:
        """The process ends: cancel everything, close every producer."""
        actions: list[Action] = []
        for p in sorted(self._slots):
            actions.extend(self._drop(p, "worker stopping"))
        self._slots.clear()
        self._live = ()
        return actions

    def awaits_heartbeat(self) -> bool:
        """A partition lost (fenced, or the lease) waits for the next successful
        heartbeat to be adopted again: an executor that reports heartbeats only when
        it runs (the simulation) must run at the next one. Not a wake-up time: while
        heartbeats fail it would be due at once, for ever."""
        return any(slot.state == LOST for slot in self._slots.values())

    def next_wake_ms(self, *, lease: bool = True) -> int | None:
        """When ``tick`` next has something to do (None: nothing pending).

        ``lease=False`` leaves out the lease check: an executor that knows heartbeats
        are succeeding (the simulation, while its member is heard) needs no wake-up
        just to find that out.
        """
        core = self.core
        due = core.next_due_ms(lease=lease)
        for slot in self._slots.values():
            at = None
            if slot.state == BACKOFF:
                at = slot.since_ms
            elif slot.state == LIVE and slot.write_after_ms:
                at = slot.write_after_ms
            if lease and slot.state in (ADOPTING, READING, BACKOFF):
                # The core's lease check covers live partitions only.
                ends = core.lease_ends_ms() + 1
                at = ends if at is None else min(at, ends)
            if at is not None and (due is None or at < due):
                due = at
        return due

    # --- internals --------------------------------------------------------------------

    def _current(self, partition: int, lease: int, state: str) -> _Slot | None:
        slot = self._slots.get(partition)
        if slot is None or slot.lease != lease or slot.state != state:
            return None
        return slot

    def _adopt(self, partition: int, slot: _Slot) -> list[Action]:
        self._next_lease += 1
        slot.lease = self._next_lease
        slot.state = ADOPTING
        slot.producer = True
        return [StartProducer(partition, slot.lease)]

    def _drop(self, partition: int, reason: str) -> list[Action]:
        """Leave ``partition``: cancel its runs, drop its results, close its producer."""
        actions: list[Action] = list(self.core.revoke(partition, reason))
        slot = self._slots.get(partition)
        if slot is not None and slot.producer:
            actions.append(CloseProducer(partition, slot.lease))
            slot.producer = False
        return actions

    def _readopt(self, commit: Commit, reason: str, now_ms: int, *, recorded: bool) -> list[Action]:
        """Adopt ``commit``'s partition afresh after its write failed (``recorded``: the
        core already has the failure)."""
        partition = commit.partition
        if not self.core.lease_holds(now_ms):
            # Read past the lease (a thawed process whose queued write step runs before
            # the overdue tick): a StartProducer now would fence the partition's new
            # owner. The tick loses every partition; the next heartbeat re-adopts.
            if not recorded:
                self.core.commit_failed(commit, now_ms, COMMIT_GUARD_MS)
            return self.tick(now_ms)
        self.counts.readoptions += 1
        slot = self._slots[partition]
        actions = self._drop(partition, reason)
        actions.append(
            Note(
                f"runs partition {partition}: {reason}; adopting it afresh with a new producer",
                warning=True,
            )
        )
        actions.extend(self._adopt(partition, slot))
        return self._settle(actions, now_ms)

    def _reread(
        self, partition: int, slot: _Slot, committed: tuple[int, str | None], now_ms: int
    ) -> list[Action]:
        """The committed offset read after a renewed producer started."""
        slot.renewing = False
        if committed == slot.committed:
            return self._settle(self._write(partition, now_ms), now_ms)
        # Someone adopted the partition between our refused commit and this fence,
        # ran its runs from our last commit and committed past it: our kept results
        # are theirs to report (ours would be a second visible result), and the
        # committed offset must not go back. As a fence: drop and wait to be heard.
        self.counts.fenced += 1
        actions = self._drop(partition, "taken over")
        slot.state = LOST
        slot.since_ms = now_ms
        actions.append(
            Note(
                f"runs partition {partition}: its committed offset moved while a refused "
                f"commit waited ({slot.committed} then {committed}): another worker adopted "
                "it; the results kept here are dropped",
                warning=True,
            )
        )
        return self._settle(actions, now_ms)

    def _write(self, partition: int, now_ms: int) -> list[Action]:
        core = self.core
        commit = core.take_commit(partition)
        if commit is None:  # nothing to write, or a write in flight
            return []
        if any(shard_decides(d, now_ms + COMMIT_GUARD_MS) for d in commit.deadlines):
            # Too late for some of them: the shard's verdict comes first. Hand the rest
            # back and take them again without the late ones.
            core.commit_failed(commit, now_ms, COMMIT_GUARD_MS)
            commit = core.take_commit(partition)
            if commit is None:
                return []
        commit_by = commit.commit_by_ms
        return [Write(commit, None if commit_by is None else commit_by - COMMIT_GUARD_MS)]

    def _settle(self, actions: list[Action], now_ms: int) -> list[Action]:
        """Append the pause changes, the ``Owns`` change and the next wake-up."""
        core = self.core
        full = core.paused()
        wanted: set[int] = set()
        for p, slot in self._slots.items():
            if self._stopping or slot.state != LIVE or p in full or slot.denied is not None:
                wanted.add(p)
        for p in sorted(wanted - self._paused):
            actions.append(Pause(p))
        for p in sorted(self._paused - wanted):
            if p in self._slots:
                actions.append(Resume(p))
        self._paused = wanted
        live = tuple(sorted(p for p, s in self._slots.items() if s.state == LIVE))
        settled = all(s.state not in (ADOPTING, READING) for s in self._slots.values())
        if live != self._live and (settled or not set(self._live) <= set(live)):
            # Said once the adoptions under way have ended (or when one is lost).
            self._live = live
            actions.append(Owns(live))
        return self._wake(actions)

    def _wake(self, actions: list[Action]) -> list[Action]:
        due = self.next_wake_ms()
        self._next_wake_ms = due
        if due is not None:
            actions.append(WakeAt(due))
        return actions
