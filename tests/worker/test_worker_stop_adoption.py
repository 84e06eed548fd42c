"""A stopping worker cancels its adoption steps instead of awaiting them.

SIGTERM often lands while the rebalance that the stop of another worker caused is
still adopting partitions here: a fence or a read of the committed offset in flight,
each bounded only by ADOPT_STEP_TIMEOUT_S (30 s, several of them in a row). A stop
that awaited them outlived the drain it promises (seen once on the three-node
cluster after a rolling restart: a worker killed after 30 s with nothing to run).
The steps are worthless to a worker that stops: their answers would be stale, and
the partition's next owner fences the transactional id anyway.
"""

from __future__ import annotations

import asyncio

from actors.worker.registry import Registry
from actors.worker.runtime import WorkerOptions, WorkerRuntime
from topics.names import Settings


class _Closes:
    """A consumer or admin client that only needs closing here."""

    def __init__(self) -> None:
        self.closed = False

    async def stop(self) -> None:
        self.closed = True

    async def close(self) -> None:
        self.closed = True


async def test_a_stop_does_not_wait_for_an_adoption_step_that_never_answers() -> None:
    runtime = WorkerRuntime(
        Settings(bootstrap="127.0.0.1:1", namespace="t"), Registry(), WorkerOptions()
    )
    never = asyncio.Event()
    step_cancelled = asyncio.Event()

    async def adoption_step() -> None:  # a fence whose coordinator never answers
        try:
            await never.wait()
        finally:
            step_cancelled.set()

    runtime._spawn(adoption_step(), adoption=True)
    writes_done = asyncio.Event()

    async def write() -> None:  # a commit in flight is awaited, never cancelled
        await asyncio.sleep(0.05)
        writes_done.set()

    runtime._spawn(write())
    consumer, admin = _Closes(), _Closes()
    # Without the cancel, this waits for ever (the step above is not bounded).
    await asyncio.wait_for(runtime._shutdown(consumer, admin), timeout=30)
    assert step_cancelled.is_set()
    assert writes_done.is_set()
    assert consumer.closed and admin.closed
