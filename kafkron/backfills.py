"""Backfills from Python: plan from the history, send, follow, cancel (docs/DESIGN.md §6.9).

What `kafkron backfill` does, for `Client.backfill`: the plan is made by the pure
planner over the recorder's database (the history is where a schedule's past is),
against the schedule's changelog state, then sent as ``schedule.backfill`` commands.
The plan is as fresh as the history: keep the recorder running.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.history import default_db_path
from actors.history.past import SchedulePast
from actors.shard.backfill import BACKFILL_RANGES_MAX
from actors.shard.backfill_plan import Reprocess, Totals
from actors.shard.state import ScheduleState
from actors.views.backfill_planning import plan, ranges_of, target_of
from topics.command_builders import CommandRecord, InvalidCommand, backfill_commands
from topics.command_fields import FieldError
from topics.command_parts import Instant, instant_text
from topics.timefmt import parse_instant


@dataclass(frozen=True, slots=True)
class BackfillSent:
    """What `Client.backfill` sent: the backfill's id and its plan's totals."""

    schedule_id: str
    backfill_id: str | None
    """None when nothing was to fire (no command was sent)."""
    counts: dict[str, int]
    """Occurrences per action: run, rerun, keep, live, unknown (`backfill_plan.Action`)."""
    to_fire: int
    ranges: int
    commands: int


def planned(
    state: ScheduleState,
    start: Instant,
    end: Instant,
    *,
    reprocess: str = "missing",
    max_parallel: int | None = None,
    backfill_id: str | None = None,
    history_db: Path | str | None = None,
    calendars: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[list[CommandRecord], BackfillSent]:
    """The commands of a backfill of ``state``'s schedule over ``[start, end)``.

    Raises `InvalidCommand` for arguments the shard would reject, `ValueError` for a
    DAG or a range the history cannot tell (`backfill_plan.KnowledgeError`) or a
    calendar the spec names that ``calendars`` (the namespace's, name -> days) lacks,
    and `actors.history.store.HistoryError` without a history database.
    """
    try:
        from_ms = parse_instant(instant_text(start, "start"))
        to_ms = parse_instant(instant_text(end, "end"))
        mode = Reprocess(reprocess)
    except (FieldError, ValueError) as error:
        raise InvalidCommand(str(error)) from None
    if to_ms <= from_ms:
        raise InvalidCommand("end: must be after start")
    target = target_of(state, calendars)
    totals = Totals()
    with SchedulePast(history_db or default_db_path()) as past:
        ranges = ranges_of(plan(past, state.id, target, from_ms, to_ms, mode), totals)
    if len(ranges) > BACKFILL_RANGES_MAX:
        raise ValueError(
            f"the plan has {len(ranges)} ranges, more than the {BACKFILL_RANGES_MAX} a "
            "backfill holds at once; split the range into parts"
        )
    name = backfill_id or f"{state.id}-bf-{int(time.time())}"
    commands = backfill_commands(state.id, name, ranges, max_parallel) if ranges else []
    sent = BackfillSent(
        schedule_id=state.id,
        backfill_id=name if commands else None,
        counts={action.value: n for action, n in totals.counts.items()},
        to_fire=totals.to_fire,
        ranges=len(ranges),
        commands=len(commands),
    )
    return commands, sent
