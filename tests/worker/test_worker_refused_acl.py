"""A worker whose results the broker refuses (a missing ACL), driven by events alone.

The rules of `actors.worker.membership` for a refusal: the partition is paused (no
more runs fetched to run for nothing), its results are kept and the same write is
tried again after a backoff doubling to a bound, never by re-adopting (which would
run the jobs again), the refusal is noted when it starts and then once per
interval, and the first commit after the ACL is back resumes the partition.
"""

from __future__ import annotations

from actors.worker.membership import (
    COMMIT_RETRY_MS,
    DENIED_NOTE_INTERVAL_MS,
    DENIED_RETRY_MAX_MS,
    Action,
    CloseProducer,
    Note,
    Pause,
    Resume,
    StartProducer,
    Write,
)
from tests.worker.test_worker_core import T0
from tests.worker.test_worker_membership import _finished, live_machine, of, reread

DENIED = "User:w may not Write topic n.results: Write is granted to role worker or scheduler"


def _denial_notes(actions: list[Action]) -> list[Note]:
    return [n for n in of(actions, Note) if DENIED in n.text]


def test_a_refused_commit_pauses_the_partition_keeps_its_results_and_backs_off() -> None:
    m = live_machine(0)
    write = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    results = write.commit.results
    actions = m.commit_denied(write.commit, DENIED, T0)
    assert Pause(0) in actions
    (note,) = _denial_notes(actions)
    assert note.warning and "nothing of it is visible" in note.text
    now, waits, notes = T0, [], 1
    while now < T0 + 10 * DENIED_NOTE_INTERVAL_MS:
        wake = m.next_wake_ms(lease=False)
        assert wake is not None
        m.heartbeat(wake - 1)  # the group still has us: only the writes are refused
        assert of(m.tick(wake - 1), Write) == []  # left alone until then
        waits.append(wake - now)
        now = wake
        # A fresh producer of the same lease first (the refused batch left the old
        # one's sequence numbers out of step), then the same write.
        lease = m.lease(0) or 0
        actions = m.tick(now)
        assert of(actions, CloseProducer) == [CloseProducer(0, lease)]
        assert of(actions, StartProducer) == [StartProducer(0, lease)] and not of(actions, Write)
        [again] = of(reread(m, 0, lease, now), Write)
        assert again.commit.results == results  # the same results, not the jobs again
        actions = m.commit_denied(again.commit, DENIED, now)
        assert not of(actions, StartProducer) and not of(actions, CloseProducer)
        notes += len(_denial_notes(actions))
    assert waits[:3] == [COMMIT_RETRY_MS, 2 * COMMIT_RETRY_MS, 4 * COMMIT_RETRY_MS]
    assert waits[-1] == DENIED_RETRY_MAX_MS == max(waits)
    # Noted when it started, then at most once per interval, never once per attempt.
    assert notes <= (now - T0) // DENIED_NOTE_INTERVAL_MS + 1 < len(waits)
    assert m.counts.readoptions == 0


def test_once_the_acl_is_back_the_results_commit_and_the_partition_resumes() -> None:
    m = live_machine(0)
    write = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    m.commit_denied(write.commit, DENIED, T0)
    [start] = of(m.tick(T0 + COMMIT_RETRY_MS), StartProducer)
    [again] = of(reread(m, 0, start.lease, T0 + COMMIT_RETRY_MS), Write)
    # Ticks while that write is out leave the refusal standing: only its answer tells.
    meanwhile = m.tick(T0 + COMMIT_RETRY_MS + 1)
    assert of(meanwhile, Write) == [] and Resume(0) not in meanwhile
    actions = m.commit_done(again.commit, T0 + COMMIT_RETRY_MS)
    assert Resume(0) in actions
    assert [n.text for n in of(actions, Note)] == ["runs partition 0: authorized again; resumed"]
    assert of(m.tick(T0 + 60_000), Write) == []  # written once


def test_a_fresh_producer_that_does_not_start_is_tried_again_after_the_backoff() -> None:
    m = live_machine(0)
    write = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    m.commit_denied(write.commit, DENIED, T0)
    [start] = of(m.tick(T0 + COMMIT_RETRY_MS), StartProducer)
    actions = m.adoption_failed(0, start.lease, "coordinator loading", T0 + COMMIT_RETRY_MS)
    assert m.state(0) == "live" and not of(actions, StartProducer)
    assert of(m.tick(T0 + COMMIT_RETRY_MS + 1), StartProducer) == []
    [again] = of(m.tick(T0 + 3 * COMMIT_RETRY_MS), StartProducer)
    assert again.lease == start.lease


def test_a_committed_offset_not_read_after_the_fresh_producer_takes_another_one() -> None:
    m = live_machine(0)
    write = _finished(m, 0, T0, deadline_ms=T0 + 3_600_000)
    m.commit_denied(write.commit, DENIED, T0)
    [start] = of(m.tick(T0 + COMMIT_RETRY_MS), StartProducer)
    m.producer_started(0, start.lease, T0 + COMMIT_RETRY_MS)
    actions = m.adoption_failed(0, start.lease, "coordinator loading", T0 + COMMIT_RETRY_MS)
    assert CloseProducer(0, start.lease) in actions and m.state(0) == "live"
    # Never a write with the producer just closed: a fresh one, then the read again.
    actions = m.tick(T0 + 3 * COMMIT_RETRY_MS)
    assert of(actions, Write) == [] and of(actions, StartProducer) == [start]
