"""A backfill's plan from the changelog and the history (docs/DESIGN.md §6.9).

What `kafkron backfill`, the Python client and the benchmark share: the schedule's
rules and live cursor from its changelog state (`Target`), and the streamed steps of
the pure planner (`actors.shard.backfill_plan`) over the history's runs (`plan`);
`ranges_of` folds them into the ranges a ``schedule.backfill`` command carries.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

import orjson

from actors.audit.walk import compile_definition
from actors.history.past import SchedulePast
from actors.shard.backfill_plan import (
    Range,
    Reprocess,
    Step,
    Totals,
    check_knowledge,
    compact_ranges,
    occurrences,
    plan_steps,
)
from actors.shard.dag_definition import DagDefinition
from actors.shard.state import ScheduleState
from topics.calendar_days import calendar_names, parse_calendar_days
from topics.spec_compiler import CompiledSpec


@dataclass(frozen=True, slots=True)
class Target:
    """What the plan needs of the schedule, from the changelog."""

    compiled: CompiledSpec
    zone: ZoneInfo | None  # None: UTC
    live_next_ms: int | None
    handled_ms: int | None
    dag: bool = False  # a DAG: its occurrences are DAG runs


def target_of(
    state: ScheduleState, calendars: Mapping[str, Mapping[str, Any]] | None = None
) -> Target:
    """The schedule's (or the DAG's) rules and live cursor. A spec that names calendars
    is compiled with their days as ``{ns}.calendars`` holds them now (``calendars``:
    name -> calendar object, `actors.views.calendars.read_calendars`), the book the
    shard checks the plan's instants against; `ValueError` naming the calendar while
    one is unknown (not created, or deleted: the schedule waits, and so does its
    backfill)."""
    definition = state.definition
    doc = orjson.loads(state.def_bytes)
    spec = doc["spec"]
    zone_name = spec.get("tz")
    zone = None if zone_name in (None, "UTC") else ZoneInfo(zone_name)
    dag = isinstance(definition, DagDefinition)
    compiled = definition.compiled
    names = calendar_names(spec)
    if names:
        known = calendars or {}
        missing = [name for name in names if name not in known]
        if missing:
            raise ValueError(
                f"schedule {state.id!r} names calendar {missing[0]!r}, which the namespace "
                "does not hold (not created yet, or deleted): the schedule waits for it, "
                "and a backfill can be planned once it exists (`kafkron calendar add`)"
            )
        days = {name: parse_calendar_days(known[name], f"calendar {name!r}") for name in names}
        compiled = compile_definition(doc, state.id, days)
    return Target(compiled, zone, state.next_ms, state.handled_ms(), dag)


def plan(
    past: SchedulePast,
    schedule_id: str,
    target: Target,
    from_ms: int,
    to_ms: int,
    reprocess: Reprocess,
) -> Iterator[Step]:
    """The plan's steps, streamed; `KnowledgeError` before the first if it cannot be made."""
    known_from_ms, known_to_ms = past.known_range(schedule_id)
    check_knowledge(from_ms, known_from_ms, reprocess)
    return plan_steps(
        occurrences(target.compiled, from_ms, to_ms),
        past.runs(schedule_id, from_ms, to_ms, dag=target.dag),
        reprocess,
        live_next_ms=target.live_next_ms,
        handled_ms=target.handled_ms,
        known_to_ms=known_to_ms,
        dag=target.dag,
    )


def ranges_of(steps: Iterator[Step], totals: Totals) -> list[Range]:
    """The plan's ranges (`compact_ranges`), counting every step into ``totals``."""

    def counted() -> Iterator[Step]:
        for step in steps:
            totals.add(step)
            yield step

    return list(compact_ranges(counted()))
