"""`kafkron backfill ID --from T --to T [--reprocess R] [--max-parallel N] [--dry-run]`,
`kafkron backfill status [ID]`, `kafkron backfill cancel BACKFILL_ID [--running]`.

Plans a backfill of a schedule over ``[from, to)`` and prints it: every occurrence
by the schedule's own rules (its compiled spec from the changelog: zone, DST policy,
bounds), its local wall time, what the backfill would do with it and why, and the
totals. The plan is made where the schedule's past is, in the recorder's database
(``--db``, as `kafkron history`), by the pure planner
`actors.shard.backfill_plan`; it streams, so a year of an every-minute schedule is
never in memory at once (docs/DESIGN.md §6.9). Without ``--dry-run`` the plan's
ranges are sent as ``schedule.backfill`` commands, which the schedule's shard runs
(at most ``--max-parallel`` at once, its cursor in the changelog). ``status`` reads
the changelog (and the history, for failures); ``cancel`` sends
``schedule.backfill_cancel`` to the schedule running that backfill.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO
from zoneinfo import ZoneInfo

import orjson

from actors.cli import EXIT_OK, EXIT_USAGE, output
from actors.cli.db_arg import add_db_argument
from actors.cli.submit_cmd import produce
from actors.history import default_db_path
from actors.history.past import SchedulePast
from actors.history.store import HistoryError
from actors.shard.backfill import BACKFILL_RANGES_MAX, dag_backfill_refusal
from actors.shard.backfill_plan import FIRES, KnowledgeError, Reprocess, Totals
from actors.shard.dag_definition import DagDefinition
from actors.shard.state import ScheduleState, decode_schedule
from actors.views.backfill_planning import Target, plan, ranges_of, target_of
from actors.views.backfill_status import backfill_json
from actors.views.calendars import read_calendars
from actors.views.schedules import latest_states
from actors.views.tail import TailError, read_to_end
from topics.calendar_days import calendar_names
from topics.command_builders import InvalidCommand, backfill_commands
from topics.command_builders import backfill_cancel as backfill_cancel_command
from topics.names import Settings, TopicKind
from topics.timefmt import format_ms, parse_instant

DEFAULT_MAX_PARALLEL = 2

_EPILOG = """\
examples:
  kafkron backfill invoice-nightly --from 2026-09-01T00:00:00Z --to 2026-10-11T00:00:00Z \\
      --max-parallel 4 --backfill-id fix-sept
  kafkron backfill status                 # every schedule's backfill: done/running/left, ETA
  kafkron backfill cancel fix-sept --running
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
    parser.add_argument(
        "words",
        nargs="+",
        metavar="ID | status [ID] | cancel BACKFILL_ID",
        help="the schedule to backfill; or status; or cancel and a backfill id",
    )
    parser.add_argument("--from", dest="from_", metavar="T", help="RFC 3339 (with ID)")
    parser.add_argument("--to", metavar="T", help="RFC 3339, excluded (with ID)")
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
    parser.add_argument(
        "--backfill-id", metavar="NAME", help="name the backfill (default: ID-bf-<now>)"
    )
    parser.add_argument(
        "--running", action="store_true", help="with cancel: also cancel its runs in flight"
    )
    parser.add_argument("--reason", metavar="TEXT", help="with cancel: why, for people")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    add_db_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    words = args.words
    if words[0] == "status" and len(words) <= 2:
        return status(args, words[1] if len(words) == 2 else None)
    if words[0] == "cancel" and len(words) == 2:
        return cancel(args, words[1])
    if len(words) != 1:
        return output.fail("backfill", "expected ID, status [ID] or cancel BACKFILL_ID", EXIT_USAGE)
    if args.from_ is None or args.to is None:
        return output.fail("backfill", "--from and --to are required", EXIT_USAGE)
    schedule_id = words[0]
    if args.max_parallel < 1:
        return output.fail("backfill", "--max-parallel must be at least 1", EXIT_USAGE)
    try:
        from_ms, to_ms = parse_instant(args.from_), parse_instant(args.to)
    except ValueError as exc:
        return output.fail("backfill", str(exc), EXIT_USAGE)
    if to_ms <= from_ms:
        return output.fail("backfill", "--to must be after --from", EXIT_USAGE)
    try:
        state = asyncio.run(_schedule_state(schedule_id))
    except TailError as exc:
        return output.fail("backfill", str(exc))
    if state is None:
        return output.fail("backfill", f"no schedule {schedule_id!r} in the changelog")
    try:
        calendars = None
        if calendar_names(orjson.loads(state.def_bytes).get("spec") or {}):
            calendars = asyncio.run(read_calendars(Settings.from_env()))  # as the shard's book
        target = target_of(state, calendars)
    except TailError as exc:
        return output.fail("backfill", str(exc))
    except ValueError as exc:
        return output.fail("backfill", str(exc))
    definition = state.definition
    if isinstance(definition, DagDefinition) and not args.dry_run:
        # The shard refuses it too; saying it here spares planning and sending.
        why_not = dag_backfill_refusal(
            len(definition.topo_order), definition.max_active_runs, args.max_parallel
        )
        if why_not is not None:
            return output.fail("backfill", why_not, EXIT_USAGE)
    reprocess = Reprocess(args.reprocess)
    db = args.db or default_db_path()
    try:
        with SchedulePast(db) as past:
            if args.dry_run:
                print_plan(past, schedule_id, target, from_ms, to_ms, reprocess, args.json)
                return EXIT_OK
            totals = Totals()
            ranges = ranges_of(plan(past, schedule_id, target, from_ms, to_ms, reprocess), totals)
    except (HistoryError, KnowledgeError) as exc:
        return output.fail("backfill", str(exc))
    if not ranges:
        print(f"nothing to backfill: {_totals_text(totals, from_ms, to_ms)}")
        return EXIT_OK
    if len(ranges) > BACKFILL_RANGES_MAX:
        return output.fail(
            "backfill",
            f"the plan has {len(ranges)} ranges, more than the {BACKFILL_RANGES_MAX} a "
            "backfill holds at once; split the range (--from/--to) into parts",
        )
    backfill_id = args.backfill_id or f"{schedule_id}-bf-{int(time.time())}"
    try:
        records = backfill_commands(schedule_id, backfill_id, ranges, args.max_parallel)
    except InvalidCommand as exc:
        return output.fail("backfill", str(exc), EXIT_USAGE)
    code = produce("backfill", Settings.from_env(), [(r.key, r.value) for r in records])
    if code == EXIT_OK:
        print(
            f"backfill {backfill_id} of {schedule_id}: {_totals_text(totals, from_ms, to_ms)}; "
            f"follow it with `kafkron backfill status {schedule_id}`"
        )
    return code


