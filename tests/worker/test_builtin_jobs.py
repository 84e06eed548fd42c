"""Built-in jobs (a target's carrier, ``kafkron.*``): only kafkron registers them, the
executor hands them the run and takes the outcome they return, and the core writes
that outcome's ``target`` into the result."""

from __future__ import annotations

import asyncio

import pytest

from actors.worker.core import Outcome, RunKey
from actors.worker.executor import Executor
from actors.worker.registry import Registry, job
from tests.worker.test_worker_core import make_core, results_of, run_record
from tests.worker.test_worker_executor import _run
from topics.messages import Run
from topics.vocabulary import RunStatus

TARGET = {"http": {"status": 503, "duration_ms": 12, "body": "busy"}}
ERROR = {"type": "HttpStatus", "message": "HTTP 503", "retry_after_s": "9"}


def test_a_job_may_not_take_a_kafkron_name() -> None:
    with pytest.raises(ValueError, match="kafkron's own"):
        job("kafkron.http", registry=Registry())(lambda ctx: None)


def test_a_builtin_must_take_a_kafkron_name() -> None:
    async def send(run: Run) -> Outcome:
        return Outcome(RunStatus.SUCCEEDED)

    registry = Registry()
    with pytest.raises(ValueError, match="must start"):
        registry.register_builtin("http", send)
    spec = registry.register_builtin("kafkron.http", send)
    assert spec.builtin and "kafkron.http" in registry


async def test_the_executor_hands_a_builtin_the_run_and_keeps_its_outcome() -> None:
    seen: list[Run] = []

    async def send(run: Run) -> Outcome:
        seen.append(run)
        return Outcome(RunStatus.FAILED, ERROR, TARGET)

    registry = Registry()
    registry.register_builtin("kafkron.http", send)
    exits: list[tuple[RunKey, Outcome]] = []
    executor = Executor(registry, threads=1, worker="w", on_exit=lambda k, o: exits.append((k, o)))
    key, run = _run("kafkron.http", 0)
    executor.start(key, run)
    for _ in range(100):
        if exits:
            break
        await asyncio.sleep(0.01)
    await executor.close()
    assert seen == [run]
    assert exits == [(key, Outcome(RunStatus.FAILED, ERROR, TARGET))]


def test_the_core_writes_the_outcomes_target_and_retry_after_into_the_result() -> None:
    core = make_core()
    core.receive(run_record(0), 1_790_000_000_000)
    core.job_exited((0, 0, 0), Outcome(RunStatus.FAILED, ERROR, TARGET), 1_790_000_000_050)
    [result] = results_of(core.take_commit(0))
    assert result.target == TARGET and result.error == ERROR
