"""Warm standbys in the lifecycle machine, driven by events alone (no Kafka, no clock).

The rules of `actors.scheduler.lifecycle` for standbys: which shards are kept
warm as the assignment changes, that a takeover still fences and probes before
anything is read, that a fresh standby replaces the full restore by a catch-up,
and that a standby never caught up or too stale is dropped for a full restore.
"""

from __future__ import annotations

from typing import Any

import pytest

from actors.scheduler.lifecycle import (
    Action,
    CatchUp,
    ClockSample,
    Close,
    Fence,
    Phase,
    Position,
    Probe,
    Restore,
    SchedulerMachine,
    Tail,
    Untail,
)
from actors.scheduler.warm import Watch, standby_partitions

SESSION_MS = 10_000
STALE_MS = 60_000
T0 = 1_800_000_000_000


def _sample(mono_ms: int) -> ClockSample:
    return ClockSample(T0, T0 + 2, T0 + 1, mono_ms, mono_ms + 2)


def _machine(shards: int = 4, standbys: int = 1) -> SchedulerMachine:
    return SchedulerMachine(
        session_timeout_ms=SESSION_MS,
        shard_count=shards,
        max_standbys=standbys,
        standby_max_staleness_ms=STALE_MS,
    )


def _of(kind: type, actions: list[Action]) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


def _build_step(machine: SchedulerMachine, p: int, mono_ms: int) -> list[Action]:
    """Fence and probe shard p; the actions of its probe's answer (the build step)."""
    machine.tick(mono_ms)  # a shard waiting out a backoff starts fencing now
    assert machine.slots[p].phase is Phase.FENCING
    (probe,) = _of(Probe, machine.fence_done(p, machine.slots[p].token))
    return machine.probe_done(p, probe.token, _sample(mono_ms), mono_ms)


def test_the_shards_kept_warm_are_the_next_ones_not_owned_in_ring_order() -> None:
    assert standby_partitions(6, [0, 3], 2) == [1, 4]
    assert standby_partitions(6, [5], 3) == [0, 1, 2]
    assert standby_partitions(4, [], 2) == [0, 1]
    assert standby_partitions(3, [0, 1, 2], 2) == []
    with pytest.raises(ValueError, match="must not be negative"):
        standby_partitions(3, [0], -1)


def test_an_assignment_tails_the_wanted_standbys_and_untails_the_unwanted() -> None:
    machine = _machine(shards=4, standbys=2)
    actions = machine.assign({0}, 0)
    assert _of(Tail, actions) == [Tail(1), Tail(2)]
    actions = machine.assign({2}, 10)
    assert _of(Untail, actions) == [Untail(1)]
    # 2 is owned now: its standby moved to the takeover, neither tailed nor untailed.
    assert _of(Tail, actions) == [Tail(3), Tail(0)]
    assert sorted(machine.warm) == [0, 3]
    assert machine.slots[2].standby


def test_no_standbys_are_kept_without_a_shard_count_or_with_max_zero() -> None:
    assert not _of(Tail, _machine(standbys=0).assign({0}, 0))
    machine = SchedulerMachine(session_timeout_ms=SESSION_MS, max_standbys=2)
    assert not _of(Tail, machine.assign({0}, 0))


def test_a_warm_takeover_still_fences_and_probes_then_catches_up_instead_of_restoring() -> None:
    machine = _machine()
    machine.assign({0}, 0)  # keeps 1 warm
    machine.standby_caught_up(1, 5_000)
    machine.revoke({0})
    actions = machine.assign({0, 1}, 6_000)  # the owner of 1 died
    assert not _of(Untail, actions)  # the standby's core waits for the takeover
    assert Fence(1, machine.slots[1].token) in actions  # fencing still decides
    step = _build_step(machine, 1, 6_100)
    assert _of(CatchUp, step) == [CatchUp(1, machine.slots[1].token)]
    assert not _of(Restore, step)
    assert machine.slots[1].phase is Phase.RESTORING
    # The catch-up reports as a restore does; the rest of the build is unchanged.
    token = machine.slots[1].token
    assert _of(Position, machine.restore_done(1, token, object(), [])) == [Position(1, token)]  # type: ignore[arg-type]


def test_a_standby_that_never_caught_up_is_dropped_for_a_full_restore() -> None:
    machine = _machine()
    machine.assign({0}, 0)
    machine.revoke({0})
    machine.assign({0, 1}, 1_000)
    step = _build_step(machine, 1, 1_100)
    assert Untail(1) in step
    assert _of(Restore, step) == [Restore(1, machine.slots[1].token)]
    assert not _of(CatchUp, step)


def test_a_stale_standby_is_dropped_for_a_full_restore() -> None:
    machine = _machine()
    machine.assign({0}, 0)
    machine.standby_caught_up(1, 1_000)
    machine.revoke({0})
    machine.assign({0, 1}, 1_000 + STALE_MS)
    step = _build_step(machine, 1, 1_001 + STALE_MS)
    assert Untail(1) in step and _of(Restore, step) and not _of(CatchUp, step)


def test_catching_up_while_the_takeover_waits_counts() -> None:
    machine = _machine()
    machine.assign({0}, 0)
    machine.revoke({0})
    machine.assign({0, 1}, 1_000)  # never caught up so far ...
    machine.standby_caught_up(1, 1_050)  # ... but the tailer reached the end meanwhile
    assert _of(CatchUp, _build_step(machine, 1, 1_100))


