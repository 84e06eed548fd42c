"""The worker's membership machine driven by events alone: no Kafka, no clock, no asyncio.

Each test names the finding of the runtime review it pins down (issue 12).
"""

from __future__ import annotations

from actors.worker.core import CancelJob, LeaseLost, Outcome, StartJob, WorkerCore
from actors.worker.membership import (
    ADOPT_RETRY_MS,
    COMMIT_FAILURES_BEFORE_READOPT,
    COMMIT_GUARD_MS,
    COMMIT_RETRY_MS,
    LIVE,
    Action,
    CloseProducer,
    LeaseRules,
    Pause,
    ReadCommitted,
    Resume,
    Seek,
    StartProducer,
    WorkerMachine,
    Write,
)
from actors.worker.offsets import MAX_OPEN_PER_PARTITION, PartitionOffsets
from tests.worker.test_worker_core import T0, run_record
from topics.deadlines import TIMEOUT_MARGIN_MS
from topics.messages import parse_result

RULES = LeaseRules(session_timeout_ms=10_000)  # heartbeat 2 s, lease 6 s, rebalance 20 s
LOST_MS = T0 + RULES.sync_hold_ms + 1
"""When a machine assigned at T0 and heard no more loses its lease: the assignment
holds it for the session less a heartbeat (8 s), past the heartbeat rule's 6 s."""


def make_machine(concurrency: int = 4) -> WorkerMachine:
    core = WorkerCore(
        worker="w1",
        concurrency=concurrency,
        known_job=lambda name: name in {"noop", "slow"},
        now_ms=T0,
        lease_loss_ms=RULES.lease_loss_ms,
    )
    return WorkerMachine(core, RULES, T0)


def of(actions: list[Action], kind: type) -> list:  # type: ignore[type-arg]
    return [a for a in actions if isinstance(a, kind)]


def adopt(
    m: WorkerMachine, p: int, offset: int = 0, metadata: str | None = None, now: int = T0
) -> tuple[int, list[Action]]:
    """Drive the adoption of ``p`` (already assigned) to live; (lease, actions)."""
    lease = m.lease(p)
    assert lease is not None
    assert of(m.producer_started(p, lease, now), ReadCommitted) == [ReadCommitted(p, lease)]
    return lease, m.committed_read(p, lease, offset, metadata, now)


def live_machine(*partitions: int) -> WorkerMachine:
    m = make_machine()
    m.assigned(partitions, T0, rejoined=False)
    for p in partitions:
        adopt(m, p)
    return m


# --- finding 2: records of a partition being adopted ------------------------------


def test_a_partition_being_adopted_is_paused_and_its_records_are_ignored() -> None:
    m = make_machine()
    actions = m.assigned([0], T0, rejoined=False)
    [start] = of(actions, StartProducer)
    assert Pause(0) in actions
    # aiokafka returns records of the new assignment before the listener has run
    # (and a fetch in flight is not stopped by a pause): they must not count.
    assert m.records([run_record(o) for o in range(5, 9)], T0) == []
    assert m.core.assigned == frozenset() and m.counts.ignored_records == 4
    m.producer_started(0, start.lease, T0)
    actions = m.committed_read(0, start.lease, 3, "k1 4 2", T0)  # open: 3 and 5
    # The seek comes first, to the first open offset, then the fetch resumes there.
    assert actions.index(Seek(0, 3)) < actions.index(Resume(0))
    started = of(m.records([run_record(o) for o in range(3, 9)], T0), StartJob)
    assert [a.key[1] for a in started] == [3, 5, 7, 8]


def test_the_old_bug_the_first_record_after_a_skipped_window_finishes_the_open_ones() -> None:
    """Why the seek matters: without it the tracker takes a later record for the first
    one there is, and the commit jumps past open runs that never ran."""
    offsets = PartitionOffsets(3, "k1 4 2")  # open 3 and 5, end 7
    assert offsets.deliver(8)  # records 3..7 were dropped during adoption
    assert offsets.commit_offset() == 8  # 3 and 5 were never run, and are skipped


