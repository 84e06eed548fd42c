"""`kafkron audit [ID...] --from T --to T [--all] [--slo] [--json]`: prove a window complete.

Every instant each schedule owed in the window, from the definition in effect at
that instant, matched with its outcome in the history database (`actors.history.audit`):
fired (the latest attempt's status), ``missed``/``skipped`` (one result each, or
inside a folded result's range), pending (the schedule is still paused), or nothing:
a **gap**, and the exit code is 1. A schedule that names a calendar is judged by the
calendar in effect at each instant; an instant owed while that calendar was unknown
(not yet created, deleted) and without an outcome is counted ``waiting``, not a gap.
``--slo`` adds how many runs started within ``--within-s`` seconds of their instant
(default 5, the promise "95% of tasks begin within five seconds of their scheduled
time" is stated against).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from actors.audit.walk import ACCOUNTED, GAP, PENDING, WAITING, Finding
from actors.cli import output
from actors.cli.db_arg import add_db_argument
from actors.cli.history_cmd import parse_since
from actors.history import default_db_path
from actors.history.audit import AuditReport, AuditSource, SloReport, slo
from actors.history.store import HistoryError

_EPILOG = """\
examples:
  kafkron audit --all --from 1d                       # every schedule, the last day
  kafkron audit invoice-nightly --from 2026-10-01T00:00:00Z --to 2026-10-08T00:00:00Z
  kafkron audit --all --from 1h --json                # for a dashboard or a check
  kafkron audit --slo --from 1d                       # share started within 5 s
  kafkron audit --all --slo --within-s 2 --from 1d