def status(args: argparse.Namespace, schedule_id: str | None) -> int:
    try:
        states = asyncio.run(_states())
    except TailError as exc:
        return output.fail("backfill status", str(exc))
    now_ms = int(time.time() * 1000)
    db = Path(args.db) if args.db else default_db_path()
    past = SchedulePast(db) if db.exists() else None
    rows = []
    try:
        for state in states:
            backfill = state.backfill
            if backfill is None or (schedule_id is not None and state.id != schedule_id):
                continue
            failed = None
            if past is not None and backfill.first_ms is not None and backfill.last_ms is not None:
                failed = past.failed_since(
                    state.id, backfill.first_ms, backfill.last_ms, backfill.started_ms
                )
            rows.append(backfill_json(state, now_ms, failed))
    finally:
        if past is not None:
            past.close()
    if args.json:
        output.print_json(rows)
        return EXIT_OK
    if not rows:
        print("no backfill" + (f" of {schedule_id}" if schedule_id else ""))
        return EXIT_OK
    output.print_table(
        ("schedule", "backfill", "status", "done", "running", "left", "failed", "ETA"),
        [
            (
                row["schedule_id"],
                row["backfill_id"],
                row["status"],
                str(row["done"]),
                str(row["running"]),
                f"{row['left']}{'' if row['left_exact'] else '+'}",
                "-" if row["failed"] is None else str(row["failed"]),
                "-" if row["eta_s"] is None else f"{row['eta_s']:.0f} s",
            )
            for row in rows
        ],
        title="backfills",
        status_column="status",
    )
    return EXIT_OK


def cancel(args: argparse.Namespace, backfill_id: str) -> int:
    try:
        states = asyncio.run(_states())
    except TailError as exc:
        return output.fail("backfill cancel", str(exc))
    found = [s for s in states if s.backfill is not None and s.backfill.backfill_id == backfill_id]
    going = [s for s in found if s.backfill is not None and s.backfill.active]
    if not going:
        why = "it has ended" if found else "no schedule runs it"
        return output.fail("backfill cancel", f"no backfill {backfill_id!r} going ({why})")
    try:
        records = [
            backfill_cancel_command(s.id, backfill_id, running=args.running, reason=args.reason)
            for s in going
        ]
    except InvalidCommand as exc:
        return output.fail("backfill cancel", str(exc), EXIT_USAGE)
    return produce("backfill cancel", Settings.from_env(), [(r.key, r.value) for r in records])


async def _states() -> list[ScheduleState]:
    settings = Settings.from_env()
    records = await read_to_end(settings, settings.topic(TopicKind.SCHEDULES))
    states = []
    for value in latest_states(records).values():
        try:
            states.append(decode_schedule(value))
        except (ValueError, KeyError, TypeError):
            continue  # `kafkron ls` reports it unreadable
    return sorted(states, key=lambda s: s.id)


async def _schedule_state(schedule_id: str) -> ScheduleState | None:
    settings = Settings.from_env()
    records = await read_to_end(settings, settings.topic(TopicKind.SCHEDULES))
    value = latest_states(records).get(schedule_id)
    return None if value is None else decode_schedule(value)


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
        totals_doc = {
            "totals": summary,
            "occurrences": totals.total,
            "to_fire": totals.to_fire,
            "first": first,
            "last": last,
        }
        write(orjson.dumps(totals_doc).decode() + "\n")
    else:
        write(_totals_text(totals, from_ms, to_ms) + "\n")
    return totals


def _totals_text(totals: Totals, from_ms: int, to_ms: int) -> str:
    summary = {a.value: n for a, n in totals.counts.items()}
    parts = ", ".join(f"{n} {name}" for name, n in summary.items() if n)
    first, last = totals.first_fire_ms, totals.last_fire_ms
    span = "" if first is None or last is None else f" ({format_ms(first)} .. {format_ms(last)})"
    return (
        f"{totals.total} occurrences in [{format_ms(from_ms)}, {format_ms(to_ms)}): "
        f"{parts or 'none'}; {totals.to_fire} to fire{span}"
    )


def _local_text(zone: ZoneInfo | None) -> Any:
    """A function: epoch ms -> local wall time with its offset, in the schedule's zone."""
    if zone is None:
        return lambda ms: format_ms(ms)[:-5].replace("T", " ") + " UTC"

    def text(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, zone).strftime("%Y-%m-%d %H:%M:%S %z")

    return text
