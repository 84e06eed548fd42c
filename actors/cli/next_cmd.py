"""``kafkron next``: when will this schedule run? (the crontab.guru of kafkron)

Prints the next N fire instants strictly after ``--from`` (default now), one per
line, RFC 3339 UTC with milliseconds, computed by exactly the code the schedule
actors use. It doubles as the test oracle of the rest of the project.

Given a whole ``schedule.upsert`` whose occurrences run a target, each line also says
where each fire goes (``→ kafka:orders.due``, ``→ POST https://...``), and for a job
on a worker queue, which queue (``→ queue gpu ...``), and its concurrency key if it
names one (``→ concurrency key 'customer-42': at most 1 at once (queue)``; a key from
placeholders beside what the runs carry, ``'invoice-{args.customer}' → 'invoice-c-42'``), its
priority if not 0 (``→ priority 7, high lane (workers started with --lanes)``) and its
rate limit (``rate limit 'payments': at most 10 starts/s, bursts of 5``): the
answer to "what will it do, and when". A spec alone, or a job of the default queue,
prints the instants only.

A command with a ``deadline`` also prints, for each fire, the instants its run must
have started and ended by (``start by ...  end by ...``): past them, the shard
writes a ``deadline_missed`` alert. A ``dag.upsert``'s deadline is per task run, from
when the task became ready: the lines give its root tasks' (``roots start by ...``);
a later task counts from its release.

``--max-runs N`` (or a command's ``max_runs``) stops the list after N fires, as the
shard stops the schedule: it counts from ``--from``, as a new schedule would (a
running schedule's count so far is in ``kafkron ls``), and a trigger counts too.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from actors.cli import EXIT_OK, EXIT_USAGE
from actors.display import target_text
from actors.timespec import CompiledSpec, SpecError, UnknownCalendar, compile_spec
from actors.timespec.composite import CompositeSpec
from actors.timespec.cronspec import CronSpec
from actors.timespec.zones import load_zone
from actors.views.calendars import read_calendars
from actors.views.schedules import spec_zone
from actors.views.spec_arg import parse_spec_text
from actors.views.tail import TailError
from topics.alerts import Deadline, deadline_field
from topics.calendar_days import CalendarDays, calendar_names, parse_calendar_days
from topics.command_fields import FieldError
from topics.concurrency import check_concurrency
from topics.key_templates import check_key_args, check_key_template, is_template, render_key
from topics.names import Settings
from topics.priority import check_priority, in_lane
from topics.queues import DEFAULT_QUEUE, check_queue
from topics.ratelimits import check_rate_limit
from topics.timefmt import format_ms, parse_instant

EPILOG = """\
SPEC is one of:
  a cron expression        '30 2 * * *'  '*/5 9-17 * * MON-FRI'  '@daily'  'H H * * *'
  an interval              'every 90s'  '1h30m'
  an instant (once)        '2026-12-04T14:05:00Z'
  a JSON spec or command   '{"cron": "30 1 * * *", "tz": "America/New_York",
                             "dst": {"fold": "twice"}, "spread": {"window_s": 900}}'

examples:
  kafkron next '30 2 * * *' --tz America/New_York --from 2026-03-07T00:00:00Z -n 3 --local
  kafkron next 'H H * * *' --id invoice-nightly
  kafkron next 'every 90s' -n 10
  kafkron next '0 9 * * MON' --max-runs 3 -n 10     # stops after 3: completed (max_runs)
  kafkron next "$(kafkron schedule add etl --every 1h --job etl.load --start-within-s 5 \
    --finish-within-s 600 --print)" -n 3             # each fire's start-by and end-by
  kafkron next '{"any": [{"cron": "0 6 25 * *"}], "tz": "Europe/London",
    "exclude": [{"calendar": {"weekdays": ["SAT", "SUN"]}}],
    "adjust": "previous_business_day"}' --why -n 3   # what was excluded, and why
  kafkron next "$(kafkron schedule add due --every 1h --to-topic orders.due --value 1 --print)"