Exit 1 when any instant has no outcome (a gap); 0 when every one is accounted.
The history knows a schedule from the first changelog record the recorder read of
it: its creation if the recorder ran then, else its oldest surviving (compacted)
record; instants before that are not judged, and the audit says so. Instants later
than --settle-s before now are not judged yet (a run may still be on its way).
"""

DEFAULT_FROM = "1d"
DEFAULT_SETTLE_S = 60
DEFAULT_WITHIN_S = 5


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="account for every instant a window owed; exit 1 on a gap",
        description="Match every expected instant with its outcome in the history.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("ids", nargs="*", metavar="ID", help="schedule ids (or --all)")
    parser.add_argument("--all", action="store_true", help="every schedule of the history")
    parser.add_argument(
        "--from",
        dest="from_",
        default=DEFAULT_FROM,
        metavar="T",
        help=f"window start: an RFC 3339 instant or a duration ago (default {DEFAULT_FROM})",
    )
    parser.add_argument(
        "--to", default=None, metavar="T", help="window end (inclusive; default now)"
    )
    parser.add_argument(
        "--settle-s",
        type=int,
        default=DEFAULT_SETTLE_S,
        metavar="S",
        help=f"leave the last S seconds before now unjudged (default {DEFAULT_SETTLE_S})",
    )
    parser.add_argument("--slo", action="store_true", help="the share of runs started on time")
    parser.add_argument(
        "--within-s",
        type=float,
        default=DEFAULT_WITHIN_S,
        metavar="S",
        help=f"on time means started within S seconds (default {DEFAULT_WITHIN_S})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    add_db_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    auditing = bool(args.ids) or args.all
    if args.ids and args.all:
        return output.fail("audit", "give schedule ids or --all, not both", 2)
    if not auditing and not args.slo:
        return output.fail("audit", "give schedule ids, --all, or --slo", 2)
    if args.settle_s < 0 or args.within_s < 0:
        return output.fail("audit", "--settle-s and --within-s are at least 0", 2)
    now_ms = int(time.time() * 1000)
    try:
        from_ms = parse_since(args.from_, now_ms)
        to_ms = now_ms if args.to is None else parse_since(args.to, now_ms)
    except ValueError as exc:
        return output.fail("audit", str(exc).replace("--since", "--from/--to"), 2)
    settled_ms = now_ms - args.settle_s * 1000
    judged_to_ms = min(to_ms, settled_ms)
    if judged_to_ms < from_ms:
        return output.fail("audit", "the window ends before it starts (or within --settle-s)", 2)
    ids = list(args.ids) if args.ids else None
    try:
        with AuditSource(args.db or default_db_path()) as source:
            report = (
                source.audit(from_ms, judged_to_ms, ids, keep_findings=ids is not None)
                if auditing
                else None
            )
            within_ms = int(args.within_s * 1000)
            slo_report = slo(source, from_ms, judged_to_ms, within_ms, ids) if args.slo else None
            per_schedule = (
                {sid: slo(source, from_ms, judged_to_ms, within_ms, [sid]) for sid in ids}
                if args.slo and ids is not None and len(ids) > 1
                else {}
            )
    except HistoryError as exc:
        return output.fail("audit", str(exc))
    if args.json:
        doc: dict[str, Any] = {"from": output.instant(from_ms), "to": output.instant(judged_to_ms)}
        if report is not None:
            doc.update(report_json(report))
        if slo_report is not None:
            doc["slo"] = slo_json(slo_report)
            if per_schedule:
                doc["slo"]["schedules"] = {s: slo_json(r) for s, r in per_schedule.items()}
        output.print_json(doc)
    else:
        if report is not None:
            print_report(report, to_ms != judged_to_ms)
        if slo_report is not None:
            print(slo_text(slo_report))
            for sid, one in per_schedule.items():
                print(f"  {sid}: {slo_text(one)}")
    return 1 if report is not None and report.gap_count else 0


def finding_json(schedule_id: str, finding: Finding) -> dict[str, Any]:
    outcome = finding.outcome
    return {
        "schedule_id": schedule_id,
        "at": output.instant(finding.at_ms),
        "verdict": finding.verdict,
        "owed": finding.owed,
        "status": None if outcome is None else outcome.status,
        "run_id": None if outcome is None else outcome.run_id,
        "reason": None if outcome is None else outcome.error_type,
        "folded": finding.folded,
    }


def report_json(report: AuditReport) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schedules": report.schedules,
        "expected": report.expected,
        "accounted": {
            k: v for k, v in sorted(report.counts.items()) if k not in (GAP, PENDING, WAITING)
        },
        "folded": report.folded,
        "pending": report.counts[PENDING],
        "waiting": report.counts[WAITING],
        "unknown_calendars": [
            {"schedule_id": s, "calendar": n} for s, n in report.unknown_calendars
        ],
        "gap_count": report.gap_count,
        "gaps": [{"schedule_id": s, "at": output.instant(at)} for s, at in report.gaps],
        "known_from": [{"schedule_id": s, "at": output.instant(at)} for s, at in report.known_late],
        "unknown": report.unknown,
    }
    if report.audits:
        doc["instants"] = [
            finding_json(one.schedule_id, f) for one in report.audits for f in one.findings
        ]
    return doc


def _counts_text(report: AuditReport) -> str:
    parts = [
        f"{n} {k}" for k, n in sorted(report.counts.items()) if k not in (GAP, PENDING, WAITING)
    ]
    return ", ".join(parts) or "none"


def print_report(report: AuditReport, clipped: bool) -> None:
    window = f"{output.instant(report.from_ms)} .. {output.instant(report.to_ms)}"
    note = " (the last seconds before now are left to settle)" if clipped else ""
    print(f"audit of {report.schedules} schedules, {window}{note}")
    waiting = report.counts[WAITING]
    accounted = report.expected - report.gap_count - report.counts[PENDING] - waiting
    print(
        f"  expected {report.expected}: accounted {accounted} ({_counts_text(report)};"
        f" {report.folded} by folded results), pending {report.counts[PENDING]}"
        f" (still paused), "
        + (f"waiting {waiting} (a calendar it names was unknown then), " if waiting else "")
        + f"gaps {report.gap_count}"
    )
    for one in report.audits:
        for finding in one.findings:
            outcome = finding.outcome
            what = {
                ACCOUNTED: "",
                PENDING: "pending (paused)",
                WAITING: "waiting (a calendar it names was unknown then)",
                GAP: "GAP",
            }[finding.verdict]
            if outcome is not None:
                reason = f" ({outcome.error_type})" if outcome.error_type else ""
                fold = " in a folded result" if finding.folded else ""
                what = f"{outcome.status}{reason}{fold}  {outcome.run_id}"
            print(f"  {one.schedule_id}  {output.instant(finding.at_ms)}  {what}")
    if not report.audits:
        for schedule_id, at_ms in report.gaps:
            at = output.instant(at_ms)
            print(f"  GAP  {schedule_id}  {at}: no run, no missed/skipped result")
    if report.gap_count > len(report.gaps):
        print(f"  ... and {report.gap_count - len(report.gaps)} more gaps")
    for schedule_id, at_ms in report.known_late:
        print(
            f"  {schedule_id}: known only from {output.instant(at_ms)} (its older changelog"
            " records were compacted before the recorder read them): not judged before"
        )
    for schedule_id in report.unknown:
        print(f"  {schedule_id}: no definition recorded; not judged")
    for schedule_id, name in report.unknown_calendars:
        print(
            f"  {schedule_id}: names calendar {name!r}, of which the history holds no"
            " record; the instants that need it are not judged"
        )


def slo_json(report: SloReport) -> dict[str, Any]:
    return {
        "within_ms": report.within_ms,
        "started": report.started,
        "on_time": report.on_time,
        "missed": report.missed,
        "share": report.share,
        "lateness_ms": {"p50": report.p50_ms, "p95": report.p95_ms, "p99": report.p99_ms},
        "outcomes": dict(sorted(report.outcomes.items())),
    }


def slo_text(report: SloReport) -> str:
    share = "-" if report.share is None else f"{report.share * 100:.2f}%"
    outcomes = ", ".join(f"{n} {s}" for s, n in sorted(report.outcomes.items())) or "none"
    return (
        f"slo: {share} of runs started within {report.within_ms / 1000:g} s of their instant"
        f" ({report.on_time} of {report.started} started, {report.missed} missed count as"
        f" late); start lateness p50 {_ms(report.p50_ms)}, p95 {_ms(report.p95_ms)},"
        f" p99 {_ms(report.p99_ms)}; runs: {outcomes}"
    )


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value} ms"
