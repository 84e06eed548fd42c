"""An adopted partition's keyed and rate-limited runs wait out the previous owner's
longest hold of its lease (docs/DESIGN.md §8.2, §8.5).

The previous owner stops starting runs at the end of its lease: `lease_loss_ms`
after its last heartbeat, or, in a rebalance it joined (no heartbeats while it
rejoins), `rebalance_hold_ms` after it. If the SyncGroup answer that would tell it
its partition went away is lost, it keeps the lease that long, and may start a run
of the key until then: the new owner waits the longer of the two.
"""

from __future__ import annotations

from actors.worker.core import LeaseLost, StartJob, WorkerCore
from actors.worker.membership import LeaseRules, WorkerMachine
from tests.kit.worker import heard
from tests.worker.test_worker_keys import keyed
from tests.worker.test_worker_membership import adopt
from tests.worker.test_worker_ratelimit import limited

T0 = 1_790_000_000_000
RULES = LeaseRules(session_timeout_ms=10_000)  # lease 6 s, a rebalance's hold 18 s


def new_core() -> WorkerCore:
    """A worker's core as the runtime and the simulation make it."""
    return WorkerCore(
        worker="w2",
        concurrency=8,
        known_job=lambda n: n == "noop",
        now_ms=T0,
        lease_loss_ms=RULES.lease_loss_ms,
        rebalance_hold_ms=RULES.rebalance_hold_ms,
    )


def old_owner() -> WorkerMachine:
    """Owns partition 0 since T0 - 60 s, heard until T0."""
    core = WorkerCore(
        worker="w1",
        concurrency=8,
        known_job=lambda n: n == "noop",
        now_ms=T0 - 60_000,
        lease_loss_ms=RULES.lease_loss_ms,
        rebalance_hold_ms=RULES.rebalance_hold_ms,
    )
    machine = WorkerMachine(core, RULES, T0 - 60_000)
    machine.assigned([0], T0 - 60_000, rejoined=False)
    adopt(machine, 0, now=T0 - 60_000)
    machine.heartbeat(T0)
    return machine


def starts(actions: list[object]) -> list[int]:
    return [a.key[1] for a in actions if isinstance(a, StartJob)]


def test_the_new_owner_waits_out_the_old_owners_hold_of_a_rebalance() -> None:
    assert RULES.rebalance_hold_ms > RULES.lease_loss_ms
    old = old_owner()
    old.rebalance_started(T0 + 1)  # joins; its SyncGroup answer never comes
    new = new_core()
    adopted_ms = T0 + 2  # the group gave partition 0 to the new owner
    new.assign(0, 0, None, adopted_ms)
    # The old owner still holds the lease and starts a run of the key late in it.
    last_ms = T0 + RULES.rebalance_hold_ms
    assert not [a for a in old.tick(last_ms) if isinstance(a, LeaseLost)]
    assert starts(old.records([keyed(7)], last_ms)) == [7]
    # The new owner starts the key's runs only after that.
    assert starts(new.receive(keyed(0), adopted_ms)) == []
    assert starts(new.advance(heard(new, adopted_ms + RULES.lease_loss_ms))) == []
    assert new.next_due_ms(lease=False) == adopted_ms + RULES.rebalance_hold_ms > last_ms
    assert starts(new.advance(heard(new, adopted_ms + RULES.rebalance_hold_ms))) == [0]


def test_a_new_owners_rate_limit_bucket_fills_only_after_the_old_owners_hold() -> None:
    new = new_core()
    new.assign(0, 0, None, T0)
    assert starts(new.receive(limited(0), T0)) == []
    wait_ms = RULES.rebalance_hold_ms
    assert starts(new.advance(heard(new, T0 + RULES.lease_loss_ms + 250))) == []
    interval_ms = 250  # `limited`: 4 a second
    assert new.next_due_ms(lease=False) == T0 + wait_ms + interval_ms
    assert starts(new.advance(heard(new, T0 + wait_ms + interval_ms))) == [0]


def test_without_a_longer_hold_the_wait_is_the_lease_rule() -> None:
    core = WorkerCore(
        worker="w1",
        concurrency=8,
        known_job=lambda n: n == "noop",
        now_ms=T0,
        lease_loss_ms=6_000,
        rebalance_hold_ms=2_000,
    )
    core.assign(0, 0, None, T0)
    assert starts(core.receive(keyed(0), T0)) == []
    assert core.next_due_ms(lease=False) == T0 + 6_000
