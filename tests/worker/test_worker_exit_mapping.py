"""However a job ends, its exit is reported, and never as a success it did not have.

An exception whose ``str()`` raises, a cancel reason JSON cannot carry, a call that
returned a coroutine instead of running it: each is a job author's bug, and each must
still end in exactly one reported exit with a result that can be written (a lost exit
keeps its slot taken until the deadline; docs/DESIGN.md §8.3).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from actors.worker.core import Outcome
from actors.worker.errors import RunCancelled, error_of
from actors.worker.executor import Executor
from actors.worker.registry import Registry
from tests.worker.test_worker_executor import _run

NAME = b"report-\xff.csv".decode("utf-8", "surrogateescape")
DONE: list[str] = []


class Unprintable(Exception):
    def __str__(self) -> str:  # a job author's bug: a typo in __str__
        raise AttributeError("'Unprintable' object has no attribute 'cdoe'")


async def real_work(ctx: object) -> None:
    DONE.append("did the work")


def _registry() -> Registry:
    registry = Registry()

    async def bad_async(ctx: object) -> None:
        raise Unprintable()

    def bad_sync(ctx: object) -> None:
        raise Unprintable()

    def cancelled_sync(ctx: object) -> None:
        raise RunCancelled(f"input {NAME} vanished")

    def wrapper(ctx: object) -> Any:  # a decorator without functools.wraps, say
        return real_work(ctx)

    async def returns_coroutine(ctx: object) -> Any:
        return real_work(ctx)

    async def returns_task(ctx: object) -> Any:
        async def slow_work() -> None:
            await asyncio.sleep(0)  # its work, on the loop's next turns
            DONE.append("did the work")

        return asyncio.get_running_loop().create_task(slow_work())

    registry.register("bad_async", bad_async)
    registry.register("bad_sync", bad_sync)
    registry.register("cancelled_sync", cancelled_sync)
    registry.register("wrapper", wrapper)
    registry.register("wrapper_inline", wrapper, inline=True)
    registry.register("returns_coroutine", returns_coroutine)
    registry.register("returns_task", returns_task)
    return registry


def _exits_of(name: str) -> list[Outcome]:
    async def scenario() -> list[Outcome]:
        seen: list[Outcome] = []
        executor = Executor(
            _registry(),
            threads=1,
            worker="w",
            on_exits=lambda exits: seen.extend(o for _, o in exits),
        )
        executor.start(*_run(name, 1))
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.01)
        running = executor.running
        await executor.close()
        assert running == 0, f"{name}: the job ended but the executor still holds it"
        return seen

    return asyncio.run(scenario())


def test_error_of_an_exception_whose_str_raises_names_it_unprintable() -> None:
    assert error_of(Unprintable()) == {
        "type": "Unprintable",
        "message": "<unprintable Unprintable>",
    }


def test_an_async_job_raising_an_unprintable_exception_is_reported_failed() -> None:
    [outcome] = _exits_of("bad_async")  # the old code lost this exit
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error["message"] == "<unprintable Unprintable>"


def test_a_sync_job_raising_an_unprintable_exception_is_reported_failed() -> None:
    [outcome] = _exits_of("bad_sync")
    assert outcome.status == "failed"


def test_a_cancel_reason_holding_a_lone_surrogate_is_escaped() -> None:
    [outcome] = _exits_of("cancelled_sync")
    assert outcome.status == "cancelled" and outcome.error is not None
    assert outcome.error["message"] == "input report-\\udcff.csv vanished"
    orjson.dumps(outcome.error)


def test_a_plain_job_returning_a_coroutine_fails_without_its_work_run() -> None:
    for name in ("wrapper", "wrapper_inline", "returns_coroutine", "returns_task"):
        DONE.clear()
        [outcome] = _exits_of(name)
        assert outcome.status == "failed", name
        assert outcome.error == {
            "type": "NonRetryable",  # a registration bug: another attempt does the same
            "message": "TypeError: the job returned an awaitable (a coroutine, a task or a"
            " future): register the async function itself",
        }
        # Closed or cancelled, not run behind the result's back (a task left running
        # would do its work beside whatever the failed run lets happen next).
        assert DONE == [], name
