"""The worker's executor alone: no-op jobs started and their exits reported, per second.

What a worker pays its event loop per run, without Kafka: ``--jobs`` runs are
started on an `Executor` at once and the clock stops when the last exit has been
reported (CPU seconds of this process, best of ``--repeats``). Three kinds of job:
``async`` (a task each), ``inline`` (``@job(name, inline=True)``: no task, no
thread) and ``sync`` (the thread pool).

Baseline, measured in the same run on the same loop: asyncio's own minimum for a
task per job, ``loop.create_task`` of the same no-op coroutine with a done callback
that counts it; the ratio is the executor's rate over that one.

    python bench/executor.py [--jobs 20000] [--repeats 5] [--loop asyncio|uvloop]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable

from actors.event_loop import chosen, loop_kind, new_event_loop
from actors.worker.core import RunKey
from actors.worker.executor import Executor
from actors.worker.registry import Registry
from topics.closing import bounded
from topics.command_types import Job
from topics.messages import Run, idempotency_key, parse_run, run_id_for, run_value

T0 = 1_790_000_000_000


async def _noop(ctx: object) -> None:
    return None


def _noop_sync(ctx: object) -> None:
    return None


def _registry() -> Registry:
    registry = Registry()
    registry.register("async", _noop)
    registry.register("inline", _noop_sync, inline=True)
    registry.register("sync", _noop_sync)
    return registry


def _runs(job: str, count: int) -> list[tuple[RunKey, Run]]:
    runs = []
    for i in range(count):
        run_id = run_id_for(f"s{i}", T0)
        value = run_value(
            run_id=run_id,
            schedule_id=f"s{i}",
            task=None,
            scheduled_ms=T0,
            fired_ms=T0,
            attempt=1,
            job=Job(job, {}),
            idempotency_key=idempotency_key(run_id),
            deadline_ms=T0 + 60_000,
        )
        runs.append(((0, i, 1), parse_run(value)))
    return runs


async def _until(done: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError
        await asyncio.sleep(0)


async def executor_rate(job: str, count: int, repeats: int, timeout_s: float) -> float:
    registry, runs = _registry(), _runs(job, count)
    best = float("inf")
    for _ in range(repeats):
        exited: list[RunKey] = []
        executor = Executor(
            registry,
            threads=8,
            worker="bench",
            on_exit=lambda key, _: exited.append(key),  # noqa: B023
        )
        started = time.process_time()
        for key, run in runs:
            executor.start(key, run)
        await _until(lambda: len(exited) >= count, timeout_s)  # noqa: B023 (this repeat's)
        best = min(best, time.process_time() - started)
        await bounded(executor.close(), "the executor")
    return count / best


async def bare_tasks_rate(count: int, repeats: int, timeout_s: float) -> float:
    loop = asyncio.get_running_loop()
    best = float("inf")
    for _ in range(repeats):
        ended = [0]

        def count_one(task: object, ended: list[int] = ended) -> None:
            ended[0] += 1

        started = time.process_time()
        for _ in range(count):
            loop.create_task(_noop(None)).add_done_callback(count_one)
        await _until(lambda: ended[0] >= count, timeout_s)  # noqa: B023 (this repeat's)
        best = min(best, time.process_time() - started)
    return count / best


async def main(args: argparse.Namespace) -> int:
    kind = loop_kind(asyncio.get_running_loop())
    print(f"loop {kind}, {args.jobs:,} jobs, best of {args.repeats}", file=sys.stderr)
    try:
        base = await bare_tasks_rate(args.jobs, args.repeats, args.timeout_s)
        print(f"baseline: create_task + done callback: {base:,.0f}/s", file=sys.stderr)
        rates = {}
        for job in ("async", "inline", "sync"):
            rates[job] = await executor_rate(job, args.jobs, args.repeats, args.timeout_s)
            print(f"{job}: {rates[job]:,.0f} jobs/s", file=sys.stderr)
    except TimeoutError:
        print(f"bench executor: could not measure (a phase took over {args.timeout_s:.0f} s)")
        return 1
    print(
        f"bench executor: loop={kind} jobs={args.jobs} async_per_s={rates['async']:.0f} "
        f"inline_per_s={rates['inline']:.0f} sync_per_s={rates['sync']:.0f} "
        f"bare_tasks_per_s={base:.0f} async_vs_bare={rates['async'] / base:.2f} "
        f"inline_vs_bare={rates['inline'] / base:.2f}"
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--timeout-s", type=float, default=120.0, help="bound of each phase")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default=None)
    args = parser.parse_args()
    loop = new_event_loop(chosen(args.loop))
    try:
        sys.exit(loop.run_until_complete(main(args)))
    finally:
        loop.close()
