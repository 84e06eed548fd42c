"""Backfills as the shards' changelog holds them: progress, what is left, an ETA.

Shared by `kafkron backfill status` and the web console. The changelog says what
the shard did (fired, running, left, let pass); how the fired runs ended is the
history's (``failed``: runs of the backfill's span whose latest status is a
failure), read only when a database is given.
"""

from __future__ import annotations

from typing import Any

from actors.shard.backfill_state import BackfillState
from actors.shard.state import ScheduleState
from topics.timefmt import format_ms

# Instants counted per backfill when telling what is left: past this the count is a
# lower bound ("100000+"), so a status never walks a year of minutes per schedule.
LEFT_COUNT_MAX = 100_000


def left_count(state: ScheduleState, backfill: BackfillState) -> tuple[int, bool]:
    """Occurrences left in the backfill's ranges, and whether the count is exact."""
    next_after = state.definition.compiled.next_after
    count = 0
    for first_ms, last_ms, _ in backfill.ranges:
        at: int | None = first_ms
        while at is not None and at <= last_ms:
            count += 1
            if count >= LEFT_COUNT_MAX:
                return count, False
            at = next_after(at)
    return count, True


def backfill_json(state: ScheduleState, now_ms: int, failed: int | None = None) -> dict[str, Any]:
    """One schedule's backfill for people and scripts (``state.backfill`` must be set)."""
    backfill = state.backfill
    assert backfill is not None
    left, exact = left_count(state, backfill)
    running = len(backfill.running)
    done = backfill.fired - running
    if backfill.ended_ms is not None:
        status = "cancelled" if backfill.cancelled is not None else "ended"
    elif backfill.cancelled is not None:
        status = "cancelling"
    elif state.paused:
        status = "waiting (schedule paused)"
    else:
        status = "running"
    eta_s: float | None = None
    elapsed_ms = now_ms - backfill.started_ms
    if backfill.ended_ms is None and left and done > 0 and elapsed_ms > 0:
        eta_s = round(left / (done / elapsed_ms) / 1000, 1)
    return {
        "schedule_id": state.id,
        "backfill_id": backfill.backfill_id,
        "status": status,
        "done": done,
        "running": running,
        "left": left,
        "left_exact": exact,
        "failed": failed,
        "passed": backfill.passed,
        "max_parallel": backfill.max_parallel,
        "started": format_ms(backfill.started_ms),
        "ended": None if backfill.ended_ms is None else format_ms(backfill.ended_ms),
        "span": None
        if backfill.first_ms is None or backfill.last_ms is None
        else [format_ms(backfill.first_ms), format_ms(backfill.last_ms)],
        "cancelled": backfill.cancelled,
        "eta_s": eta_s,
    }
