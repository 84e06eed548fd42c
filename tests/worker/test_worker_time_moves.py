"""A wait is measured on the monotonic clock, whatever the worker's time does
(``actors.worker.clock.TimeMoves``, docs/DESIGN.md §8.2 and §8.5).

A fresh worker whose wall clock is 4 s behind the broker's adopts a partition: its
keyed runs wait out the previous owner's longest hold (18 s with a 10 s session),
counted from the adoption as its time read then. Its first fetch raises its time to
the broker's (``BrokerFloor``): counted on that time, the wait ended 4 s early, and a
key's run started beside the previous owner's, whose lease had not run out yet. The
same for a wall clock stepped forward by NTP, and for a rate limit's bucket, which
filled by the step.

The runtime here is the real one, fed records the way aiokafka hands them over
(``_receive``); only its wall and monotonic clocks are the test's.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from actors.worker import runtime as runtime_module
from actors.worker.clock import MOVE_REPORTED_MS, TimeMoves
from actors.worker.core import LeaseLost, StartJob
from actors.worker.group_answers import HEARTBEAT, SYNC_GROUP
from actors.worker.registry import Registry
from actors.worker.runtime import LOG_APPEND_TIME, WorkerOptions, WorkerRuntime
from tests.worker.test_worker_keys import keyed
from tests.worker.test_worker_ratelimit import limited
from topics.names import Settings
from topics.ratelimits import RateLimit

WALL0 = 1_790_000_000_000
# The worker's wall clock behind the broker's, or stepped forward: less than the lease
# rule's 6 s, so the lease holds across the move and only the wait is at stake (a
# move past the lease ends it sooner, which is safe; DESIGN §8.2).
MOVE_MS = 4_000


class _Clocks:
    def __init__(self) -> None:
        self.wall_ms = WALL0
        self.mono_ms = 1_000_000

    def elapse(self, ms: int) -> None:
        self.wall_ms += ms
        self.mono_ms += ms


async def _noop() -> None:
    pass


def _runtime(clocks: _Clocks, monkeypatch: pytest.MonkeyPatch) -> tuple[WorkerRuntime, list[Any]]:
    monkeypatch.setattr(runtime_module, "now_ms", lambda: clocks.wall_ms)
    monkeypatch.setattr(runtime_module, "monotonic_ms", lambda: clocks.mono_ms)
    registry = Registry()
    registry.register("noop", _noop)
    runtime = WorkerRuntime(
        Settings(bootstrap="127.0.0.1:1", namespace="t"), registry, WorkerOptions()
    )
    runtime.core.rates.known = True
    applied: list[Any] = []
    runtime._apply = applied.extend  # type: ignore[method-assign]
    return runtime, applied


def _adopt(runtime: WorkerRuntime) -> int:
    """Partition 0 assigned, its producer started and its commit read: live. The
    instant of the adoption, as the worker's time read it."""
    runtime.rebalanced({TopicPartition(runtime._runs_topic, 0)})
    machine = runtime.machine
    lease = machine.lease(0)
    assert lease is not None
    now = runtime._now()
    machine.heartbeat(now, sent_ms=now)
    machine.producer_started(0, lease, now)
    machine.committed_read(0, lease, 0, None, now, end_offset=0)
    assert machine.state(0) == "live"
    return now


