"""An adoption in flight ends with the lease (docs/DESIGN.md §8, the lease rule).

The lease once ended only through the core's ``LeaseLost``, which it reports only
while it holds a live partition. A worker holding none (its partitions being adopted,
read, or backing off after a failed adoption), cut from the group coordinator but
still reaching the transaction coordinator, kept retrying: each ``init_transactions``
fenced the partition's new owner, for as long as the split lasted. And a process
thawed mid-adoption went live past the lease, its adoption renewing it.
"""

from __future__ import annotations

from actors.worker.core import LeaseLost, StartJob, WorkerCore
from actors.worker.membership import (
    ADOPT_RETRY_MS,
    COMMIT_FAILURES_BEFORE_READOPT,
    LIVE,
    CloseProducer,
    LeaseRules,
    ReadCommitted,
    Seek,
    StartProducer,
    WorkerMachine,
    Write,
)
from tests.worker.test_worker_core import run_record
from tests.worker.test_worker_membership import (
    LOST_MS,
    RULES,
    T0,
    _finished,
    live_machine,
    make_machine,
    of,
)


def test_a_retry_due_past_the_lease_starts_no_producer() -> None:
    # No live partition: the core never reports LeaseLost. The coordinator of the
    # transactions answers (the adoption fails only on a coordinator moving), the
    # group's does not: no heartbeat after the assignment.
    m = make_machine()
    [first] = of(m.assigned([0], T0, rejoined=False), StartProducer)
    m.adoption_failed(0, first.lease, "NOT_COORDINATOR", T0)
    # Each retry that fails within the lease is retried.
    now = T0
    delay = ADOPT_RETRY_MS
    while now + delay < LOST_MS:
        now += delay
        [retry] = of(m.tick(now), StartProducer)
        m.adoption_failed(0, retry.lease, "NOT_COORDINATOR", now)
        delay *= 2
    assert now + delay >= LOST_MS
    # The next retry is due past the lease: nothing is started, the slot is lost.
    actions = m.tick(now + delay)
    assert of(actions, StartProducer) == [] and m.state(0) == "lost"
    assert of(actions, LeaseLost) == [LeaseLost((0,), now + delay - T0)]
    assert of(m.tick(now + delay + 60_000), StartProducer) == []
    # A heartbeat sent after the loss proves the group still assigns it here.
    back = now + delay + 60_000
    [again] = of(m.heartbeat(back, sent_ms=back), StartProducer)
    assert again.partition == 0


def test_an_adoption_in_flight_is_lost_with_the_lease_and_wakes_for_it() -> None:
    m = make_machine()
    [start] = of(m.assigned([0, 1], T0, rejoined=False), StartProducer)[:1]
    m.producer_started(0, start.lease, T0)  # 0 reading, 1 adopting
    wake = m.next_wake_ms()
    assert wake is not None and wake <= LOST_MS  # a tick is due at the lease's end
    assert of(m.tick(LOST_MS - 1), CloseProducer) == []
    actions = m.tick(LOST_MS)
    assert m.state(0) == "lost" and m.state(1) == "lost"
    assert of(actions, LeaseLost) == [LeaseLost((0, 1), LOST_MS - T0)]
    assert sorted(c.partition for c in of(actions, CloseProducer)) == [0, 1]
    # A late answer only closes what it started.
    late = m.committed_read(0, start.lease, 0, None, LOST_MS + 1)
    assert of(late, Seek) == [] and CloseProducer(0, start.lease) in late
    assert m.state(0) == "lost" and m.core.assigned == frozenset()


def test_an_adoption_whose_producer_starts_past_the_lease_does_not_go_live() -> None:
    # A process frozen (SIGSTOP) while init_transactions was in flight thaws past
    # the lease and reads the answer before its first tick.
    m = make_machine()
    [start] = of(m.assigned([0], T0, rejoined=False), StartProducer)
    actions = m.producer_started(0, start.lease, LOST_MS)
    assert of(actions, ReadCommitted) == [] and CloseProducer(0, start.lease) in actions
    assert m.state(0) == "lost"


