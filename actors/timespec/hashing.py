"""Stable per-schedule numbers: Jenkins ``H`` values and spread offsets.

Both come from sha256 of the schedule id (never Python's ``hash``, which is salted
per process), so every process, on every machine, at every restart derives the
same minute for ``H`` and the same offset inside a spread window. Each use mixes
in its own label, so the minute and the hour of ``H H * * *`` are independent
draws rather than the same number taken modulo 60 and 24.
"""

from __future__ import annotations

import hashlib


def stable_draw(schedule_id: str, label: str, modulus: int) -> int:
    """A uniform-looking integer in ``[0, modulus)`` fixed by (schedule id, label)."""
    digest = hashlib.sha256(f"{label}\x00{schedule_id}".encode()).digest()
    # 64 bits of hash modulo a small number: the bias is below 2**-50, invisible.
    return int.from_bytes(digest[:8], "big") % modulus


def spread_offset_ms(schedule_id: str, window_s: int) -> int:
    """The stable offset in ``[0, window_s)`` seconds (as ms) added to every fire.

    Millisecond resolution spreads a herd of schedules across the whole window
    rather than onto whole seconds. The offset is the same for every occurrence,
    so a daily job keeps its time of day (EventBridge's flexible window, made
    deterministic). ``window_s <= 0`` means no spread.
    """
    if window_s <= 0:
        return 0
    return stable_draw(schedule_id, "spread", window_s * 1000)