def test_a_standby_behind_for_longer_than_the_bound_is_read_again_from_the_start() -> None:
    # Caught up at 1 s, then behind for two days (its tailer stalled): meanwhile a
    # schedule's delete may have been compacted away unseen. Reaching the end again
    # does not make it fresh: it is read again from offset 0.
    machine = _machine()
    machine.assign({0}, 0)
    assert machine.standby_caught_up(1, 1_000) == []
    two_days_ms = 2 * 86_400_000
    actions = machine.standby_caught_up(1, two_days_ms)
    assert _of(Untail, actions) == [Untail(1)] and _of(Tail, actions) == [Tail(1)]
    # Taken over before the new read reached the end: a full restore, no catch-up.
    machine.revoke({0})
    machine.assign({0, 1}, two_days_ms + 10)
    step = _build_step(machine, 1, two_days_ms + 20)
    assert _of(Restore, step) and not _of(CatchUp, step)


def test_a_first_catch_up_later_than_the_bound_after_the_tail_is_read_again() -> None:
    machine = _machine()
    machine.assign({0}, 0)  # the tail of 1 starts at 0 ...
    actions = machine.standby_caught_up(1, STALE_MS + 1)  # ... and ends too late
    assert _of(Tail, actions) == [Tail(1)]
    assert machine.standby_caught_up(1, STALE_MS + 2_000) == []  # the new read: in time
    machine.revoke({0})
    machine.assign({0, 1}, STALE_MS + 3_000)
    assert _of(CatchUp, _build_step(machine, 1, STALE_MS + 3_100))


def test_a_waiting_takeover_whose_standby_was_behind_too_long_restores_in_full() -> None:
    machine = _machine()
    machine.assign({0}, 0)
    machine.standby_caught_up(1, 1_000)
    machine.revoke({0})
    machine.assign({0, 1}, 2_000)  # the takeover waits for its fence and probe ...
    actions = machine.standby_caught_up(1, 2_000 + STALE_MS)  # ... its standby was behind
    assert _of(Untail, actions) == [Untail(1)] and not _of(Tail, actions)
    step = _build_step(machine, 1, 2_100 + STALE_MS)
    assert _of(Restore, step) and not _of(CatchUp, step)


def test_a_failed_fence_keeps_the_unused_standby_for_the_next_attempt() -> None:
    machine = _machine()
    machine.assign({0}, 0)
    machine.standby_caught_up(1, 100)
    machine.revoke({0})
    machine.assign({0, 1}, 200)
    (fence,) = [a for a in machine.tick(200) if isinstance(a, Fence) and a.partition == 1] or [
        Fence(1, machine.slots[1].token)
    ]
    failed = machine.step_failed(1, fence.token, fenced=False, error="timeout", mono_ms=300)
    assert not _of(Untail, failed)
    assert _of(CatchUp, _build_step(machine, 1, 300 + machine.rebuild_backoff_ms))


def test_a_failed_catch_up_rebuilds_with_a_full_restore() -> None:
    machine = _machine()
    machine.assign({0}, 0)
    machine.standby_caught_up(1, 100)
    machine.revoke({0})
    machine.assign({0, 1}, 200)
    (catch_up,) = _of(CatchUp, _build_step(machine, 1, 200))
    failed = machine.step_failed(1, catch_up.token, fenced=False, error="gone", mono_ms=300)
    assert Close(1, catch_up.token, "gone") in failed
    step = _build_step(machine, 1, 300 + machine.rebuild_backoff_ms)
    assert _of(Restore, step) and not _of(CatchUp, step)


def test_a_takeover_revoked_before_its_catch_up_keeps_the_shard_warm() -> None:
    machine = _machine()
    machine.assign({0}, 0)
    machine.standby_caught_up(1, 100)
    machine.revoke({0})
    machine.assign({0, 1}, 200)
    revoked = machine.revoke({0, 1})
    assert not _of(Untail, revoked)
    assert machine.warm[1] == Watch(100, caught_up=True)  # its freshness goes with it
    actions = machine.assign({0}, 300)  # 1 given to someone else: still wanted warm
    assert Untail(1) not in actions and Tail(1) not in actions
    assert machine.warm == {1: Watch(100, caught_up=True)}


def test_an_assignment_without_a_revocation_keeps_track_of_an_unused_standby() -> None:
    # Eager rebalancing revokes first, but the machine must not rely on it: a
    # takeover dropped by a new assignment gives its standby back, and the
    # assignment keeps it warm or untails it (a standby never leaks a tailer).
    machine = _machine(shards=4, standbys=1)
    machine.assign({0}, 0)  # keeps 1 warm
    machine.assign({1}, 10)  # takes 1 over from its standby; keeps 2 warm
    assert machine.slots[1].standby and sorted(machine.warm) == [2]
    actions = machine.assign({3}, 20)  # 1 goes elsewhere before its catch-up
    assert Untail(1) in actions  # 3 wants 0 warm, not 1: the unused standby is untailed
    assert sorted(machine.warm) == [0] and 1 not in machine.slots


def test_leaving_untails_every_standby() -> None:
    machine = _machine(shards=4, standbys=2)
    machine.assign({0}, 0)
    assert sorted(_of(Untail, machine.leave()), key=lambda a: a.partition) == [
        Untail(1),
        Untail(2),
    ]
    assert machine.warm == {}


def test_bad_standby_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        SchedulerMachine(session_timeout_ms=SESSION_MS, max_standbys=-1)
