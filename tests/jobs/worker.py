"""Jobs the worker integration tests run (``--jobs tests.jobs.worker``).

Each job appends one line per start and per end to ``$KAFKRON_TEST_MARKS`` so a test
can see which worker ran which attempt, even when the result never became visible.
"""

from __future__ import annotations

import asyncio
import os
import time

from actors import RunContext, job
from actors.worker import RunCancelled


def _mark(event: str, ctx: RunContext) -> None:
    path = os.environ.get("KAFKRON_TEST_MARKS")
    if path:
        with open(path, "a", encoding="utf-8") as marks:
            marks.write(f"{event} {ctx.run_id} {ctx.attempt} {ctx.worker}\n")


@job("test.noop")
async def noop(ctx: RunContext) -> None:
    return None


@job("test.sleep")
async def sleep(ctx: RunContext, seconds: float = 1.0) -> None:
    _mark("start", ctx)
    await asyncio.sleep(seconds)
    _mark("end", ctx)


@job("test.sleep_sync")
def sleep_sync(ctx: RunContext, seconds: float = 1.0) -> None:
    """A sync job that checks in with heartbeat() every 50 ms, as long jobs should."""
    _mark("start", ctx)
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        ctx.heartbeat({"left_s": until - time.monotonic()})
        time.sleep(0.05)
    _mark("end", ctx)


@job("test.fail")
def fail(ctx: RunContext, message: str = "boom") -> None:
    _mark("start", ctx)
    raise ValueError(f"{message} on attempt {ctx.attempt}")


@job("test.fail_until_attempt")
def fail_until_attempt(ctx: RunContext, succeed_at: int = 3) -> None:
    """Fails every attempt before ``succeed_at``: a run that dead-letters, then a replay works."""
    if ctx.attempt < succeed_at:
        raise RuntimeError(f"attempt {ctx.attempt} fails on purpose (succeeds at {succeed_at})")


@job("test.stoppable")
async def stoppable(ctx: RunContext, seconds: float = 60.0) -> None:
    """Sleeps, and marks "stopped" when it is cancelled at its await."""
    _mark("start", ctx)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _mark("stopped", ctx)
        raise
    _mark("end", ctx)


@job("test.stoppable_sync")
def stoppable_sync(ctx: RunContext, seconds: float = 60.0) -> None:
    """A sync job that heartbeats every 50 ms (with its progress) and marks "stopped"
    when told to stop."""
    _mark("start", ctx)
    until = time.monotonic() + seconds
    beats = 0
    try:
        while time.monotonic() < until:
            beats += 1
            ctx.heartbeat({"beats": beats})
            time.sleep(0.05)
    except RunCancelled:
        _mark("stopped", ctx)
        raise
    _mark("end", ctx)


@job("test.keyed_sleep")
async def keyed_sleep(ctx: RunContext, seconds: float = 0.5) -> None:
    """Marks its start and, however it exits (done, cancelled, revoked), its end: the
    job's own start/end log a concurrency-key test judges (a kill -9 writes no end)."""
    _mark("start", ctx)
    try:
        await asyncio.sleep(seconds)
    finally:
        _mark("end", ctx)


@job("test.rate_mark")
async def rate_mark(ctx: RunContext, seconds: float = 0.1) -> None:
    """Marks its start with the wall clock's milliseconds (in its own file: the rate
    limit test judges every second's starts by them), then sleeps."""
    path = os.environ.get("KAFKRON_TEST_MARKS")
    if path:
        with open(f"{path}.starts", "a", encoding="utf-8") as marks:
            marks.write(f"{ctx.run_id} {ctx.attempt} {ctx.worker} {time.time_ns() // 1_000_000}\n")
    await asyncio.sleep(seconds)