def test_after_a_lost_lease_the_partition_is_adopted_again_from_its_commit() -> None:
    m = live_machine(0)
    m.records([run_record(0), run_record(1)], T0)
    m.job_exited((0, 1, m.lease(0) or 0), Outcome("succeeded"), T0 + 10)
    assert of(m.tick(LOST_MS - 1), LeaseLost) == []
    lost = m.tick(LOST_MS)
    assert of(lost, LeaseLost) and of(lost, CloseProducer)
    assert m.state(0) == "lost" and m.core.assigned == frozenset()
    # The consumer kept fetching meanwhile: nothing of that counts.
    assert m.records([run_record(o) for o in range(2, 6)], LOST_MS + 1_000) == []
    [again] = of(m.heartbeat(LOST_MS + 2_000), StartProducer)
    m.producer_started(0, again.lease, LOST_MS + 2_000)
    actions = m.committed_read(0, again.lease, 0, None, LOST_MS + 2_000)
    assert Seek(0, 0) in actions  # not wherever the consumer had got to


def test_a_kept_partition_is_sought_back_to_the_core_position_after_a_rebalance() -> None:
    m = live_machine(0, 1)
    m.records([run_record(0), run_record(1)], T0)
    m.rebalance_started(T0 + 100)
    actions = m.assigned([0], T0 + 200, rejoined=False)
    assert Seek(0, 2) in actions
    assert of(actions, CancelJob) == []  # 0 kept; 1 had nothing running
    assert m.wanted == frozenset({0}) and m.state(0) == LIVE


def test_a_partition_handed_over_full_is_resumed_and_its_open_runs_run() -> None:
    """The previous owner committed at the open-runs limit (a herd backlog when its
    lease ran out). The new owner must fetch and run those runs: paused until some of
    them finish, it would wait forever for runs it never fetches (internet-midnight,
    seed 1: every run of the partition after the hand-over was lost)."""
    full = PartitionOffsets(0)
    for o in range(MAX_OPEN_PER_PARTITION + 1):
        full.deliver(o)
    full.finish(0)
    assert full.open_count() == MAX_OPEN_PER_PARTITION
    m = make_machine(concurrency=MAX_OPEN_PER_PARTITION)
    m.assigned([0], T0, rejoined=False)
    _, actions = adopt(m, 0, full.commit_offset(), full.metadata())
    assert Seek(0, 1) in actions and Resume(0) in actions and 0 not in m.core.paused()
    records = [run_record(o) for o in range(1, MAX_OPEN_PER_PARTITION + 3)]
    started = of(m.records(records, T0), StartJob)
    assert [a.key[1] for a in started] == list(range(1, MAX_OPEN_PER_PARTITION + 1))
    # Now full of runs it holds itself; the rest still fetched, into its backlog.
    assert m.core.fetch_position(0) == MAX_OPEN_PER_PARTITION + 3


# --- finding 3: a run delivered again in the same process -------------------------


def test_a_run_delivered_again_after_a_readoption_is_a_new_key() -> None:
    m = live_machine(0)
    [first] = of(m.records([run_record(0)], T0), StartJob)
    # lease lost: the job is asked to stop
    assert of(m.tick(LOST_MS), CancelJob) == [CancelJob(first.key, "lease lost")]
    back = LOST_MS + 1_000
    [again] = of(m.heartbeat(back), StartProducer)
    m.producer_started(0, again.lease, back)
    m.committed_read(0, again.lease, 0, None, back)
    [second] = of(m.records([run_record(0)], back), StartJob)
    assert first.key != second.key and first.key[:2] == second.key[:2]
    # The first job (a sync job that ignored the cancel) exits late: nothing recorded
    # for the second one, whose own exit is then recorded.
    m.job_exited(first.key, Outcome("cancelled"), back + 100)
    assert m.core.running == 1
    m.job_exited(second.key, Outcome("succeeded"), back + 200)
    [write] = of(m.tick(back + 200), Write)
    assert [parse_result(r.value or b"").status for r in write.commit.results] == ["succeeded"]


# --- finding 4: failed adoptions, fences by ourselves ------------------------------


