"""`kafkron calendar add|rm|ls|show`: named calendars shared by the namespace.

``add NAME`` sends a ``calendar.upsert`` (a new calendar, or an edit: every schedule
that names it is re-armed on every shard); ``rm NAME`` a ``calendar.delete``, after
checking that no schedule names it (the shards refuse a delete of a calendar their
schedules name, each for its own; this check names them all); ``ls`` and ``show`` read
``{ns}.calendars`` and, for the users, the changelog. docs/DESIGN.md §5.7.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from actors.cli import output
from actors.cli.submit_cmd import produce
from actors.views.calendars import read_calendars, read_users
from actors.views.holiday_source import (
    HolidaysUnavailable,
    holiday_days,
    parse_region,
    parse_years,
)
from actors.views.tail import TailError
from topics import codec
from topics.calendar_builders import calendar_delete, calendar_upsert
from topics.calendar_days import WEEKDAYS
from topics.command_builders import InvalidCommand
from topics.names import Settings

_EPILOG = """\
examples:
  kafkron calendar add uk-holidays --tz Europe/London --date 2026-12-25 --date 2026-12-28
  kafkron calendar add shutdown --range 2026-12-24:2027-01-01 --weekday SAT --weekday SUN
  kafkron calendar add uk-holidays --json '{"tz": "Europe/London", "dates": ["2026-12-25"]}'
  kafkron calendar add uk-holidays --holidays GB:ENG --years 2026-2030 --tz Europe/London
  kafkron calendar ls
  kafkron calendar show uk-holidays
  kafkron calendar rm uk-holidays

A schedule names one in its exclude:
  kafkron schedule add payroll --cron '0 6 * * MON-FRI' --tz Europe/London \\
      --exclude uk-holidays --adjust next_business_day --job payroll.run
`add` of an existing name replaces its days: every schedule naming it is re-armed.
A schedule naming a calendar that does not exist waits for it (`kafkron ls` says so).
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "calendar",
        help="named calendars (days to exclude) shared by every schedule",
        description="Named calendars in {ns}.calendars: a zone and a set of days.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="calendar_action", metavar="ACTION")
    add = actions.add_parser("add", help="create or replace a calendar (calendar.upsert)")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--tz", help="IANA zone of its days (default UTC)")
    add.add_argument("--date", action="append", default=[], metavar="YYYY-MM-DD")
    add.add_argument(
        "--range", action="append", default=[], metavar="FIRST:LAST", help="both included"
    )
    add.add_argument("--weekday", action="append", default=[], choices=WEEKDAYS)
    add.add_argument("--json", dest="json_days", metavar="CALENDAR", help="the days as JSON")
    add.add_argument(
        "--holidays",
        metavar="COUNTRY[:SUBDIV]",
        help="add a country's public holidays (the holidays package), e.g. GB:ENG",
    )
    add.add_argument("--years", metavar="FIRST-LAST", help="--holidays' years, e.g. 2026-2030")
    add.set_defaults(func=run_add)
    rm = actions.add_parser("rm", help="delete a calendar no schedule names (calendar.delete)")
    rm.add_argument("name", metavar="NAME")
    rm.add_argument(
        "--force", action="store_true", help="send even if schedules name it (they will wait)"
    )
    rm.set_defaults(func=run_rm)
    ls = actions.add_parser("ls", help="the calendars, their days and their users")
    ls.add_argument("--json", action="store_true", help="print JSON for scripts")
    ls.set_defaults(func=run_ls)
    show = actions.add_parser("show", help="one calendar and the schedules that name it")
    show.add_argument("name", metavar="NAME")
    show.set_defaults(func=run_show)
    parser.set_defaults(func=output.usage(parser))