def test_an_adoption_whose_offset_is_read_past_the_lease_does_not_go_live() -> None:
    m = make_machine()
    [start] = of(m.assigned([0], T0, rejoined=False), StartProducer)
    m.producer_started(0, start.lease, T0)
    actions = m.committed_read(0, start.lease, 0, None, LOST_MS)
    assert of(actions, Seek) == [] and CloseProducer(0, start.lease) in actions
    assert m.state(0) == "lost" and m.core.assigned == frozenset()
    # Nothing of it runs, and the lease is not renewed by it.
    assert of(m.records([run_record(0)], LOST_MS), StartJob) == []
    assert of(m.tick(LOST_MS + 60_000), StartProducer) == []


def test_an_adoption_live_at_the_lease_s_last_instant_does_not_renew_it() -> None:
    # Going live is not hearing from the group: the lease still ends when the
    # group answers said it would.
    m = make_machine()
    [start] = of(m.assigned([0], T0, rejoined=False), StartProducer)
    m.producer_started(0, start.lease, LOST_MS - 1)
    m.committed_read(0, start.lease, 0, None, LOST_MS - 1)
    assert m.state(0) == LIVE
    assert of(m.tick(LOST_MS), LeaseLost)


def test_a_renewed_producer_started_past_the_lease_writes_nothing() -> None:
    # A refused batch: the kept results wait for a fresh producer of the same lease,
    # whose start is read after a freeze past the lease.
    m = live_machine(0)
    lease = m.lease(0) or 0
    write = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    m.commit_refused(write.commit, [0], "MessageSizeTooLargeError", T0)
    assert StartProducer(0, lease) in m.tick(T0)
    actions = m.producer_started(0, lease, LOST_MS)
    assert of(actions, ReadCommitted) == [] and of(actions, Write) == []
    assert of(actions, LeaseLost) and CloseProducer(0, lease) in actions
    assert m.state(0) == "lost"
    assert of(m.committed_read(0, lease, 0, None, LOST_MS), Write) == []


def test_a_renewal_whose_offset_is_read_past_the_lease_writes_nothing() -> None:
    m = live_machine(0)
    lease = m.lease(0) or 0
    write = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    m.commit_refused(write.commit, [0], "MessageSizeTooLargeError", T0)
    m.tick(T0)
    m.producer_started(0, lease, T0)
    actions = m.committed_read(0, lease, 0, None, LOST_MS)
    assert of(actions, Write) == [] and m.state(0) == "lost"


def test_a_commit_of_unknown_outcome_read_past_the_lease_adopts_nothing() -> None:
    # Frozen with the EndTxn outcome (unknown) ready to read; evicted meanwhile. The
    # re-adoption's init_transactions would fence the partition's new owner.
    m = live_machine(0)
    lease = m.lease(0) or 0
    write = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    actions = m.commit_unknown(write.commit, "KafkaConnectionError", LOST_MS + 30_000)
    assert of(actions, StartProducer) == [], actions
    assert of(actions, LeaseLost) and CloseProducer(0, lease) in actions
    assert m.state(0) == "lost"
    # The next heartbeat re-adopts it.
    back = LOST_MS + 31_000
    assert of(m.heartbeat(back, sent_ms=back), StartProducer)


def test_a_last_failed_commit_read_past_the_lease_adopts_nothing() -> None:
    m = live_machine(0)
    lease = m.lease(0) or 0
    now = T0
    write = _finished(m, 0, now, deadline_ms=T0 + 3_600_000)
    for _ in range(COMMIT_FAILURES_BEFORE_READOPT - 1):
        m.commit_failed(write.commit, "NotCoordinator", now)
        now += 5_000
        m.heartbeat(now)
        [write] = of(m.tick(now), Write)
    actions = m.commit_failed(write.commit, "NotCoordinator", now + 40_000)
    assert of(actions, StartProducer) == [], actions
    assert of(actions, LeaseLost) and CloseProducer(0, lease) in actions
    assert m.state(0) == "lost"


def test_with_the_lease_rule_off_an_adoption_retries_for_ever() -> None:
    rules = LeaseRules(session_timeout_ms=RULES.session_timeout_ms, lease_loss_heartbeats=0)
    core = WorkerCore(
        worker="w1",
        concurrency=1,
        known_job=lambda name: name == "noop",
        now_ms=T0,
        lease_loss_ms=rules.lease_loss_ms,
    )
    m = WorkerMachine(core, rules, T0)
    [first] = of(m.assigned([0], T0, rejoined=False), StartProducer)
    m.adoption_failed(0, first.lease, "NOT_COORDINATOR", T0)
    assert of(m.tick(T0 + 3_600_000), StartProducer)
