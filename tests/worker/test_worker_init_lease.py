"""A producer's start in flight ends with the lease (docs/DESIGN.md §8, the lease rule).

While starting, aiokafka's ``_maybe_wait_for_pid`` sends InitProducerId again every
20 ms on COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, NOT_COORDINATOR or a
timeout, for up to ADOPT_STEP_TIMEOUT_S; ``producer.stop()`` does not end that loop.
A CloseProducer that only stopped the producer left the start running: once the
coordinator answered, it bumped the epoch after the group had given the partition
away, fencing its new owner. The start's task is cancelled with the lease.
"""

from __future__ import annotations

import asyncio
from typing import Any

import actors.worker.runtime as rt
from actors.worker.core import LeaseLost
from actors.worker.membership import CloseProducer, StartProducer
from actors.worker.registry import Registry
from actors.worker.runtime import WorkerOptions, WorkerRuntime
from tests.kit.worker import now_ms
from topics.names import Settings


class _Consumer:
    def assignment(self) -> set[Any]:
        return set()


def _runtime(clock: list[int]) -> WorkerRuntime:
    runtime = WorkerRuntime(
        Settings(bootstrap="127.0.0.1:1", namespace="t"), Registry(), WorkerOptions()
    )
    runtime._now = lambda: clock[0]  # type: ignore[method-assign]
    runtime._consumer = _Consumer()  # type: ignore[assignment]
    return runtime


async def _nothing(*a: Any, **k: Any) -> Any:
    return 0


async def test_an_init_in_flight_stops_with_the_lease(monkeypatch: Any) -> None:
    # The real runtime and the real AIOKafkaProducer.start(); only the network is fake.
    clock = [now_ms()]
    runtime = _runtime(clock)
    log: list[tuple[str, int]] = []  # (what, machine ms)
    loaded = [False]  # the transaction coordinator of {ns}.worker.0 is loading
    producers: list[Any] = []

    async def fake_start(settings: Any, partition: int, producer: Any) -> None:
        producers.append(producer)
        sender = producer._sender

        async def init_pid(node_id: int) -> bool:  # one InitProducerId round trip
            await asyncio.sleep(0.02)
            if loaded[0]:
                log.append(("init succeeded (epoch bumped)", clock[0]))
                sender._txn_manager.set_pid_and_epoch(1, len(log))
                return True
            log.append(("init: COORDINATOR_LOAD_IN_PROGRESS", clock[0]))
            return False

        producer.client.bootstrap = _nothing
        producer.client.force_metadata_update = _nothing
        sender._find_coordinator = _nothing
        sender._do_init_pid = init_pid
        sender._sender_routine = _nothing
        await producer.start()  # aiokafka's own _maybe_wait_for_pid loop

    monkeypatch.setattr(rt, "_fence_then_start", fake_start)
    sent = clock[0]
    runtime._apply(runtime.machine.assigned([0], clock[0], rejoined=False, sent_ms=sent))
    await asyncio.sleep(0.2)
    assert log, "the adoption's init is retrying"
    # The group coordinator is cut off: no heartbeat. The lease ends; the tick loses p.
    clock[0] = sent + runtime.options.lease_rules.sync_hold_ms + 1
    acts = runtime.machine.tick(clock[0])
    assert [a for a in acts if isinstance(a, LeaseLost)]
    assert [a for a in acts if isinstance(a, CloseProducer)]
    runtime._apply(acts)  # CloseProducer(0, lease): the start is cancelled too
    await asyncio.sleep(0.1)
    lost_at = clock[0]
    clock[0] += 5_000  # the group gives p to another member, which fences and runs it
    await asyncio.sleep(0.2)
    loaded[0] = True  # the coordinator has loaded
    await asyncio.sleep(0.2)
    after = [what for what, at in log if at > lost_at]
    for task in list(runtime._background):
        task.cancel()
    for p in producers:
        await asyncio.wait_for(p.stop(), 5)
    # Nothing may reach the transaction coordinator for p once the lease is gone.
    assert after == [], f"{len(after)} InitProducerId after the lease ended; last: {after[-1]}"


async def test_a_start_not_yet_run_is_cancelled_and_a_renewal_is_not(monkeypatch: Any) -> None:
    clock = [now_ms()]
    runtime = _runtime(clock)
    started: list[int] = []

    async def fake_start(settings: Any, partition: int, producer: Any) -> None:
        started.append(partition)
        await asyncio.sleep(3600)  # an init that never answers

    monkeypatch.setattr(rt, "_fence_then_start", fake_start)
    # Started and closed in one turn: the task never ran, it registered no producer.
    runtime._apply([StartProducer(1, 7), CloseProducer(1, 7)])
    await asyncio.sleep(0.05)
    assert started == [] and runtime._producers == {}
    # A renewal closes the key then starts it again: only the earlier start ends.
    runtime._apply([StartProducer(2, 8)])
    await asyncio.sleep(0.05)
    [first] = runtime._starting.values()
    runtime._apply([CloseProducer(2, 8), StartProducer(2, 8)])
    await asyncio.sleep(0.05)
    assert first.cancelled()
    [second] = runtime._starting.values()
    assert second is not first and not second.done() and started == [2, 2]
    assert list(runtime._producers) == [(2, 8)]
    runtime._apply([CloseProducer(2, 8)])
    await asyncio.sleep(0.05)
    assert second.cancelled() and runtime._starting == {} and runtime._producers == {}
    for task in list(runtime._background):
        task.cancel()
    await asyncio.gather(*runtime._background, return_exceptions=True)
