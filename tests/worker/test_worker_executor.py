"""The executor reports every started job's exit exactly once, however it ended.

No Kafka: the executor is driven directly on an event loop. The case that matters
is a job cancelled in the same turn of the loop that started it (a lease lost, a
partition revoked or a cancel record right after ``StartJob``): asyncio then throws
the cancellation into a coroutine that never ran a line, so no ``try`` inside it can
see it. Its slot in the core must still be freed, or the worker wedges with every
slot held by a job that is not running.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from actors.worker.core import Outcome, RunKey
from actors.worker.executor import Executor
from actors.worker.registry import Registry
from topics.command_types import Job
from topics.messages import Run, idempotency_key, parse_run, run_id_for, run_value

T0 = 1_790_000_000_000


def _run(name: str, offset: int) -> tuple[RunKey, Run]:
    run_id = run_id_for(f"s{offset}", T0)
    value = run_value(
        run_id=run_id,
        schedule_id=f"s{offset}",
        task=None,
        scheduled_ms=T0,
        fired_ms=T0,
        attempt=1,
        job=Job(name, {}),
        idempotency_key=idempotency_key(run_id),
        deadline_ms=T0 + 60_000,
    )
    return (0, offset, 1), parse_run(value)


INLINE_THREADS: list[str] = []


def noop_sync_inline(ctx: object) -> None:
    INLINE_THREADS.append(threading.current_thread().name)


def _registry() -> Registry:
    registry = Registry()

    async def noop(ctx: object) -> None:
        return None

    def noop_sync(ctx: object) -> None:
        return None

    async def forever(ctx: object) -> None:
        await asyncio.Event().wait()

    async def stray_cancel(ctx: object) -> None:
        raise asyncio.CancelledError  # as a library's internal cancel would

    async def exits(ctx: object) -> None:
        raise SystemExit(3)

    def boom(ctx: object) -> None:
        raise ValueError("inline boom")

    registry.register("noop_inline", noop_sync_inline, inline=True)
    registry.register("boom_inline", boom, inline=True)
    registry.register("stray_cancel", stray_cancel)
    registry.register("exits", exits)
    registry.register("noop", noop)
    registry.register("noop_sync", noop_sync)
    registry.register("forever", forever)
    return registry


async def _exits_after(actions: list[tuple[str, str, int]]) -> list[tuple[RunKey, Outcome]]:
    exits: list[tuple[RunKey, Outcome]] = []
    executor = Executor(
        _registry(), threads=4, worker="w", on_exit=lambda k, o: exits.append((k, o))
    )
    for verb, name, offset in actions:
        key, run = _run(name, offset)
        if verb == "start":
            executor.start(key, run)
        else:
            executor.cancel(key, "lease lost")
    for _ in range(100):  # let tasks, callbacks and pool threads finish
        if executor.running == 0:
            break
        await asyncio.sleep(0.01)
    await executor.close()
    return exits


def test_an_async_job_cancelled_before_its_first_step_still_reports_its_exit() -> None:
    exits = asyncio.run(_exits_after([("start", "noop", 1), ("cancel", "noop", 1)]))
    assert [(key, outcome.status) for key, outcome in exits] == [((0, 1, 1), "cancelled")]


def test_every_job_of_a_burst_cancelled_at_once_reports_exactly_one_exit() -> None:
    burst = [("start", "noop", i) for i in range(16)] + [("cancel", "noop", i) for i in range(16)]
    exits = asyncio.run(_exits_after(burst))
    assert sorted(key for key, _ in exits) == [(0, i, 1) for i in range(16)]
    assert {outcome.status for _, outcome in exits} == {"cancelled"}


def test_a_job_that_ran_reports_its_own_outcome_once() -> None:
    exits = asyncio.run(_exits_after([("start", "noop", 1), ("start", "noop_sync", 2)]))
    assert sorted((key, outcome.status) for key, outcome in exits) == [
        ((0, 1, 1), "succeeded"),
        ((0, 2, 1), "succeeded"),
    ]


def test_a_running_async_job_cancelled_at_its_await_reports_cancelled_once() -> None:
    async def scenario() -> list[tuple[RunKey, Outcome]]:
        exits: list[tuple[RunKey, Outcome]] = []
        executor = Executor(
            _registry(), threads=2, worker="w", on_exit=lambda k, o: exits.append((k, o))
        )
        key, run = _run("forever", 7)
        executor.start(key, run)
        await asyncio.sleep(0.05)  # it is now waiting at its await
        executor.cancel(key, "stop")
        for _ in range(100):
            if exits:
                break
            await asyncio.sleep(0.01)
        await executor.close()
        return exits

    exits = asyncio.run(scenario())
    assert [(key, o.status, (o.error or {}).get("message")) for key, o in exits] == [
        ((0, 7, 1), "cancelled", "stop")
    ]


def test_a_cancellation_the_worker_did_not_ask_for_is_a_failure_to_retry() -> None:
    """``cancelled`` is final (never retried); a library's stray cancel is not that."""
    exits = asyncio.run(_exits_after([("start", "stray_cancel", 1)]))
    assert [(key, o.status, (o.error or {}).get("type")) for key, o in exits] == [
        ((0, 1, 1), "failed", "CancelledError")
    ]


