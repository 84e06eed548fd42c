"""A turn's job exits reach the core in one call (docs/DESIGN.md §8.3): the same
results and the same runs started as one ``job_exited`` each, with one fill for all.

Pure: the core driven by events, and the executor on an event loop without Kafka.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.worker.core import Outcome, RunKey, StartJob, WorkerCore
from actors.worker.executor import Executor
from tests.worker.test_worker_core import T0, make_core, results_of, run_record
from tests.worker.test_worker_executor import _registry, _run

OK = Outcome("succeeded")
FAILED = Outcome("failed", {"type": "ValueError", "message": "boom"})


def _started(actions: list[object]) -> list[RunKey]:
    return [action.key for action in actions if isinstance(action, StartJob)]


def test_a_turns_exits_record_each_result_and_start_the_freed_slots_next_runs() -> None:
    core = make_core(concurrency=2)
    started = [key for offset in range(4) for key in _started(core.receive(run_record(offset), T0))]
    assert started == [(0, 0, 0), (0, 1, 0)]  # two slots: offsets 2 and 3 wait
    actions = core.jobs_exited([((0, 0, 0), OK), ((0, 1, 0), FAILED)], T0 + 5)
    assert _started(actions) == [(0, 2, 0), (0, 3, 0)]
    results = results_of(core.take_commit(0))
    assert [(r.schedule_id, r.status) for r in results] == [("s0", "succeeded"), ("s1", "failed")]


def test_an_exit_reported_twice_in_one_turn_is_recorded_once() -> None:
    core = make_core(concurrency=2)
    core.receive(run_record(0), T0)
    assert core.jobs_exited([((0, 0, 0), OK), ((0, 0, 0), FAILED)], T0 + 5) == []
    assert [r.status for r in results_of(core.take_commit(0))] == ["succeeded"]


def _drive(core: WorkerCore, runs: int, batches: list[int], by_turn: bool) -> list[object]:
    """Deliver ``runs`` runs, then end the running jobs in turns of ``batches`` exits
    (oldest first), one ``jobs_exited`` per turn or one ``job_exited`` per exit, until
    none runs; every commit's (schedule id, status) and the final offset."""
    running: list[RunKey] = []
    for offset in range(runs):
        running += _started(core.receive(run_record(offset), T0))
    seen: list[object] = []
    turn = 0
    while running:
        size = batches[turn % len(batches)]
        turn += 1
        ending, running = running[:size], running[size:]
        exits = [(key, OK if key[1] % 3 else FAILED) for key in ending]
        if by_turn:
            running += _started(core.jobs_exited(exits, T0 + turn))
        else:
            for key, outcome in exits:
                running += _started(core.job_exited(key, outcome, T0 + turn))
        commit = core.take_commit(0)
        if commit is not None:
            seen += [(r.schedule_id, r.status) for r in results_of(commit)]
            seen.append(("offset", commit.offset))
            core.commit_done(commit)
    return seen


@settings(max_examples=60, deadline=None)
@given(
    concurrency=st.integers(1, 5),
    max_open=st.integers(1, 8),
    max_backlog=st.integers(1, 6),
    runs=st.integers(0, 30),
    batches=st.lists(st.integers(1, 6), min_size=1, max_size=5),
)
def test_exits_by_the_turn_commit_what_exits_one_by_one_commit(
    concurrency: int, max_open: int, max_backlog: int, runs: int, batches: list[int]
) -> None:
    def core() -> WorkerCore:
        return make_core(concurrency=concurrency, max_open=max_open, max_backlog=max_backlog)

    one_by_one = _drive(core(), runs, batches, by_turn=False)
    by_turn = _drive(core(), runs, batches, by_turn=True)
    assert by_turn == one_by_one


def _executor(calls: list[list[tuple[RunKey, Outcome]]]) -> Executor:
    return Executor(_registry(), threads=2, worker="w", on_exits=calls.append)


def test_the_async_jobs_ending_in_one_turn_are_reported_in_one_call() -> None:
    async def scenario() -> list[list[tuple[RunKey, Outcome]]]:
        calls: list[list[tuple[RunKey, Outcome]]] = []
        executor = _executor(calls)
        for offset in range(5):
            executor.start(*_run("noop", offset))
        for _ in range(100):
            if executor.running == 0:
                break
            await asyncio.sleep(0.01)
        await executor.close()
        return calls

    calls = asyncio.run(scenario())
    assert [[(key, o.status) for key, o in call] for call in calls] == [
        [((0, offset, 1), "succeeded") for offset in range(5)]
    ]


def test_a_sync_jobs_exit_comes_alone() -> None:
    async def scenario() -> list[list[tuple[RunKey, Outcome]]]:
        calls: list[list[tuple[RunKey, Outcome]]] = []
        executor = _executor(calls)
        executor.start(*_run("noop_sync", 7))
        for _ in range(200):
            if executor.running == 0:
                break
            await asyncio.sleep(0.01)
        await executor.close()
        return calls

    assert [[(k, o.status) for k, o in call] for call in asyncio.run(scenario())] == [
        [((0, 7, 1), "succeeded")]
    ]


def test_an_executor_reports_to_exactly_one_of_its_two_callbacks() -> None:
    with pytest.raises(ValueError):
        Executor(_registry(), threads=1, worker="w")
    with pytest.raises(ValueError):
        Executor(
            _registry(), threads=1, worker="w", on_exit=lambda k, o: None, on_exits=lambda e: None
        )


def test_a_turn_whose_exits_cannot_be_handled_together_hands_each_over_alone() -> None:
    calls: list[list[RunKey]] = []

    def on_exits(exits: list[tuple[RunKey, Outcome]]) -> None:
        calls.append([key for key, _ in exits])
        if len(exits) > 1 or exits[0][0][1] == 1:
            raise RuntimeError("a bug in handling an exit")

    async def scenario() -> None:
        executor = Executor(_registry(), threads=2, worker="w", on_exits=on_exits)
        for offset in range(3):
            executor.start(*_run("noop", offset))
        for _ in range(100):
            if executor.running == 0:
                break
            await asyncio.sleep(0.01)
        await executor.close()

    asyncio.run(scenario())
    assert calls == [[(0, 0, 1), (0, 1, 1), (0, 2, 1)], [(0, 0, 1)], [(0, 1, 1)], [(0, 2, 1)]]
