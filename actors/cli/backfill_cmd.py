"""`kafkron backfill ID --from T --to T [--reprocess R] [--max-parallel N] --dry-run`.

Plans a backfill of a schedule over ``[from, to)`` and prints it: every occurrence
by the schedule's own rules (its compiled spec from the changelog: zone, DST policy,
bounds), its local wall time, what the backfill would do with it and why, and the
totals. The plan is made where the schedule's past is, in the recorder's database
(``--db``, as `kafkron history`), by the pure planner
`actors.shard.backfill_plan`; it streams, so a year of an every-minute schedule is
never in memory at once (docs/DESIGN.md §6.9).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO
from zoneinfo import ZoneInfo

import orjson

from actors.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, output
from actors.history import default_db_path
from actors.history.past import SchedulePast
from actors.history.store import HistoryError
from actors.shard.backfill_plan import (
    FIRES,
    KnowledgeError,
    Reprocess,
    Step,
    Totals,
    check_knowledge,
    occurrences,
    plan_steps,
)
from actors.shard.dag_definition import DagDefinition
from actors.shard.state import ScheduleState, decode_schedule
from actors.views.schedules import latest_states
from actors.views.tail import TailError, read_to_end
from topics.names import Settings, TopicKind
from topics.spec_compiler import CompiledSpec
from topics.timefmt import format_ms, parse_instant

DEFAULT_MAX_PARALLEL = 2

_EPILOG = """\
examples:
  kafkron backfill invoice-nightly --from 2026-09-01T00:00:00Z --to 2026-10-11T00:00:00Z --dry-run
  kafkron backfill etl-hourly --from 2026-10-10T00:00:00Z --to 2026-10-11T00:00:00Z \\
      --reprocess failed --dry-run --json

--reprocess:
  missing (default)  occurrences that never fired, or were missed or skipped
  failed             those too, and runs that were dead-lettered
  all                every occurrence (a re-run is the run's next attempt, same run id)

Each line: the occurrence (UTC), its local wall time, the action (run: attempt 1 of an
occurrence that never ran; rerun: the run's next attempt; keep; live: the live schedule
fires it; unknown: the recorder has not recorded it yet) and why. The plan is as fresh
as the history: run `kafkron recorder` and plan again just before backfilling.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "backfill",
        help="fill or re-run a time range of a schedule (--dry-run prints the plan)",
        description="Plan a backfill of a schedule over [--from, --to) from the history.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("id", help="the schedule's id")
    parser.add_argument("--from", dest="from_", required=True, metavar="T", help="RFC 3339")
    parser.add_argument("--to", required=True, metavar="T", help="RFC 3339, excluded")
    parser.add_argument(
        "--reprocess", choices=[r.value for r in Reprocess], default=Reprocess.MISSING.value
    )
    parser.add_argument(
        "--max-parallel",
        type=int,
        default=DEFAULT_MAX_PARALLEL,
        metavar="N",
        help=f"backfill runs in flight at once (default {DEFAULT_MAX_PARALLEL})",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, send nothing")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--db",
        default=None,
        help="history database (env KAFKRON_HISTORY_DB, default .kafkron/history.db)",
    )
    parser.set_defaults(func=run)


@dataclass(frozen=True, slots=True)
class Target:
    """What the plan needs of the schedule, from the changelog."""

    compiled: CompiledSpec
    zone: ZoneInfo | None  # None: UTC
    live_next_ms: int | None
    handled_ms: int | None


def target_of(state: ScheduleState) -> Target:
    """The schedule's rules and live cursor; ``ValueError`` for a DAG (not yet planned)."""
    definition = state.definition
    if isinstance(definition, DagDefinition):
        raise ValueError(f"{state.id} is a DAG; a DAG backfill is not supported by this version")
    spec = orjson.loads(state.def_bytes)["spec"]
    zone_name = spec.get("tz")
    zone = None if zone_name in (None, "UTC") else ZoneInfo(zone_name)
    return Target(definition.compiled, zone, state.next_ms, state.handled_ms())


def run(args: argparse.Namespace) -> int:
    if args.max_parallel < 1:
        return output.fail("backfill", "--max-parallel must be at least 1", EXIT_USAGE)
    try:
        from_ms, to_ms = parse_instant(args.from_), parse_instant(args.to)
    except ValueError as exc:
        return output.fail("backfill", str(exc), EXIT_USAGE)
    if to_ms <= from_ms:
        return output.fail("backfill", "--to must be after --from", EXIT_USAGE)
    if not args.dry_run:
        return output.fail(
            "backfill",
            "this version plans only: pass --dry-run (the shard's schedule.backfill "
            "command that runs a plan is not in this version)",
            EXIT_USAGE,
        )
    try:
        state = asyncio.run(_schedule_state(args.id))
    except TailError as exc:
        return output.fail("backfill", str(exc))
    if state is None:
        return output.fail("backfill", f"no schedule {args.id!r} in the changelog")
    try:
        target = target_of(state)
    except ValueError as exc:
        return output.fail("backfill", str(exc))
    db = args.db or default_db_path()
    try:
        with SchedulePast(db) as past:
            totals = print_plan(
                past, args.id, target, from_ms, to_ms, Reprocess(args.reprocess), args.json
            )
    except (HistoryError, KnowledgeError) as exc:
        return output.fail("backfill", str(exc))
    return EXIT_OK if totals is not None else EXIT_FAILURE


async def _schedule_state(schedule_id: str) -> ScheduleState | None:
    settings = Settings.from_env()
    records = await read_to_end(settings, settings.topic(TopicKind.SCHEDULES))
    value = latest_states(records).get(schedule_id)
    return None if value is None else decode_schedule(value)


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
        past.runs(schedule_id, from_ms, to_ms),
        reprocess,
        live_next_ms=target.live_next_ms,
        handled_ms=target.handled_ms,
        known_to_ms=known_to_ms,
    )


