"""Jobs written as the README tells job authors to: every name from ``kafkron``.

`tests/worker/test_job_author_names.py` loads this module the way ``kafkron worker
--jobs tests.jobs.authors`` does and runs each job.
"""

from __future__ import annotations

import time

from kafkron import NonRetryable, RunCancelled, RunContext, job


class AccountDeleted(NonRetryable):
    """A failure another attempt cannot mend."""


@job("authors.charge")
def charge(ctx: RunContext, customer: str = "c-1") -> None:
    raise AccountDeleted(f"customer {customer} on attempt {ctx.attempt}")


@job("authors.loop_until_cancelled")
def loop_until_cancelled(ctx: RunContext) -> None:
    """Heartbeats until the worker asks it to stop; lets `RunCancelled` propagate."""
    try:
        while True:
            ctx.heartbeat({"at": time.monotonic()})
            time.sleep(0.01)
    except RunCancelled as stop:
        raise RunCancelled(f"stopped: {stop.reason}") from None


@job("authors.greet")
async def greet(ctx: RunContext, name: str = "world") -> None:
    if not name:
        raise NonRetryable("nobody to greet")