def test_a_failed_adoption_closes_its_producer_and_is_retried_with_a_new_lease() -> None:
    m = make_machine()
    [first] = of(m.assigned([0], T0, rejoined=False), StartProducer)
    actions = m.adoption_failed(0, first.lease, "COORDINATOR_LOAD_IN_PROGRESS", T0)
    assert CloseProducer(0, first.lease) in actions
    assert of(m.tick(T0 + ADOPT_RETRY_MS - 1), StartProducer) == []
    [retry] = of(m.tick(T0 + ADOPT_RETRY_MS), StartProducer)
    assert retry.partition == 0 and retry.lease != first.lease
    m.producer_started(0, retry.lease, T0 + ADOPT_RETRY_MS)
    actions = m.adoption_failed(0, retry.lease, "NOT_COORDINATOR", T0 + ADOPT_RETRY_MS)
    assert CloseProducer(0, retry.lease) in actions
    # Backoff doubles, and the partition keeps being retried while it is assigned.
    assert of(m.tick(T0 + 2 * ADOPT_RETRY_MS), StartProducer) == []
    [third] = of(m.tick(T0 + 3 * ADOPT_RETRY_MS), StartProducer)
    _, live = adopt(m, 0, now=T0 + 3 * ADOPT_RETRY_MS)
    assert m.state(0) == LIVE and Seek(0, 0) in live and third.lease == m.lease(0)


def test_a_late_answer_of_an_old_adoption_only_closes_what_it_started() -> None:
    m = make_machine()
    [first] = of(m.assigned([0], T0, rejoined=False), StartProducer)
    m.adoption_failed(0, first.lease, "timeout", T0)
    [retry] = of(m.tick(T0 + ADOPT_RETRY_MS), StartProducer)
    # The first producer's start finally answers: it is closed, not used.
    assert m.producer_started(0, first.lease, T0 + 600) == [CloseProducer(0, first.lease)]
    assert m.lease(0) == retry.lease


def test_a_fence_of_an_older_producer_of_ours_does_not_drop_the_new_adoption() -> None:
    m = live_machine(0)
    old = m.lease(0)
    assert old is not None
    m.records([run_record(0)], T0)
    # Lease lost, adopted again: the old producer's write is then fenced by our own
    # new producer.
    assert of(m.tick(LOST_MS), LeaseLost)
    back = LOST_MS + 1_000
    [again] = of(m.heartbeat(back), StartProducer)
    m.producer_started(0, again.lease, back)
    m.committed_read(0, again.lease, 0, None, back)
    m.records([run_record(0)], back)
    assert m.fenced(0, old, back + 100) == [CloseProducer(0, old)]
    assert m.state(0) == LIVE and m.core.running == 2  # the new run is untouched


def test_a_fence_of_the_current_producer_drops_the_partition_until_heard_again() -> None:
    m = live_machine(0)
    lease = m.lease(0)
    assert lease is not None
    m.records([run_record(0)], T0)
    actions = m.fenced(0, lease, T0 + 100)
    assert of(actions, CancelJob) and CloseProducer(0, lease) in actions
    assert m.state(0) == "lost" and Pause(0) in actions
    [again] = of(m.heartbeat(T0 + 2_000), StartProducer)
    assert again.lease != lease


def test_a_lost_partition_says_it_awaits_the_heartbeat_that_proves_it_ours() -> None:
    # An executor that reports heartbeats only when it runs (the simulation, which
    # leaves the lease check out while its member is heard) must still run then:
    # nothing else was due, and the fenced partition stayed assigned and dead
    # (fx-rates-90s, seed 25: a cancel_other run on it never ended).
    m = live_machine(0)
    lease = m.lease(0)
    assert lease is not None
    assert not m.awaits_heartbeat()
    m.fenced(0, lease, T0 + 100)
    assert m.awaits_heartbeat()
    m.heartbeat(T0 + 2_000)
    assert not m.awaits_heartbeat()  # adopting it again


# --- finding 6: a rebalance is not a lost lease ----------------------------------


def test_a_rebalance_we_joined_holds_the_lease_past_the_heartbeat_rule() -> None:
    m = live_machine(0)
    m.records([run_record(0)], T0)
    m.rebalance_started(T0 + 1_000)  # heartbeats stop during JoinGroup/SyncGroup
    # A dead member still holds its session: the join waits for it (up to 10 s).
    assert of(m.tick(T0 + 9_000), LeaseLost) == []
    synced = T0 + 9_500
    m.assigned([0], synced, rejoined=False)
    assert m.core.running == 1 and m.state(0) == LIVE
    # Once the rebalance is over, its hold ends: the assignment's (the session the
    # coordinator restarted at the SyncGroup, less a heartbeat), then the heartbeat
    # rule, end the lease before the rebalance's hold would have.
    rebalance_hold_end = T0 + RULES.rebalance_hold_ms
    assert synced + RULES.sync_hold_ms < rebalance_hold_end
    assert of(m.tick(synced + RULES.sync_hold_ms), LeaseLost) == []
    assert of(m.tick(synced + RULES.sync_hold_ms + 1), LeaseLost)


