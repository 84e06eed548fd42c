"""``schedule.backfill`` and ``schedule.backfill_cancel``: their types and validation.

A backfill command carries a plan, not a range: the planner (`kafkron backfill`,
docs/DESIGN.md §6.9) knows from the history which occurrences to fire and at which
attempt, and the shard only executes it. So the command is compact and exact::

    {"v": 1, "type": "schedule.backfill", "id": "invoice-nightly",
     "backfill_id": "fix-2026-10", "max_parallel": 4,
     "ranges": [["2026-10-01T00:00:00.000Z", "2026-10-05T00:00:00.000Z", 1],
                ["2026-10-07T00:00:00.000Z", "2026-10-07T00:00:00.000Z", 3]]}

Each range is consecutive occurrences of the schedule, first and last included, to
fire at one attempt number (1 for an occurrence that never ran; a re-run is the
run's next attempt, under the same run id). Ranges are ascending and disjoint. A
plan longer than `RANGES_PER_COMMAND` ranges travels as several commands with the
same ``backfill_id``: each appends its ranges.

    {"v": 1, "type": "schedule.backfill_cancel", "id": "invoice-nightly",
     "backfill_id": "fix-2026-10", "running": true, "reason": "wrong input"}

stops what has not started; with ``running`` it also cancels the backfill's runs in
flight (each by ``run.cancel``'s path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topics.command_fields import (
    FieldError,
    check_keys,
    identifier,
    instant,
    integer,
    string,
)

RANGES_PER_COMMAND = 1000
"""Ranges one command carries (about 60 bytes each: far below the command limit)."""
MAX_PARALLEL = 100
DEFAULT_MAX_PARALLEL = 2
MAX_ATTEMPT = 1_000_000
MAX_BACKFILL_REASON_CHARS = 500
DEFAULT_BACKFILL_CANCEL_REASON = "the backfill was cancelled"

BACKFILL_TYPE = "schedule.backfill"
BACKFILL_CANCEL_TYPE = "schedule.backfill_cancel"

_ENVELOPE = ("v", "type", "id")


@dataclass(frozen=True, slots=True)
class ScheduleBackfill:
    """``schedule.backfill``: fire the occurrences of ``ranges`` (docs/DESIGN.md §6.9)."""

    id: str
    backfill_id: str
    """Names the backfill (1-200 characters, as an id); commands with the same one append."""
    ranges: tuple[tuple[int, int, int], ...]
    """``(first_ms, last_ms, attempt)``, ascending and disjoint."""
    max_parallel: int = DEFAULT_MAX_PARALLEL
    """At most this many of the backfill's runs in flight at once (1-100)."""


@dataclass(frozen=True, slots=True)
class BackfillCancel:
    """``schedule.backfill_cancel``: fire nothing more of ``backfill_id``; with
    ``running``, also cancel its runs in flight."""

    id: str
    backfill_id: str
    running: bool = False
    reason: str = DEFAULT_BACKFILL_CANCEL_REASON


def decode_backfill(body: dict[str, Any], schedule_id: str) -> ScheduleBackfill:
    check_keys(body, "", (*_ENVELOPE, "backfill_id", "ranges", "max_parallel"))
    backfill_id = identifier(body.get("backfill_id"), "backfill_id")
    raw = body.get("ranges")
    if not isinstance(raw, list) or not raw:
        raise FieldError(
            "ranges: expected a non-empty list of [first, last, attempt] such as "
            '[["2026-10-01T00:00:00Z", "2026-10-05T00:00:00Z", 1]]'
        )
    if len(raw) > RANGES_PER_COMMAND:
        raise FieldError(
            f"ranges: at most {RANGES_PER_COMMAND} per command, got {len(raw)}; send the "
            "rest in further commands with the same backfill_id"
        )
    ranges: list[tuple[int, int, int]] = []
    for index, item in enumerate(raw):
        path = f"ranges[{index}]"
        if not isinstance(item, list) or len(item) != 3:
            raise FieldError(f"{path}: expected [first, last, attempt]")
        first_ms = instant(item[0], f"{path}[0]")
        last_ms = instant(item[1], f"{path}[1]")
        attempt = integer(item[2], f"{path}[2]", low=1, high=MAX_ATTEMPT)
        if last_ms < first_ms:
            raise FieldError(f"{path}: its last instant is before its first")
        if ranges and first_ms <= ranges[-1][1]:
            raise FieldError(f"{path}: ranges must be ascending and disjoint")
        ranges.append((first_ms, last_ms, attempt))
    max_parallel = body.get("max_parallel")
    return ScheduleBackfill(
        schedule_id,
        backfill_id,
        tuple(ranges),
        DEFAULT_MAX_PARALLEL
        if max_parallel is None
        else integer(max_parallel, "max_parallel", low=1, high=MAX_PARALLEL),
    )


def decode_backfill_cancel(body: dict[str, Any], schedule_id: str) -> BackfillCancel:
    check_keys(body, "", (*_ENVELOPE, "backfill_id", "running", "reason"))
    backfill_id = identifier(body.get("backfill_id"), "backfill_id")
    running = body.get("running", False)
    if not isinstance(running, bool):
        raise FieldError("running: expected true or false")
    reason = body.get("reason")
    if reason is None:
        return BackfillCancel(schedule_id, backfill_id, running)
    text = string(reason, "reason", max_chars=MAX_BACKFILL_REASON_CHARS)
    if not text.strip():
        raise FieldError('reason: blank; say why, such as "reason": "wrong input"')
    return BackfillCancel(schedule_id, backfill_id, running, text)
