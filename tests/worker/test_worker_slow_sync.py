"""A healthy follower whose SyncGroup the broker answers late (the leader slow with its
own): the assignment holds the lease for the session from its send, less a heartbeat,
not for the lease rule's three heartbeats, so nothing is dropped (docs/DESIGN.md §8).
A process frozen between the send and the read still adopts nothing once that hold
has run out."""

from __future__ import annotations

from actors.worker.core import LeaseLost, StartJob
from actors.worker.membership import LIVE, LeaseRules, StartProducer
from tests.kit.worker import now_ms
from tests.worker.test_worker_core import run_record
from tests.worker.test_worker_membership import RULES, T0, live_machine, of
from tests.worker.test_worker_stale_answers import _live, _runtime, _synced


def test_the_sync_hold_is_the_session_less_a_heartbeat() -> None:
    assert RULES.sync_hold_ms == RULES.session_timeout_ms - RULES.heartbeat_interval_ms
    assert RULES.lease_loss_ms < RULES.sync_hold_ms < RULES.session_timeout_ms
    # The adoption wait of the next owner still covers it (§8.2).
    assert RULES.adoption_wait_ms >= RULES.sync_hold_ms
    assert LeaseRules(session_timeout_ms=10_000, lease_loss_heartbeats=0).sync_hold_ms > 10**15


def test_follower_sync_waiting_7s_for_leader_keeps_its_partitions() -> None:
    m = live_machine(0, 1)
    t = T0 + 1_000
    m.heartbeat(t, sent_ms=t)  # last NoError heartbeat
    t_r = t + 500
    m.rebalance_started(t_r)  # REBALANCE_IN_PROGRESS: rejoin, hold
    sync_sent = t_r + 1_000  # JoinGroup done, the follower's SyncGroup out
    read = sync_sent + RULES.lease_loss_ms + 1_000  # the leader synced 7 s later
    m.records([run_record(0, partition=0)], t)
    m.assigned([0, 1], read, rejoined=False, sent_ms=sync_sent)
    # The group has just completed the rebalance with us: nothing is lost.
    assert not of(m.tick(read + 1), LeaseLost)
    assert m.state(0) == LIVE and m.state(1) == LIVE and m.core.running == 1
    # Until the session the coordinator restarted at the SyncGroup, less a heartbeat.
    assert not of(m.tick(sync_sent + RULES.sync_hold_ms), LeaseLost)
    assert of(m.tick(sync_sent + RULES.sync_hold_ms + 1), LeaseLost)


def test_new_partition_of_slow_sync_is_adopted() -> None:
    m = live_machine(0)
    t = T0 + 1_000
    m.heartbeat(t, sent_ms=t)
    m.rebalance_started(t + 500)
    sync_sent = t + 1_500
    read = sync_sent + RULES.lease_loss_ms + 1_000
    actions = m.assigned([0, 1], read, rejoined=False, sent_ms=sync_sent)
    assert [a.partition for a in of(actions, StartProducer)] == [1], "new partition not adopted"


def test_an_assignment_read_past_the_sync_hold_adopts_nothing() -> None:
    # Frozen (SIGSTOP) between the SyncGroup's send and the answer's read, past the
    # hold: the group may have ended the session the answer restarted.
    m = live_machine(0)
    m.rebalance_started(T0 + 500)
    sync_sent = T0 + 1_000
    read = sync_sent + RULES.sync_hold_ms + 1
    actions = m.assigned([0, 1], read, rejoined=False, sent_ms=sync_sent)
    assert of(actions, StartProducer) == []
    assert m.state(1) == "lost"
    # The kept partition goes with the lease at the next turn, and nothing starts first.
    assert of(m.records([run_record(0)], read), StartJob) == []
    assert of(m.tick(read), LeaseLost)
    assert m.state(0) == "lost"
    # A heartbeat sent after the thaw proves the group still has us: both adopted.
    later = read + RULES.heartbeat_interval_ms
    adopted = of(m.heartbeat(later, sent_ms=later), StartProducer)
    assert sorted(a.partition for a in adopted) == [0, 1]


def test_an_assignment_read_at_the_last_instant_of_the_hold_adopts() -> None:
    m = live_machine(0)
    sync_sent = T0 + 1_000
    read = sync_sent + RULES.sync_hold_ms
    actions = m.assigned([0, 1], read, rejoined=False, sent_ms=sync_sent)
    assert [a.partition for a in of(actions, StartProducer)] == [1]


async def test_the_runtime_keeps_a_partition_whose_sync_group_was_answered_7s_late() -> None:
    # The real runtime over aiokafka's own SyncGroup request: the broker holds the
    # answer 7 s (a slow leader), the time stamped is the request's send.
    clock = [now_ms()]  # the runtime's lease starts at the real clock
    runtime, coordinator, _ = _runtime(clock)
    await _live(runtime, coordinator, clock)
    runtime.rebalance_started()
    rules = runtime.options.lease_rules
    sent = clock[0]
    coordinator.freeze_ms = rules.lease_loss_ms + 1_000
    await _synced(runtime, coordinator)
    assert runtime.machine.state(0) == LIVE
    assert not of(runtime.machine.tick(clock[0]), LeaseLost)
    assert of(runtime.machine.tick(sent + rules.sync_hold_ms + 1), LeaseLost)
