"""Where the scheduler runtime reads the time.

The runtime never calls ``time.time()`` itself: it asks a `Clock`, so the simulation
can drive the same code with a virtual clock (which implements this protocol too).
Instants are ``int`` milliseconds since the epoch, UTC, like everywhere in kafkron.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of wall-clock instants in epoch milliseconds."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The machine's wall clock (``CLOCK_REALTIME``), truncated to milliseconds.

    Wall time, not monotonic time: schedules are due at wall instants, and the skew
    estimator (`actors.scheduler.skew`) compares exactly this clock with the broker's.
    """

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000
