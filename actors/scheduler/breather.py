"""Letting the event loop breathe during long stretches of pure computation.

The group heartbeat, the fetcher and the producers' senders all run on the same
event loop as the shards' cores. A turn that applies thousands of records, or a
restore that feeds a hundred thousand schedules, must hand the loop back now
and then, or the heartbeat misses the session timeout and the group takes every
shard of this process away (and the process, on rejoining, takes them back:
a rebalance storm). `Breather.maybe` yields when the budget since the last yield
is spent; calling it costs one clock read.
"""

from __future__ import annotations

import asyncio
import time

DEFAULT_BUDGET_S = 0.05


class Breather:
    def __init__(self, budget_s: float = DEFAULT_BUDGET_S) -> None:
        self._budget_s = budget_s
        self._since = time.monotonic()

    async def maybe(self) -> None:
        """Yield to the event loop if this stretch has run longer than the budget."""
        now = time.monotonic()
        if now - self._since >= self._budget_s:
            await asyncio.sleep(0)
            self._since = time.monotonic()
