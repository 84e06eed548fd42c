"""Who decides an attempt that missed its deadline: the one rule both actors share.

A run's ``deadline`` is enforced by the worker running it: at the deadline the job
is asked to stop and the worker writes ``timed_out``. The shard that emitted the
attempt waits ``TIMEOUT_MARGIN_MS`` longer (for that result to be committed, or for
a worker that died silently) and then writes ``timed_out`` itself and retries.

So that (run_id, attempt) never gets two results, the verdict belongs to the shard
from ``deadline + TIMEOUT_MARGIN_MS`` on: a worker writes no result of its own for an
attempt at or past that instant (``shard_decides``).
"""

from __future__ import annotations

TIMEOUT_MARGIN_MS = 30_000
"""How long after an attempt's deadline the shard decides it as ``timed_out``."""


def shard_decides(deadline_ms: int, now_ms: int) -> bool:
    """True once the shard owns the verdict of an attempt with ``deadline_ms``."""
    return now_ms >= deadline_ms + TIMEOUT_MARGIN_MS