def test_a_rebalance_that_outlasts_its_timeout_loses_the_lease() -> None:
    m = live_machine(0)
    m.records([run_record(0)], T0)
    m.rebalance_started(T0)
    hold = RULES.rebalance_hold_ms
    assert hold < RULES.rebalance_ms and hold > RULES.session_timeout_ms
    assert of(m.tick(T0 + hold), LeaseLost) == []
    assert of(m.tick(T0 + hold + 1), LeaseLost)


# --- finding 8: failed commits are bounded ----------------------------------------


def _finished(m: WorkerMachine, offset: int, now: int, deadline_ms: int) -> Write:
    [start] = of(m.records([run_record(offset, deadline_ms=deadline_ms)], now), StartJob)
    m.job_exited(start.key, Outcome("succeeded"), now)
    [write] = of(m.tick(now), Write)
    return write


def test_failed_commits_back_off_and_then_readopt_with_a_new_producer() -> None:
    m = live_machine(0)
    lease = m.lease(0)
    now = T0
    write = _finished(m, 0, now, deadline_ms=T0 + 3_600_000)
    delays = []
    for _ in range(COMMIT_FAILURES_BEFORE_READOPT - 1):
        m.commit_failed(write.commit, "NOT_ENOUGH_REPLICAS", now)
        m.heartbeat(now)  # the group still has us: only the writes fail
        [wake] = [a.at_ms for a in m.tick(now) if hasattr(a, "at_ms")]
        delays.append(wake - now)
        assert of(m.tick(wake - 1), Write) == []
        now = wake
        [write] = of(m.tick(now), Write)
    assert delays == sorted(delays) and delays[0] == COMMIT_RETRY_MS and delays[-1] > delays[0]
    actions = m.commit_failed(write.commit, "NOT_ENOUGH_REPLICAS", now)
    assert CloseProducer(0, lease or 0) in actions
    [fresh] = of(actions, StartProducer)
    assert fresh.lease != lease


def test_a_result_is_not_written_again_once_the_shard_decides_its_attempt() -> None:
    m = live_machine(0)
    deadline = T0 + 60_000
    write = _finished(m, 0, T0, deadline_ms=deadline)
    assert write.abort_from_ms == deadline + TIMEOUT_MARGIN_MS - COMMIT_GUARD_MS
    late = deadline + TIMEOUT_MARGIN_MS - COMMIT_GUARD_MS
    m.commit_failed(write.commit, "timeout", late)
    m.heartbeat(late + 60_000)
    [again] = of(m.tick(late + 60_000), Write)
    assert again.commit.results == () and again.commit.offset == 1
    assert m.core.counts["left_to_shard"] == 1


def test_a_commit_of_unknown_outcome_readopts_at_once() -> None:
    m = live_machine(0)
    lease = m.lease(0)
    write = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    actions = m.commit_unknown(write.commit, "commit failed midway", T0)
    assert CloseProducer(0, lease or 0) in actions and of(actions, StartProducer)
    assert m.core.assigned == frozenset()  # its results are dropped; re-run after the read


# --- finding 1: a result the broker refuses for good ------------------------------


def reread(
    m: WorkerMachine,
    p: int,
    lease: int,
    now: int = T0,
    offset: int = 0,
    metadata: str | None = None,
) -> list[Action]:
    """The fresh producer of ``lease`` started: its init_transactions fenced whoever
    held ``{ns}.worker.{p}``, so nothing is written before the committed offset is
    read again (``offset``/``metadata`` answer it). The actions of that answer."""
    started = m.producer_started(p, lease, now)
    assert of(started, ReadCommitted) == [ReadCommitted(p, lease)] and not of(started, Write)
    return m.committed_read(p, lease, offset, metadata, now)


