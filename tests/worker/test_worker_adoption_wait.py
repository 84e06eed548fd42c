"""An adopted partition's keyed and rate-limited runs wait out the previous owner's
longest hold of its lease (docs/DESIGN.md §8.2, §8.5).

The previous owner stops starting runs at the end of its lease: `lease_loss_ms`
after its last heartbeat, or, in a rebalance it joined (no heartbeats while it
rejoins), `rebalance_hold_ms` after it, or, after an assignment, `sync_hold_ms`
after its SyncGroup's send. If the SyncGroup answer that would tell it its partition
went away is lost, it keeps the lease that long, and may start a run of the key until
then: the new owner waits the longest (`LeaseRules.adoption_wait_ms`).
"""

from __future__ import annotations

from actors.worker.core import LeaseLost, StartJob, WorkerCore
from actors.worker.membership import LeaseRules, WorkerMachine
from actors.worker.registry import Registry
from actors.worker.runtime import WorkerOptions, WorkerRuntime
from tests.kit.worker import heard, now_ms
from tests.worker.test_worker_keys import keyed
from tests.worker.test_worker_membership import adopt
from tests.worker.test_worker_ratelimit import limited
from topics.names import Settings

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
        sync_hold_ms=RULES.sync_hold_ms,
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
        sync_hold_ms=RULES.sync_hold_ms,
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


def test_the_default_wait_covers_an_assignments_hold_too() -> None:
    # A previous owner whose SyncGroup answer came holds its lease `sync_hold_ms`
    # after the request's send, longer than the lease rule. Given no rebalance hold
    # (the default, 0), the core's own wait is still the longest of the holds it is
    # given, as `LeaseRules.adoption_wait_ms` is.
    assert RULES.sync_hold_ms > RULES.lease_loss_ms
    core = WorkerCore(
        worker="w1",
        concurrency=8,
        known_job=lambda n: n == "noop",
        now_ms=T0,
        lease_loss_ms=RULES.lease_loss_ms,
        sync_hold_ms=RULES.sync_hold_ms,
    )
    core.assign(0, 0, None, T0)
    assert starts(core.receive(keyed(0), T0)) == []
    assert core.next_due_ms(lease=False) == T0 + RULES.sync_hold_ms
    assert starts(core.advance(heard(core, T0 + RULES.sync_hold_ms - 1))) == []
    assert starts(core.advance(heard(core, T0 + RULES.sync_hold_ms))) == [0]


async def _noop() -> None:
    pass


def _runtime(options: WorkerOptions) -> WorkerRuntime:
    registry = Registry()
    registry.register("noop", _noop)
    runtime = WorkerRuntime(Settings(bootstrap="127.0.0.1:1", namespace="t"), registry, options)
    runtime.core.rates.known = True
    return runtime


def test_with_the_lease_rule_off_keyed_and_rate_limited_runs_wait_a_rebalances_hold() -> None:
    # Off, the lease rule's wait was infinite: such runs never started. The worker
    # now waits the hold the rule would give a rebalance (docs/DESIGN.md §8.2).
    options = WorkerOptions(session_timeout_ms=10_000, lease_loss_heartbeats=0)
    core = _runtime(options).core
    t = now_ms()
    core.assign(0, 0, None, t)
    out = core.receive(keyed(0, deadline_ms=t + 3_600_000), t)
    out += core.receive(limited(1, deadline_ms=t + 3_600_000), t)
    assert starts(out) == []
    wait_ms = 20_000 - 2_000  # the rebalance timeout (twice the session) less an interval
    assert options.lease_rules.adoption_wait_ms == wait_ms
    assert core.next_due_ms(lease=False) == t + wait_ms
    assert starts(core.advance(heard(core, t + wait_ms))) == [0]
    assert starts(core.advance(heard(core, t + wait_ms + 250))) == [1]  # `limited`: 4 a second


def test_with_the_lease_rule_on_the_runtime_waits_as_the_rule_says() -> None:
    for session_ms, rebalance_ms in ((10_000, None), (6_000, 30_000), (30_000, None)):
        options = WorkerOptions(session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms)
        rules = options.lease_rules
        assert rules.adoption_wait_ms == max(rules.lease_loss_ms, rules.rebalance_hold_ms)
        core = _runtime(options).core
        t = now_ms()
        core.assign(0, 0, None, t)
        assert starts(core.receive(keyed(0, deadline_ms=t + 3_600_000), t)) == []
        assert core.next_due_ms(lease=False) == t + rules.adoption_wait_ms
