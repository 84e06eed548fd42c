"""`kafkron slo [ID...] --since T [--within-s S] [--json]`: how well schedules kept time.

Per schedule and overall, from the history database: the share of runs that started
within S seconds of their instant (S from ``--within-s``, else the schedule's own
``deadline.start_within_s``, else 5 s: "95% of tasks begin within five seconds of
their scheduled time"), with every ``missed`` occurrence counted late; p50/p95/p99
of start lateness; successes, failures, dead letters; and gaps: instants the audit
finds with no outcome at all (`kafkron audit`); and the ``deadline_missed`` alerts
decided in the window, by deadline, from the database's alerts table (never the
topic). The figures are the audit's (`actors.history.audit: slo`,
`AuditSource.audit`), per schedule.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from actors.cli import output
from actors.cli.audit_cmd import DEFAULT_SETTLE_S, DEFAULT_WITHIN_S, slo_json, slo_text
from actors.cli.db_arg import add_db_argument
from actors.cli.history_cmd import parse_since
from actors.history import default_db_path
from actors.history.audit import AuditSource
from actors.history.slo import ScheduleSlo, schedule_slos
from actors.history.store import HistoryError

_EPILOG = """\
examples:
  kafkron slo --since 1d                      # every schedule, the last day
  kafkron slo invoice-nightly --since 7d      # one schedule, its deadline's S if it has one
  kafkron slo --since 1h --within-s 2 --json  # for a dashboard

S is --within-s if given, else the schedule's deadline.start_within_s, else 5 s.
Exit 1 when any schedule has a gap (an instant with no outcome), as `kafkron audit`.
"""

DEFAULT_SINCE = "1d"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "slo",
        help="the share of runs started on time, lateness percentiles, outcomes and gaps",
        description="How well each schedule kept time, from the history database.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("ids", nargs="*", metavar="ID", help="schedule ids (default: every one)")
    parser.add_argument(
        "--since",
        default=DEFAULT_SINCE,
        metavar="T",
        help=f"from: an RFC 3339 instant or a duration ago (default {DEFAULT_SINCE})",
    )
    parser.add_argument(
        "--within-s",
        type=float,
        default=None,
        metavar="S",
        help="on time means started within S seconds (default: each schedule's "
        f"deadline.start_within_s, else {DEFAULT_WITHIN_S})",
    )
    parser.add_argument(
        "--settle-s",
        type=int,
        default=DEFAULT_SETTLE_S,
        metavar="S",
        help=f"leave the last S seconds before now unjudged (default {DEFAULT_SETTLE_S})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for dashboards")
    add_db_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.settle_s < 0 or (args.within_s is not None and args.within_s < 0):
        return output.fail("slo", "--settle-s and --within-s are at least 0", 2)
    now_ms = int(time.time() * 1000)
    try:
        from_ms = parse_since(args.since, now_ms)
    except ValueError as exc:
        return output.fail("slo", str(exc), 2)
    to_ms = now_ms - args.settle_s * 1000
    if to_ms < from_ms:
        return output.fail("slo", "the window ends before it starts (or within --settle-s)", 2)
    within_ms = None if args.within_s is None else int(args.within_s * 1000)
    try:
        with AuditSource(args.db or default_db_path()) as source:
            found, overall = schedule_slos(
                source, list(args.ids) or None, from_ms, to_ms, within_ms
            )
    except HistoryError as exc:
        return output.fail("slo", str(exc))
    gaps = sum(one.gaps for one in found)
    if args.json:
        output.print_json(
            {
                "from": output.instant(from_ms),
                "to": output.instant(to_ms),
                "overall": {**slo_json(overall), "gaps": gaps},
                "schedules": {one.schedule_id: schedule_json(one) for one in found},
            }
        )
    else:
        print(f"window {output.instant(from_ms)} .. {output.instant(to_ms)}")
        print(f"overall: {slo_text(overall)}; gaps {gaps}")
        for one in found:
            print(f"  {one.schedule_id}: {one.text()}")
    return 1 if gaps else 0


def schedule_json(one: ScheduleSlo) -> dict[str, Any]:
    return {
        **slo_json(one.report),
        "succeeded": one.succeeded,
        "failed": one.failed,
        "dead_lettered": one.dead_lettered,
        "gaps": one.gaps,
        # From the history's alerts table; null when the database has none yet.
        "deadline_missed": one.alerts,
    }