"""

# Keys of a JSON object that belong to the command around the spec, not to the spec.


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "next",
        help="print the next fire times of a schedule spec",
        description="Print the next fire instants of a schedule spec, strictly after --from.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("spec", metavar="SPEC", help="cron expression, interval, instant or JSON")
    parser.add_argument("--tz", metavar="ZONE", help="IANA time zone of a cron spec (default UTC)")
    parser.add_argument("--id", metavar="ID", help="schedule id (needed for H and spread)")
    parser.add_argument(
        "--from", dest="from_", metavar="INSTANT", help="RFC 3339 instant (default now)"
    )
    parser.add_argument("-n", type=int, default=5, metavar="N", help="how many fires (default 5)")
    parser.add_argument("--local", action="store_true", help="also print the local wall time")
    parser.add_argument(
        "--max-runs", type=int, metavar="N", help="stop after N fires, as max_runs does"
    )
    parser.add_argument(
        "--why",
        action="store_true",
        help="an any spec: before each fire, the instants its exclusions took away and why",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        spec, zone_name = build(args)
        labels = exclusion_labels(parse_spec_text(args.spec)[0]) if args.why else None
        after_ms = now_ms() if args.from_ is None else parse_instant(args.from_)
        limit = max_runs(args)
        goes = _target_of(args.spec)
        deadline = _deadline_of(args.spec)
        roots = parse_spec_text(args.spec)[1].get("type") == "dag.upsert"
    except (SpecError, ValueError) as exc:
        print(f"kafkron next: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.n < 1:
        print("kafkron next: -n must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    zone = ZoneInfo(zone_name)
    for i in range(args.n):
        if limit is not None and i >= limit:
            print(f"kafkron next: no further fires (max_runs {limit} reached)", file=sys.stderr)
            break
        fire_ms = spec.next_after(after_ms)
        if fire_ms is None:
            print("kafkron next: no further fires (the schedule is exhausted)", file=sys.stderr)
            break
        if args.why:
            for text in why_lines(spec, after_ms, fire_ms, labels):
                print(text)
        line = format_ms(fire_ms)
        if args.local:
            local = datetime.fromtimestamp(fire_ms / 1000, zone)
            line += f"  {local.isoformat(timespec='milliseconds')} {local.tzname()}"
        if deadline is not None:
            line += deadline_text(deadline, fire_ms, roots=roots)
        print(line if goes is None else f"{line}  → {goes}")
        after_ms = fire_ms
    return EXIT_OK


_WHY_MAX = 10  # excluded instants listed per gap; the rest are counted


def why_lines(
    spec: CompiledSpec, after_ms: int, fire_ms: int, labels: list[str] | None = None
) -> list[str]:
    """The members' instants in ``(after, fire)`` that an any spec's exclusions took
    away, each with the exclusions that hold its day and where it was moved.
    ``labels``: a name per exclusion (`exclusion_labels`); ``exclude[i]`` otherwise."""
    if not isinstance(spec, CompositeSpec) or not spec.exclusions:
        return []
    offset_ms = spec.offset_ms
    lines: list[str] = []
    gone = 0
    nominal = spec.nominal_between(after_ms - offset_ms, fire_ms - offset_ms - 1, 100_000)
    for nominal_ms, fixed in nominal:
        held = spec.excluded_by(nominal_ms)
        if not held:
            continue
        gone += 1
        if len(lines) >= _WHY_MAX:
            continue
        names = ", ".join(
            labels[i] if labels is not None and i < len(labels) else f"exclude[{i}]" for i in held
        )
        text = f"  not {format_ms(nominal_ms + offset_ms)}: its day is excluded by {names}"
        moved = spec.moved_to(nominal_ms) if fixed else None
        if moved is not None:
            text += f"; moved to {format_ms(moved + offset_ms)} ({spec.adjust})"
        lines.append(text)
    if gone > len(lines):
        lines.append(f"  ... and {gone - len(lines)} more excluded instants")
    return lines


def _deadline_of(text: str) -> Deadline | None:
    """The command's ``deadline``, if it has one (a spec alone has none)."""
    _, command = parse_spec_text(text)
    try:
        return deadline_field(command.get("deadline"))
    except FieldError as error:
        raise SpecError(str(error)) from None


def deadline_text(deadline: Deadline, fire_ms: int, *, roots: bool = False) -> str:
    """``  start by T  end by T`` of the run fired at ``fire_ms`` (either part alone);
    ``roots``: a DAG's, whose root tasks count from the instant (``roots start by``)."""
    who = "roots " if roots else ""
    text = ""
    if deadline.start_within_s is not None:
        text += f"  {who}start by {format_ms(fire_ms + deadline.start_within_s * 1000)}"
    if deadline.finish_within_s is not None:
        text += f"  {who}end by {format_ms(fire_ms + deadline.finish_within_s * 1000)}"
    return text


def _target_of(text: str) -> str | None:
    """Where a command's target goes (``kafka:TOPIC``, ``POST URL``), or the worker
    queue its job's runs go to (``queue gpu``, when not the default) and its concurrency
    key; None otherwise."""
    _, command = parse_spec_text(text)
    target = command.get("target")
    if isinstance(target, Mapping):
        return target_text(target)
    job = command.get("job")
    if not isinstance(job, Mapping):
        return None
    queue, keyed, rank = job.get("queue"), job.get("concurrency"), job.get("priority")
    rated = job.get("rate_limit")
    try:
        name = DEFAULT_QUEUE if queue is None else check_queue(queue, "job.queue")
        concurrency = None if keyed is None else check_concurrency(keyed, "job.concurrency")
        priority = 0 if rank is None else check_priority(rank, "job.priority")
        rate_limit = None if rated is None else check_rate_limit(rated, "job.rate_limit")
        shown = _shown_key(command, job, concurrency or rate_limit)
    except FieldError as error:
        raise SpecError(str(error)) from None
    parts = []
    if name != DEFAULT_QUEUE:
        parts.append(f"queue {name} (workers started with --queue {name})")
    if in_lane(priority):
        parts.append(f"priority {priority}, high lane (workers started with --lanes)")
    elif priority:
        parts.append(f"priority {priority}")
    if concurrency is not None:
        parts.append(
            f"concurrency key {shown}: at most {concurrency.limit} at once ({concurrency.strategy})"
        )
    if rate_limit is not None:
        parts.append(
            f"rate limit {shown}: at most {rate_limit.per_s:g} starts/s,"
            f" bursts of {rate_limit.burst} (starts may come later than these instants)"
        )
    return "; ".join(parts) or None