def _renewed(m: WorkerMachine, p: int, lease: int) -> list[Action]:
    """After a refusal the next tick writes nothing with the old producer: it closes
    it and starts a fresh one of the same lease (a refused batch leaves its sequence
    numbers out of step: OutOfOrderSequenceNumber for ever); once started and the
    committed offset read again unchanged, the kept results are written. The
    actions of that read."""
    actions = m.tick(T0)
    assert not of(actions, Write), actions
    assert CloseProducer(p, lease) in actions and StartProducer(p, lease) in actions
    assert m.lease(p) == lease and m.core.assigned == frozenset({p})
    return reread(m, p, lease)


def test_a_refused_result_is_replaced_by_a_small_failure_then_left_to_the_shard() -> None:
    m = live_machine(0)
    lease = m.lease(0) or 0
    write = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    m.commit_refused(write.commit, [0], "MessageSizeTooLargeError", T0)
    [again] = of(_renewed(m, 0, lease), Write)
    [result] = [parse_result(r.value or b"") for r in again.commit.results]
    assert result.status == "failed" and result.error is not None
    assert result.error["type"] == "ResultRefused"
    m.commit_refused(again.commit, [0], "MessageSizeTooLargeError", T0)
    [last] = of(_renewed(m, 0, lease), Write)
    assert last.commit.results == () and last.commit.offset == 1
    assert m.core.counts["left_to_shard"] == 1 and m.core.counts["refused"] == 2


# --- a renewed producer fences whoever holds the transactional id now -------------


def test_a_renewal_after_a_takeover_writes_nothing_and_drops_the_partition() -> None:
    # A owns p (committed 0); its commit is refused and aborted. Meanwhile p moved
    # to B, which fenced, read 0, ran the run again and committed its result with
    # offset 1. A's fresh producer then fences B: writing A's kept results now would
    # make a second visible result of the same attempt.
    m = live_machine(0)
    lease = m.lease(0) or 0
    write = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    m.commit_refused(write.commit, [0], "MessageSizeTooLargeError", T0)
    m.tick(T0)  # closes the old producer, starts a fresh one of the same lease
    actions = reread(m, 0, lease, offset=1, metadata="B's commit")
    assert of(actions, Write) == [] and CloseProducer(0, lease) in actions
    assert m.state(0) == "lost" and m.core.assigned == frozenset()
    assert of(m.tick(T0 + 1), Write) == []  # the kept results are gone
    # The group still assigns p here: adopted afresh, from B's commit.
    [start] = of(m.heartbeat(T0 + 2), StartProducer)
    assert start.lease != lease


def test_a_renewal_after_a_denial_checks_against_what_the_lease_last_committed() -> None:
    m = live_machine(0)
    lease = m.lease(0) or 0
    first = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    m.commit_done(first.commit, T0)  # this lease committed offset 1 with its metadata
    write = _finished(m, 1, T0, deadline_ms=T0 + 3_600_000)
    m.commit_denied(write.commit, "no Write on n.results", T0)
    now = T0 + COMMIT_RETRY_MS
    [start] = of(m.tick(now), StartProducer)
    assert start.lease == lease  # the same lease: no re-adoption
    # Still what the lease read at adoption: someone else committed since.
    actions = reread(m, 0, start.lease, now, offset=0, metadata=None)
    assert of(actions, Write) == [] and m.state(0) == "lost"


def test_a_renewal_that_finds_its_own_commit_writes_the_kept_results_once() -> None:
    m = live_machine(0)
    lease = m.lease(0) or 0
    first = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    m.commit_done(first.commit, T0)
    write = _finished(m, 1, T0, deadline_ms=T0 + 3_600_000)
    m.commit_refused(write.commit, [0], "MessageSizeTooLargeError", T0)
    m.tick(T0)
    c = first.commit
    [again] = of(reread(m, 0, lease, offset=c.offset, metadata=c.metadata), Write)
    assert again.commit.lease == lease and len(again.commit.results) == 1
    assert m.state(0) == LIVE and m.core.assigned == frozenset({0})
    assert of(m.tick(T0), Write) == [] and of(m.tick(T0), StartProducer) == []  # once
    m.commit_done(again.commit, T0)
    assert of(m.tick(T0 + 60_000), Write) == []
