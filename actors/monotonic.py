"""The processes' monotonic clock, in milliseconds.

It counts time the host spent suspended (Linux's ``CLOCK_BOOTTIME``): a suspended
laptop or a paused VM did live through those hours, so a standby's staleness, the
wall clock's step check and the worker's broker-time floor must see them. No step
of the wall clock moves it.
"""

from __future__ import annotations

import time

_MONO_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


def monotonic_ms() -> int:
    return time.clock_gettime_ns(_MONO_CLOCK) // 1_000_000