def _shown_key(command: Mapping[str, Any], job: Mapping[str, Any], found: Any) -> str:
    """A job's key as `next` says it: ``'K'``, or for a template ``'T' → 'K'``, what its
    runs will carry (``{schedule_id}`` stays as written when the command has no id);
    `FieldError` for a template the shard would refuse."""
    if found is None or not is_template(found.key):
        return "" if found is None else repr(found.key)
    args = job.get("args")
    args = args if isinstance(args, Mapping) else {}
    check_key_args(check_key_template(found.key, "job.key"), args, "job")
    schedule_id = command.get("id")
    rendered = render_key(
        found.key, schedule_id if isinstance(schedule_id, str) else "{schedule_id}", args
    )
    return f"{found.key!r} → {rendered!r}"


def max_runs(args: argparse.Namespace) -> int | None:
    """``--max-runs``, or the command's ``max_runs``; both given must agree."""
    _, command = parse_spec_text(args.spec)
    given = command.get("max_runs")
    if given is not None and (not isinstance(given, int) or isinstance(given, bool)):
        raise SpecError(f"max_runs: expected a whole number, got {given!r}")
    if args.max_runs is not None and given is not None and args.max_runs != given:
        raise SpecError(f"--max-runs {args.max_runs} contradicts max_runs {given}; give one")
    limit = args.max_runs if args.max_runs is not None else given
    if limit is not None and limit < 1:
        raise SpecError(f"max_runs: must be at least 1, got {limit}")
    return limit


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def named_calendars(spec: Mapping[str, Any]) -> dict[str, CalendarDays] | None:
    """The namespace's calendars, read from ``{ns}.calendars``, when the spec names
    any (the fires shown are the shard's: docs/DESIGN.md §5.7); else None."""
    if not calendar_names(spec):
        return None
    settings = Settings.from_env()
    try:
        found = asyncio.run(read_calendars(settings))
    except TailError as exc:
        raise SpecError(f"spec.exclude names calendars, which could not be read: {exc}") from None
    return {
        name: parse_calendar_days(calendar, f"calendar {name!r}")
        for name, calendar in found.items()
    }


def exclusion_labels(spec: Mapping[str, Any]) -> list[str]:
    """How ``--why`` names each exclusion: ``exclude[i]``, with a calendar's name."""
    entries = spec.get("exclude") or [] if "any" in spec else []
    return [
        f"exclude[{i}] (calendar {entry!r})" if isinstance(entry, str) else f"exclude[{i}]"
        for i, entry in enumerate(entries)
    ]


def build(args: argparse.Namespace) -> tuple[CompiledSpec, str]:
    """The compiled spec and the zone to show local times in."""
    spec, command = parse_spec_text(args.spec)
    zoned = any(k in spec for k in ("cron", "rrule", "business_day", "any"))
    if args.tz is not None:
        if zoned and "tz" in spec and spec["tz"] != args.tz:
            raise SpecError(f"--tz {args.tz} contradicts spec.tz {spec['tz']}; give one")
        if zoned:
            spec["tz"] = args.tz
    schedule_id = args.id if args.id is not None else command.get("id")
    spread = command.get("spread") or {}
    if not isinstance(spread, Mapping):
        raise SpecError('spread: expected an object like {"window_s": 900}')
    calendars = named_calendars(spec)
    try:
        compiled = compile_spec(
            spec,
            schedule_id=schedule_id if schedule_id is not None else "",
            dst=command.get("dst"),
            spread_window_s=spread.get("window_s", 0),
            start_ms=_bound(command, "start"),
            end_ms=_bound(command, "end"),
            calendars=calendars,
        )
    except UnknownCalendar as missing:
        raise SpecError(
            f"spec.exclude: there is no calendar {missing.name!r} in the namespace (a schedule"
            " naming it waits for it); `kafkron calendar ls` lists them"
        ) from None
    hashes = isinstance(compiled, CronSpec) and compiled.uses_hash
    if schedule_id is None and (hashes or spread.get("window_s")):
        raise SpecError(
            "this spec uses H or a spread window, which depend on the schedule id: pass --id ID"
        )
    zone_name = args.tz or spec_zone(spec) or "UTC"
    load_zone(zone_name)  # --tz of an every/at spec is only for --local, but must exist
    return compiled, zone_name


def _bound(command: Mapping[str, Any], key: str) -> int | None:
    value = command.get(key)
    if value is None:
        return None
    try:
        return parse_instant(value)
    except ValueError as exc:
        raise SpecError(f"{key}: {exc}") from None