def print_plan(
    past: SchedulePast,
    schedule_id: str,
    target: Target,
    from_ms: int,
    to_ms: int,
    reprocess: Reprocess,
    as_json: bool,
    out: TextIO | None = None,
) -> Totals:
    """Print every step and the totals; returns the totals."""
    out = out or sys.stdout
    totals = Totals()
    write = out.write
    local = _local_text(target.zone)
    for step in plan(past, schedule_id, target, from_ms, to_ms, reprocess):
        totals.add(step)
        at = format_ms(step.scheduled_ms)
        if as_json:
            write(
                orjson.dumps(
                    {
                        "scheduled_at": at,
                        "local": local(step.scheduled_ms),
                        "action": step.action.value,
                        "attempt": step.attempt,
                        "reason": step.reason,
                    }
                ).decode()
                + "\n"
            )
        else:
            attempt = f" attempt {step.attempt}" if step.action in FIRES else ""
            write(
                f"{at}  {local(step.scheduled_ms)}  {step.action.value}{attempt}: {step.reason}\n"
            )
    summary = {a.value: n for a, n in totals.counts.items()}
    first = None if totals.first_fire_ms is None else format_ms(totals.first_fire_ms)
    last = None if totals.last_fire_ms is None else format_ms(totals.last_fire_ms)
    if as_json:
        write(
            orjson.dumps(
                {
                    "totals": summary,
                    "occurrences": totals.total,
                    "to_fire": totals.to_fire,
                    "first": first,
                    "last": last,
                }
            ).decode()
            + "\n"
        )
    else:
        parts = ", ".join(f"{n} {name}" for name, n in summary.items() if n)
        write(
            f"{totals.total} occurrences in [{format_ms(from_ms)}, {format_ms(to_ms)}): "
            f"{parts or 'none'}; {totals.to_fire} to fire"
            + (f" ({first} .. {last})" if first else "")
            + "\n"
        )
    return totals


def _local_text(zone: ZoneInfo | None) -> Any:
    """A function: epoch ms -> local wall time with its offset, in the schedule's zone."""
    if zone is None:
        return lambda ms: format_ms(ms)[:-5].replace("T", " ") + " UTC"

    def text(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, zone).strftime("%Y-%m-%d %H:%M:%S %z")

    return text
