"""The no-op jobs the end-to-end benchmarks run (``kafkron worker --jobs noop_jobs``).

``bench.noop`` is an async job that returns at once: what is measured is kafkron's
own path per run (fire, deliver, start, result, commit), not a job's work.
``bench.noop_inline`` is the same job declared ``inline=True`` (`actors.worker.registry`).
"""

from __future__ import annotations

from actors import RunContext, job


@job("bench.noop")
async def noop(ctx: RunContext) -> None:
    return None


@job("bench.noop_inline", inline=True)
def noop_inline(ctx: RunContext) -> None:
    """The same no-op declared inline: run on the worker's loop, no task, no thread."""
    return None