def test_an_async_job_raising_system_exit_fails_without_ending_the_worker() -> None:
    exits = asyncio.run(_exits_after([("start", "exits", 1), ("start", "noop", 2)]))
    assert sorted((key, o.status, (o.error or {}).get("type")) for key, o in exits) == [
        ((0, 1, 1), "failed", "SystemExit"),
        ((0, 2, 1), "succeeded", None),
    ]


def test_an_inline_job_runs_in_start_and_reports_its_exit_after_start_returned() -> None:
    """No thread, no task: the job has run when `start` returns; its exit comes from
    the next turn of the loop, never from inside `start` (the machine's actions call
    `start`, and must not be re-entered from it)."""

    async def scenario() -> tuple[list[str], list[tuple[RunKey, Outcome]], list[str]]:
        exits: list[tuple[RunKey, Outcome]] = []
        executor = Executor(
            _registry(), threads=2, worker="w", on_exit=lambda k, o: exits.append((k, o))
        )
        INLINE_THREADS.clear()
        for offset in range(3):
            executor.start(*_run("noop_inline", offset))
        ran, seen_in_start = list(INLINE_THREADS), [str(k) for k, _ in exits]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        await executor.close()
        return ran, exits, seen_in_start

    ran, exits, seen_in_start = asyncio.run(scenario())
    assert ran == [threading.main_thread().name] * 3
    assert seen_in_start == []
    assert [(key, o.status) for key, o in exits] == [((0, i, 1), "succeeded") for i in range(3)]


def test_an_inline_job_that_raises_fails_once() -> None:
    exits = asyncio.run(_exits_after([("start", "boom_inline", 1), ("cancel", "boom_inline", 1)]))
    assert [(key, o.status, (o.error or {}).get("message")) for key, o in exits] == [
        ((0, 1, 1), "failed", "inline boom")
    ]


def test_an_async_job_cancelled_after_it_returned_reports_its_own_outcome_once() -> None:
    """Between its return and the turn that reports it, a cancel (twice, even) finds
    it ended: it reports what the job did, once."""

    async def scenario() -> list[tuple[RunKey, Outcome]]:
        exits: list[tuple[RunKey, Outcome]] = []
        executor = Executor(
            _registry(), threads=2, worker="w", on_exit=lambda k, o: exits.append((k, o))
        )
        key, run = _run("noop", 4)
        executor.start(key, run)
        await asyncio.sleep(0)  # its step runs; its exit waits for the next turn
        executor.cancel(key, "lease lost")
        executor.cancel(key, "lease lost")
        for _ in range(5):
            await asyncio.sleep(0)
        await executor.close()
        return exits

    exits = asyncio.run(scenario())
    assert [(key, o.status) for key, o in exits] == [((0, 4, 1), "succeeded")]


def test_an_async_job_cancelled_twice_reports_one_exit() -> None:
    exits = asyncio.run(
        _exits_after([("start", "forever", 1), ("cancel", "forever", 1), ("cancel", "forever", 1)])
    )
    assert [(key, o.status) for key, o in exits] == [((0, 1, 1), "cancelled")]


def test_inline_is_for_plain_functions_only() -> None:
    async def later(ctx: object) -> None:
        return None

    with pytest.raises(ValueError, match="inline=True is for plain functions"):
        Registry().register("later", later, inline=True)
