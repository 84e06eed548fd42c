"""`topics.closing`: a close or a step that never ends is abandoned, never awaited forever."""

from __future__ import annotations

import ast
import asyncio

import pytest

from tests.kit.paths import REPO
from topics.closing import bounded, within


async def test_a_close_that_swallows_its_cancellation_is_abandoned_not_awaited() -> None:
    release = asyncio.Event()

    async def stubborn_stop() -> None:
        # What aiokafka's stop does when its fetcher waits on an unanswered request:
        # a cancellation is caught and the wait goes on.
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    # asyncio.wait_for would hang here: it waits for the cancelled task to end.
    finished = await asyncio.wait_for(bounded(stubborn_stop(), "stubborn", 0.05), 5.0)
    assert finished is False
    release.set()
    await asyncio.sleep(0)


async def test_a_step_that_swallows_its_cancellation_times_out_and_is_abandoned() -> None:
    """A shard's transaction or restore step under ``asyncio.wait_for`` held the turn
    (and the process's stop) for as long as the cancelled step would not end."""
    release = asyncio.Event()
    cancels = 0

    async def stubborn_step() -> int:
        nonlocal cancels
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                cancels += 1
        return 1

    with pytest.raises(TimeoutError, match="no answer within 0 s"):
        await asyncio.wait_for(within(stubborn_step(), 0.05), 5.0)
    await asyncio.sleep(0)
    assert cancels == 1  # it was told, and left to finish on its own
    release.set()
    await asyncio.sleep(0)


async def test_a_step_in_time_returns_its_result_or_raises_its_error() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def refused() -> int:
        raise RuntimeError("refused")

    assert await within(answer(), 1.0) == 42
    with pytest.raises(RuntimeError, match="refused"):
        await within(refused(), 1.0)


async def test_a_cancelled_caller_cancels_its_step() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def step() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    caller = asyncio.ensure_future(within(step(), 60.0))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.wait_for(cancelled.wait(), 5.0)


def test_the_runtime_loops_never_wait_for_a_cancelled_step() -> None:
    """``asyncio.wait_for`` in a loop that decides ownership or writes: a step that
    swallows its cancellation would hold the loop; `within` abandons it instead."""
    root = REPO
    found = []
    for package in ("actors/scheduler", "actors/worker", "actors/observe"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr == "wait_for":
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    assert found == []


async def test_a_close_that_finishes_or_fails_reports_finished() -> None:
    async def ok() -> None:
        await asyncio.sleep(0)

    async def fails() -> None:
        raise RuntimeError("broker gone")

    assert await bounded(ok(), "ok", 1.0) is True
    assert await bounded(fails(), "fails", 1.0) is True


async def test_an_abandoned_producer_stop_ends_its_sender_and_connections() -> None:
    from topics.closing import stop_producer

    class Client:
        closed = False

        async def close(self) -> None:
            Client.closed = True

    class Sender:
        def __init__(self) -> None:
            self.sender_task = asyncio.ensure_future(asyncio.Event().wait())

    class Producer:
        def __init__(self) -> None:
            self._sender = Sender()
            self.client = Client()

        async def stop(self) -> None:  # waits for an accumulator that never drains
            await asyncio.Event().wait()

    producer = Producer()
    assert await stop_producer(producer, "a stuck producer", 0.05) is False
    await asyncio.sleep(0)
    assert producer._sender.sender_task.cancelled() and Client.closed


# Awaited closes that are not a Kafka client's stop, each bounded in its own way.
NOT_A_CLIENT = {
    # Child processes: terminated after their grace period, then killed.
    ("actors/demo/children.py", "self.stop"),
    ("actors/demo/run.py", "children.stop"),
    # The history's SQLite file: a local close, no network.
    ("actors/history/store.py", "db.close"),
    ("actors/history/store.py", "self._db.close"),
    ("actors/history/store.py", "self.close"),
    # The billing example's SQLite files: local closes too.
    ("actors/examples/billing/jobs.py", "db.close"),
    ("actors/examples/billing/provider.py", "self._db.close"),
    ("actors/examples/billing/store.py", "db.close"),
    # kafkron's own closes, which bound the clients they stop.
    ("actors/observe/exposition.py", "sampler.close"),  # LagSampler.close
    ("actors/scheduler/runtime.py", "runner.close"),  # ShardRunner.close: stop_producer
}


def _unbounded_closes() -> list[str]:
    """Every ``await x.stop()`` / ``await x.close()`` (or one under ``asyncio.wait_for``,
    which waits for a cancelled stop to end) in the product and the benchmarks."""
    root = REPO
    found = []
    for package in ("topics", "actors", "bench"):
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text(), relative)):
                if not isinstance(node, ast.Await) or not isinstance(node.value, ast.Call):
                    continue
                call: ast.expr = node.value
                if (
                    isinstance(node.value.func, ast.Attribute)
                    and node.value.func.attr == "wait_for"
                ):
                    call = node.value.args[0] if node.value.args else node.value
                if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
                    continue
                if call.func.attr not in ("stop", "close"):
                    continue
                what = ast.unparse(call.func)
                if (relative, what) not in NOT_A_CLIENT:
                    found.append(f"{relative}:{node.lineno}: await {ast.unparse(node.value)}")
    return found


def test_every_client_close_is_bounded_and_then_abandoned() -> None:
    """Finding 11: a Kafka client's stop() can wait forever on an unanswered request;
    every one goes through `bounded` or `stop_producer`."""
    assert _unbounded_closes() == []
