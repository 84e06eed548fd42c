"""Jobs of the real-broker backfill tests (``--jobs tests.jobs.backfill``).

``test.timed`` writes its own start and end instants, so a test judges a backfill by
what the jobs did (when each began), not only by the run records the scheduler wrote:
a run fired but never started, or started twice, shows here.
"""

from __future__ import annotations

import asyncio
import os
import time

from actors import RunContext, job

_GATE_POLL_S = 0.05


def _mark(log: str, event: str, ctx: RunContext) -> None:
    # One line per event, appended in one write: the worker's event loop runs one job
    # step at a time, so lines never interleave.
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"{event} {ctx.run_id} {ctx.attempt} {time.time_ns() // 1_000_000}\n")


@job("test.timed")
async def timed(
    ctx: RunContext,
    log: str,
    seconds: float = 0.0,
    gate: str | None = None,
    gate_max_s: float = 120.0,
) -> None:
    """Appends ``start RUN_ID ATTEMPT EPOCH_MS`` to the file ``log``, sleeps
    ``seconds``, then waits while the file ``gate`` exists (at most ``gate_max_s``),
    and appends ``end ...``; ``stopped ...`` instead when it is cancelled."""
    _mark(log, "start", ctx)
    try:
        await asyncio.sleep(seconds)
        until = time.monotonic() + gate_max_s
        while gate is not None and os.path.exists(gate) and time.monotonic() < until:
            await asyncio.sleep(_GATE_POLL_S)
    except asyncio.CancelledError:
        _mark(log, "stopped", ctx)
        raise
    _mark(log, "end", ctx)
