"""A group answer read after a freeze renews the lease from when its request was sent
(docs/DESIGN.md §8, the lease rule; ``actors/worker/group_answers.py``).

A worker frozen (SIGSTOP, a VM pause) after the broker answered its Heartbeat or
SyncGroup request, but before it read the answer, thaws when the group may have ended
its session and given its partitions away. Stamped with the time it was read, the
answer renewed that ended lease: the next batch started a keyed run beside the
partition's new owner, or, when the turn declaring the lease lost came first, the
answer re-adopted the partition, whose fence stops the legitimate owner's commits.

The runtime here is the real one, and the requests go through aiokafka's own
``_do_heartbeat`` and ``_send_sync_group_request``; only the coordinator's
``_send_req`` (the network) is replaced, by one during which the process freezes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.consumer.group_coordinator import CoordinatorGroupRebalance, GroupCoordinator
from aiokafka.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
    RebalanceInProgressError,
)
from aiokafka.protocol.group import SyncGroupRequest

from actors.worker.core import LeaseLost, StartJob
from actors.worker.membership import StartProducer
from actors.worker.registry import Registry
from actors.worker.runtime import WorkerOptions, WorkerRuntime
from tests.kit.worker import now_ms
from tests.worker.test_worker_keys import keyed
from tests.worker.test_worker_membership import RULES, T0, live_machine
from topics.names import Settings

FREEZE_MS = 40_000  # frozen between the broker's answer and reading it: past the session


class _Answer:
    def __init__(self, error_code: int) -> None:
        self.error_code = error_code
        self.member_assignment = b""


class _Coordinator:
    """The group coordinator's state aiokafka's own request code reads; the network
    (``_send_req``) answers ``error_code`` after the process was frozen ``freeze_ms``."""

    _do_heartbeat = GroupCoordinator._do_heartbeat

    def __init__(self, clock: list[int]) -> None:
        self.clock = clock
        self.freeze_ms = 0
        self.error_code = 0
        self.group_id = "t-workers"
        self.generation = 1
        self.member_id = "m-1"
        self.coordinator_id = 0
        self._rejoin_needed_fut: Any = None
        self.at_thaw: Callable[[], None] | None = None  # what runs before the answer is read

    async def _send_req(self, request: Any) -> _Answer:
        self.clock[0] += self.freeze_ms  # answered at once; read only after the thaw
        if self.at_thaw is not None:
            self.at_thaw()
        return _Answer(self.error_code)

    def request_rejoin(self) -> None:
        pass

    def coordinator_dead(self) -> None:
        pass

    def reset_generation(self) -> None:
        pass


async def _noop() -> None:
    pass


class _Consumer:
    def __init__(self, coordinator: _Coordinator) -> None:
        self._coordinator = coordinator


def _runtime(clock: list[int]) -> tuple[WorkerRuntime, _Coordinator, list[object]]:
    registry = Registry()
    registry.register("noop", _noop)
    runtime = WorkerRuntime(
        Settings(bootstrap="127.0.0.1:1", namespace="t"), registry, WorkerOptions()
    )
    runtime.core.rates.known = True
    runtime._now = lambda: clock[0]  # type: ignore[method-assign]
    applied: list[object] = []
    runtime._apply = applied.extend  # type: ignore[method-assign]
    coordinator = _Coordinator(clock)
    runtime._consumer = _Consumer(coordinator)  # type: ignore[assignment]
    runtime._watch_heartbeats(runtime._consumer)  # type: ignore[arg-type]
    return runtime, coordinator, applied


async def _synced(runtime: WorkerRuntime, coordinator: _Coordinator) -> None:
    """aiokafka's SyncGroup round trip, then its listener's ``on_partitions_assigned``."""
    rebalance = CoordinatorGroupRebalance.__new__(CoordinatorGroupRebalance)
    rebalance._coordinator = coordinator
    rebalance.group_id = coordinator.group_id
    request = SyncGroupRequest(coordinator.group_id, 1, coordinator.member_id, "", [])
    assert await rebalance._send_sync_group_request(request) == b""
    runtime.rebalanced({TopicPartition(runtime._runs_topic, 0)})


async def _live(runtime: WorkerRuntime, coordinator: _Coordinator, clock: list[int]) -> None:
    """Partition 0 adopted (SyncGroup answered at once) and live; keyed runs may start."""
    await _synced(runtime, coordinator)
    machine = runtime.machine
    lease = machine.lease(0)
    assert lease is not None
    machine.producer_started(0, lease, clock[0])
    machine.committed_read(0, lease, 0, None, clock[0], end_offset=0)
    clock[0] += 30_000  # past the adoption wait
    assert await coordinator._do_heartbeat()  # the last heartbeat answered before the freeze


def _keyed_batch(runtime: WorkerRuntime, now: int) -> list[object]:
    record = keyed(0, deadline_ms=now + 600_000)
    return list(runtime.machine.records([record], now))


async def test_a_stale_heartbeat_read_first_after_a_thaw_starts_no_keyed_run() -> None:
    clock = [now_ms()]  # the runtime's lease starts at the real clock
    runtime, coordinator, _ = _runtime(clock)
    await _live(runtime, coordinator, clock)
    coordinator.freeze_ms = FREEZE_MS
    assert await coordinator._do_heartbeat()  # sent, frozen 40 s, read: handled first
    # The group ended our session meanwhile; the new owner runs the key's runs. A batch
    # fetched before the freeze, handled now, before the turn that finds the lease lost:
    acts = _keyed_batch(runtime, clock[0])
    assert not [a for a in acts if isinstance(a, StartJob)]
    assert [a for a in runtime.machine.tick(clock[0]) if isinstance(a, LeaseLost)]


async def test_a_stale_heartbeat_read_after_the_lease_was_lost_does_not_re_adopt() -> None:
    clock = [now_ms()]  # the runtime's lease starts at the real clock
    runtime, coordinator, applied = _runtime(clock)
    await _live(runtime, coordinator, clock)
    coordinator.freeze_ms = FREEZE_MS

    def timer_fires_first() -> None:  # at the thaw the lease's timer runs first
        assert [a for a in runtime.machine.tick(clock[0] - 1) if isinstance(a, LeaseLost)]

    coordinator.at_thaw = timer_fires_first
    applied.clear()
    assert await coordinator._do_heartbeat()  # then the stale answer is read
    assert not [a for a in applied if isinstance(a, StartProducer)]  # no fence of the new owner
    assert runtime.machine.state(0) == "lost"
    # A heartbeat sent after the thaw proves the group still has us: adopted again.
    coordinator.at_thaw = None
    coordinator.freeze_ms = 0
    clock[0] += 1
    assert await coordinator._do_heartbeat()
    assert [a for a in applied if isinstance(a, StartProducer)]


async def test_a_stale_sync_group_answer_adopts_nothing() -> None:
    clock = [now_ms()]  # the runtime's lease starts at the real clock
    runtime, coordinator, applied = _runtime(clock)
    await _live(runtime, coordinator, clock)
    runtime.rebalance_started()  # a rebalance; we rejoin, our SyncGroup answered late
    applied.clear()
    coordinator.freeze_ms = FREEZE_MS
    await _synced(runtime, coordinator)
    assert not [a for a in applied if isinstance(a, StartProducer | StartJob)]
    assert not [a for a in _keyed_batch(runtime, clock[0]) if isinstance(a, StartJob)]
    assert [a for a in runtime.machine.tick(clock[0]) if isinstance(a, LeaseLost)]


async def test_a_new_partition_from_a_stale_sync_group_answer_is_not_adopted() -> None:
    clock = [now_ms()]  # the runtime's lease starts at the real clock
    runtime, coordinator, applied = _runtime(clock)
    coordinator.freeze_ms = FREEZE_MS
    await _synced(runtime, coordinator)  # the first assignment, read 40 s late
    assert not [a for a in applied if isinstance(a, StartProducer)]
    assert runtime.machine.state(0) == "lost"


async def test_a_rebalance_in_progress_answer_renews_nothing() -> None:
    # aiokafka's _do_heartbeat returns True for it; the group gives our partitions
    # away when that rebalance ends without us, however recently we were heard.
    clock = [now_ms()]  # the runtime's lease starts at the real clock
    runtime, coordinator, _ = _runtime(clock)
    await _live(runtime, coordinator, clock)
    heard_ms = clock[0]
    coordinator.error_code = RebalanceInProgressError.errno
    for _ in range(5):
        clock[0] += runtime.options.heartbeat_interval_ms
        assert await coordinator._do_heartbeat()
    loss_ms = runtime.options.lease_rules.lease_loss_ms
    assert clock[0] > heard_ms + loss_ms
    assert [a for a in runtime.machine.tick(clock[0]) if isinstance(a, LeaseLost)]


@pytest.mark.parametrize(
    "error",
    [NotCoordinatorError, CoordinatorLoadInProgressError, CoordinatorNotAvailableError],
)
async def test_a_coordinator_move_longer_than_the_lease_drops_everything_then_re_adopts(
    error: type[Exception],
) -> None:
    # None of these answers proves membership: the lease runs out from the last NoError
    # answer, and the first NoError answer after the move adopts the partitions again.
    clock = [now_ms()]  # the runtime's lease starts at the real clock
    runtime, coordinator, applied = _runtime(clock)
    await _live(runtime, coordinator, clock)
    heard_ms = clock[0]
    coordinator.error_code = error.errno  # type: ignore[attr-defined]
    for _ in range(5):
        clock[0] += runtime.options.heartbeat_interval_ms
        try:
            assert not await coordinator._do_heartbeat()
        except KafkaError:  # raised to aiokafka's heartbeat routine, which retries
            assert error is CoordinatorLoadInProgressError
    assert clock[0] > heard_ms + runtime.options.lease_rules.lease_loss_ms
    assert [a for a in runtime.machine.tick(clock[0]) if isinstance(a, LeaseLost)]
    assert runtime.machine.state(0) == "lost"
    applied.clear()
    coordinator.error_code = 0
    clock[0] += 1
    assert await coordinator._do_heartbeat()
    assert [a for a in applied if isinstance(a, StartProducer)]


async def test_an_answer_read_at_once_renews_the_lease_as_before() -> None:
    clock = [now_ms()]  # the runtime's lease starts at the real clock
    runtime, coordinator, _ = _runtime(clock)
    await _live(runtime, coordinator, clock)
    for _ in range(10):
        clock[0] += runtime.options.heartbeat_interval_ms
        assert await coordinator._do_heartbeat()
        assert not [a for a in runtime.machine.tick(clock[0]) if isinstance(a, LeaseLost)]
    assert [a for a in _keyed_batch(runtime, clock[0]) if isinstance(a, StartJob)]


def test_a_fenced_partition_is_not_re_adopted_by_a_stale_heartbeat_read_first() -> None:
    # The machine alone: fenced before the freeze (someone else adopted it), then a
    # heartbeat sent before the freeze is read after it, before the turn that finds
    # the lease lost. Sent after the fence, it would have re-adopted the partition.
    machine = live_machine(0)
    lease = machine.lease(0)
    assert lease is not None
    machine.fenced(0, lease, T0 + 1)
    sent = T0 + 2
    thawed = sent + FREEZE_MS
    assert not machine.heartbeat(thawed, sent_ms=sent)
    assert machine.state(0) == "lost"
    # A heartbeat read at once after the thaw adopts it again.
    later = thawed + RULES.heartbeat_interval_ms
    assert [a for a in machine.heartbeat(later, sent_ms=later) if isinstance(a, StartProducer)]