def calendar_of(args: argparse.Namespace) -> dict[str, Any]:
    """The calendar object the options describe."""
    if args.json_days is not None:
        found = codec.loads(args.json_days)
        if not isinstance(found, dict):
            raise ValueError('--json: expected an object such as {"dates": ["2026-12-25"]}')
        return found
    calendar: dict[str, Any] = {}
    if args.tz:
        calendar["tz"] = args.tz
    if args.date:
        calendar["dates"] = list(args.date)
    if args.range:
        ranges = []
        for text in args.range:
            first, sep, last = text.partition(":")
            if not sep:
                raise ValueError(
                    f"--range {text!r}: expected FIRST:LAST, such as 2026-12-24:2027-01-01"
                )
            ranges.append([first, last])
        calendar["ranges"] = ranges
    if args.weekday:
        calendar["weekdays"] = list(args.weekday)
    if getattr(args, "holidays", None):
        country, subdiv = parse_region(args.holidays)
        if not args.years:
            raise ValueError("--holidays needs --years, e.g. --years 2026-2030")
        found = holiday_days(country, parse_years(args.years), subdiv=subdiv, tz=args.tz or "UTC")
        calendar["dates"] = sorted({*calendar.get("dates", []), *found["dates"]})
    return calendar


def run_add(args: argparse.Namespace) -> int:
    try:
        record = calendar_upsert(args.name, calendar_of(args))
    except (InvalidCommand, ValueError, HolidaysUnavailable) as exc:
        return output.fail("calendar add", str(exc), 2)
    return produce("calendar add", Settings.from_env(), [(record.key, record.value)])


def run_rm(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    try:
        record = calendar_delete(args.name)
    except InvalidCommand as exc:
        return output.fail("calendar rm", str(exc), 2)
    if not args.force:
        try:
            users = asyncio.run(read_users(settings)).get(args.name, [])
        except TailError as exc:
            return output.fail("calendar rm", str(exc))
        if users:
            return output.fail(
                "calendar rm",
                f"calendar {args.name!r} is named by {', '.join(users)}; take it out of their"
                " exclude first (or --force: they will wait for it)",
            )
    return produce("calendar rm", settings, [(record.key, record.value)])


def _summary(calendar: dict[str, Any]) -> str:
    parts = [calendar.get("tz", "UTC")]
    if calendar.get("dates"):
        parts.append(f"{len(calendar['dates'])} dates")
    if calendar.get("ranges"):
        parts.append(f"{len(calendar['ranges'])} ranges")
    if calendar.get("weekdays"):
        parts.append(",".join(calendar["weekdays"]))
    return ", ".join(parts)


def _read(settings: Settings) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    async def both() -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
        return await read_calendars(settings), await read_users(settings)

    return asyncio.run(both())


def run_ls(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    try:
        calendars, users = _read(settings)
    except TailError as exc:
        return output.fail("calendar ls", str(exc))
    rows = [
        {"name": name, "calendar": calendar, "used_by": users.get(name, [])}
        for name, calendar in sorted(calendars.items())
    ]
    # Named by a schedule but not there: those schedules wait (shown, never hidden).
    missing = sorted(set(users) - set(calendars))
    if args.json:
        output.print_json({"calendars": rows, "missing": {n: users[n] for n in missing}})
        return 0
    if not rows and not missing:
        print("no calendars; create one with `kafkron calendar add NAME --date YYYY-MM-DD`")
        return 0
    table = [
        [name, _summary(calendar), str(len(users.get(name, [])))]
        for name, calendar in sorted(calendars.items())
    ]
    table += [[name, "(missing: its schedules wait)", str(len(users[name]))] for name in missing]
    output.print_table(["name", "days", "used by"], table)
    return 0


def run_show(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    try:
        calendars, users = _read(settings)
    except TailError as exc:
        return output.fail("calendar show", str(exc))
    calendar = calendars.get(args.name)
    named_by = users.get(args.name, [])
    if calendar is None:
        note = f"; named by {', '.join(named_by)}, which wait for it" if named_by else ""
        return output.fail("calendar show", f"no calendar {args.name!r}{note}")
    output.print_json({"name": args.name, "calendar": calendar, "used_by": named_by})
    return 0