def _heard(runtime: WorkerRuntime, clocks: _Clocks, ms: int) -> None:
    """``ms`` pass with the group answering every heartbeat: the lease holds."""
    step_ms = runtime.options.heartbeat_interval_ms
    for _ in range(ms // step_ms):
        clocks.elapse(step_ms)
        now = runtime._now()
        runtime._apply(runtime.machine.heartbeat(now, sent_ms=now))
    clocks.elapse(ms % step_ms)


def _fetched(
    runtime: WorkerRuntime,
    applied: list[Any],
    broker_ms: int,
    offset: int = 0,
    rate: RateLimit | None = None,
) -> list[Any]:
    """One run fetched (keyed, or under ``rate``), appended by the broker at
    ``broker_ms``; what it started."""
    deadline_ms = broker_ms + 600_000
    record = (
        keyed(offset, deadline_ms=deadline_ms)
        if rate is None
        else limited(offset, rate, deadline_ms=deadline_ms)
    )
    fetched = ConsumerRecord(
        runtime._runs_topic,
        0,
        offset,
        broker_ms,
        LOG_APPEND_TIME,
        record.key,
        record.value,
        None,
        0,
        len(record.value or b""),
        (),
    )
    before = len(applied)
    runtime._receive({TopicPartition(runtime._runs_topic, 0): [fetched]})
    return [a for a in applied[before:] if isinstance(a, StartJob)]


def _short_of_the_wait_by_the_move(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[_Clocks, WorkerRuntime, list[Any]]:
    """Partition 0 adopted and heard until 1 s past the adoption wait less `MOVE_MS`:
    a move of the time by `MOVE_MS` now would end the wait, were it not moved too."""
    clocks = _Clocks()
    runtime, applied = _runtime(clocks, monkeypatch)
    _adopt(runtime)
    wait_ms = runtime.options.lease_rules.adoption_wait_ms
    _heard(runtime, clocks, wait_ms - MOVE_MS + 1_000)
    return clocks, runtime, applied


def test_a_clock_behind_raised_by_the_first_fetch_does_not_cut_the_adoption_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Past the wait less the 4 s the clock was behind, not past the wait itself:
    clocks, runtime, applied = _short_of_the_wait_by_the_move(monkeypatch)
    held = _fetched(runtime, applied, clocks.wall_ms + MOVE_MS)
    assert not held, "a keyed run started before the previous owner's hold ended"
    # Once the wait has passed on the monotonic clock, it starts.
    _heard(runtime, clocks, MOVE_MS)
    started = [a for a in runtime.machine.tick(runtime._now()) if isinstance(a, StartJob)]
    assert started, "the keyed run never started after the wait"


def test_a_wall_clock_stepped_forward_does_not_cut_the_adoption_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clocks, runtime, applied = _short_of_the_wait_by_the_move(monkeypatch)
    clocks.wall_ms += MOVE_MS  # NTP steps the wall clock forward
    assert not _fetched(runtime, applied, clocks.wall_ms), "the step ended the adoption wait"


def test_a_wall_clock_stepped_forward_adds_no_token_to_a_rate_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clocks = _Clocks()
    runtime, applied = _runtime(clocks, monkeypatch)
    _adopt(runtime)
    wait_ms = runtime.options.lease_rules.adoption_wait_ms
    _heard(runtime, clocks, wait_ms)
    rate = RateLimit("payments", 0.5, 1)  # one start every 2 s, no burst
    # The bucket starts empty at the end of the adoption wait: 2 s later, one start.
    _heard(runtime, clocks, 10_000)
    assert _fetched(runtime, applied, clocks.wall_ms, offset=0, rate=rate)
    clocks.elapse(500)
    clocks.wall_ms += MOVE_MS  # 0.5 s later by the monotonic clock, 4.5 s by the wall
    stepped = _fetched(runtime, applied, clocks.wall_ms, offset=1, rate=rate)
    assert not stepped, "the step filled the bucket"
    # Its token comes 2 s after the first start, by the monotonic clock.
    clocks.elapse(1_600)
    now = runtime._now()
    runtime.machine.heartbeat(now, sent_ms=now)  # (the step shortened the lease: 6 s by the wall)
    assert [a for a in runtime.machine.tick(now) if isinstance(a, StartJob)]


def test_moves_below_the_reported_bound_are_not_reported_and_add_up() -> None:
    moves = TimeMoves()
    assert moves.moved_ms(WALL0, 0) == 0  # the first reading: nothing to compare
    assert moves.moved_ms(WALL0 + 1_001, 1_000) == 0  # a millisecond of jitter
    assert moves.moved_ms(WALL0 + 1_999, 2_000) == 0
    assert moves.moved_ms(WALL0 + 3_000 + MOVE_REPORTED_MS, 3_000) == MOVE_REPORTED_MS
    assert moves.moved_ms(WALL0 + 4_000 + MOVE_REPORTED_MS, 4_000) == 0
    assert moves.moved_ms(WALL0 + 5_000 - 40_000, 5_000) == -40_000 - MOVE_REPORTED_MS


AHEAD_MS = 30_000  # a worker's wall clock 30 s ahead of the broker's


def _live_past_the_wait(runtime: WorkerRuntime, applied: list[Any], clocks: _Clocks) -> None:
    """Partition 0 adopted and heard through the adoption wait; a keyed run fetched (the
    floor learns the broker's time, 30 s behind this wall) and started."""
    machine = runtime.machine
    rules = runtime.options.lease_rules
    _adopt(runtime)
    step_ms = rules.heartbeat_interval_ms
    for _ in range(rules.adoption_wait_ms // step_ms + 1):
        clocks.elapse(step_ms)
        now = runtime._now()
        machine.heartbeat(now, sent_ms=now)
    assert _fetched(runtime, applied, clocks.wall_ms - AHEAD_MS)


def test_a_wall_clock_ahead_stepped_back_does_not_stretch_the_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The floor cannot see a clock ahead of the broker's; NTP steps it back 30 s. Had
    # the lease stayed where it was, it held 36 s after the last answer: the group
    # evicts us after 10 s and the next owner runs the partition from then.
    clocks = _Clocks()
    runtime, applied = _runtime(clocks, monkeypatch)
    machine = runtime.machine
    rules = runtime.options.lease_rules
    _live_past_the_wait(runtime, applied, clocks)
    now = runtime._now()
    machine.heartbeat(now, sent_ms=now)  # the last heartbeat the group answers
    clocks.wall_ms -= AHEAD_MS
    lost_after_ms = None
    for silent_ms in range(500, 29_001, 500):  # cut off from the group coordinator
        clocks.elapse(500)
        runtime._apply(machine.tick(runtime._now()))
        if lost_after_ms is None and not runtime.core.assigned:
            lost_after_ms = silent_ms
    late = _fetched(runtime, applied, clocks.wall_ms, offset=1, rate=RateLimit("payments", 0.5, 1))
    assert not late, "a run of a partition the group gave away 19 s ago started"
    assert lost_after_ms is not None and lost_after_ms <= rules.lease_loss_ms + 500, lost_after_ms


def test_a_heartbeat_sent_before_a_backward_step_renews_from_its_send(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its send instant is re-expressed with the step made while it was in flight: read
    # as it was stamped, it would renew the lease 30 s past its send.
    clocks = _Clocks()
    runtime, applied = _runtime(clocks, monkeypatch)
    rules = runtime.options.lease_rules
    _live_past_the_wait(runtime, applied, clocks)
    stamp = runtime._sent_stamp()  # the heartbeat request goes out
    clocks.wall_ms -= AHEAD_MS  # NTP steps the wall back while it is in flight
    clocks.elapse(100)
    runtime._heard(HEARTBEAT, stamp)  # its answer is read
    clocks.elapse(rules.lease_loss_ms)  # and nothing is heard after it
    lost = [a for a in runtime.machine.tick(runtime._now()) if isinstance(a, LeaseLost)]
    assert lost, "an answer sent before the step renewed the lease by the step"


SYNC_LATENCY_MS = 3_000  # a follower's SyncGroup waits for the leader's assignment


def _lease_left_after_sync(monkeypatch: pytest.MonkeyPatch, step_back: bool) -> int:
    clocks = _Clocks()
    runtime, applied = _runtime(clocks, monkeypatch)
    _live_past_the_wait(runtime, applied, clocks)
    runtime._apply(runtime.machine.rebalance_started(runtime._now()))
    stamp = runtime._sent_stamp()  # the SyncGroup request goes out
    clocks.elapse(SYNC_LATENCY_MS)
    runtime._heard(SYNC_GROUP, stamp)  # its answer is read
    if step_back:  # NTP steps the wall back before the listener hands over the assignment
        clocks.wall_ms -= AHEAD_MS
    runtime.rebalanced({TopicPartition(runtime._runs_topic, 0)})
    return runtime.core.lease_ends_ms() - runtime._now()


def test_a_step_between_the_sync_answer_and_its_assignment_does_not_stretch_the_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Kept as it was stamped, the send instant lay in the old reading's frame: the
    # assignment's hold ended the SyncGroup's latency later than the group's guarantee.
    held = _lease_left_after_sync(monkeypatch, step_back=False)
    stepped = _lease_left_after_sync(monkeypatch, step_back=True)
    assert stepped <= held + 5, (held, stepped)
