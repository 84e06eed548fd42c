"""`kafkron schedule add|rm|pause|resume|trigger`: produce one schedule command.

``add`` builds a ``schedule.upsert`` from flags; only the flags given are written,
so every other field keeps the documented default the shard applies. ``--print``
shows the command instead of sending it (pipe it to kcat or keep it in a file for
`kafkron submit`).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import Any

from actors.cli import output, pause_args, rate_args, target_args
from actors.cli.submit_cmd import produce
from actors.timespec.composite import ADJUSTMENTS
from topics import codec
from topics.alerts import Deadline
from topics.command_builders import (
    CommandRecord,
    InvalidCommand,
    schedule_delete,
    schedule_pause,
    schedule_resume,
    schedule_trigger,
    schedule_upsert,
)
from topics.command_parts import (
    AnyOf,
    At,
    BusinessDay,
    Cron,
    Days,
    Dst,
    Every,
    HttpTarget,
    KafkaTarget,
    Misfire,
    Retry,
    RRule,
    Single,
    Spec,
    SpecJson,
)
from topics.commands import MISFIRE_POLICIES, OVERLAP_POLICIES
from topics.concurrency import Concurrency
from topics.names import Settings
from topics.vocabulary import ConcurrencyStrategy, DstFold, DstGap, JitterMode

_EPILOG = """\
examples:
  kafkron schedule add invoice-nightly --cron '0 0 * * *' --tz Europe/London \\
      --job billing.invoice_nightly --args '{"region": "eu"}'
  kafkron schedule add fx-rates --every 5m --job billing.fx_rates --overlap skip
  kafkron schedule add remind-42 --at 2026-12-04T14:05:00Z --job billing.remind
  kafkron schedule add charge --every 1h --job billing.charge --max-attempts 3 --print
  kafkron schedule add order-due --cron '0 9 * * *' --to-topic orders.due \\
      --key '{schedule_id}' --value '{"order": "o-1", "due": "{scheduled_at}"}'
  kafkron schedule add charge-hook --every 1h --http-post https://billing.example/charge \\
      --body '{"run": "{run_id}"}' --http-header Authorization=secret:billing-api
  kafkron schedule add welcome-mails --every 1d --job mail.welcome --max-runs 3
  kafkron schedule add render --every 1h --job media.render --queue gpu
  kafkron schedule add ledger-close --business-day -1 --time 18:00 --tz Europe/London \
      --exclude weekends --exclude 2026-12-25 --exclude 2026-12-28 --job ledger.close
  kafkron schedule add payroll --cron '0 6 25 * *' --tz Europe/London --exclude weekends \
      --adjust previous_business_day --job payroll.run
  kafkron schedule add board-pack --rrule 'FREQ=MONTHLY;BYDAY=1MO' --dtstart 2026-01-05T08:00:00 \
      --tz Europe/Paris --job reports.board_pack
  kafkron schedule pause invoice-nightly
  kafkron schedule pause invoice-nightly --note 'db migration' --until 2h --after-current
  kafkron schedule trigger invoice-nightly    # fire once, now
  kafkron schedule rm invoice-nightly
"""

_SIMPLE_ACTIONS = {
    "rm": ("schedule.delete", "delete a schedule (its pending retries stop)"),
    "pause": ("schedule.pause", "stop firing until resumed, or --until an instant"),
    "resume": ("schedule.resume", "fire again (misfire policy decides what was missed)"),
    "trigger": ("schedule.trigger", "fire once, now, outside the schedule"),
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schedule",
        help="add, remove, pause, resume or trigger a schedule",
        description="Produce a schedule command to {ns}.commands.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="schedule_action", metavar="ACTION", required=True)
    _register_add(actions)
    for name, (kind, summary) in _SIMPLE_ACTIONS.items():
        simple = actions.add_parser(
            name, help=summary, description=summary, epilog=f"example: kafkron schedule {name} ID"
        )
        simple.add_argument("id", help="schedule id")
        simple.add_argument("--print", action="store_true", help="print the command, send nothing")
        simple.set_defaults(func=run_simple, command_type=kind)
        if name == "pause":
            pause_args.add_arguments(simple)
            simple.set_defaults(func=run_pause)


def _register_add(actions: Any) -> None:
    add = actions.add_parser(
        "add",
        help="create or replace a schedule",
        description="Create or replace a schedule (schedule.upsert).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add.add_argument("id", help="schedule id (the record key)")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument(
        "--cron",
        metavar="EXPR",
        action="append",
        help="cron expression (5 fields, or 6 with seconds); repeat it to merge several",
    )
    when.add_argument("--every", metavar="D", help="fixed interval, e.g. 90s, 5m, 1h30m")
    when.add_argument("--at", metavar="T", help="once, at an RFC 3339 instant")
    when.add_argument(
        "--rrule",
        metavar="RULE",
        help="RFC 5545 RRULE, e.g. FREQ=MONTHLY;BYMONTHDAY=-1 (--dtstart)",
    )
    when.add_argument(
        "--business-day", type=int, metavar="N", help="N-th business day of each month (-1 last)"
    )
    when.add_argument(
        "--spec",
        metavar="JSON",
        help='a whole spec object, e.g. \'{"any": [...], "exclude": [...]}\'',
    )
    add.add_argument(
        "--dtstart", metavar="LOCAL", help="--rrule's local start, 2026-01-05T09:00:00"
    )
    add.add_argument("--time", metavar="HH:MM", help="--business-day's local time of day")
    add.add_argument(
        "--exclude",
        metavar="DAYS",
        action="append",
        help="days on which nothing fires: weekends, a date 2026-12-25, a range "
        "2026-12-24..2027-01-01, a calendar's name (`kafkron calendar`), or a JSON spec;"
        " repeatable",
    )
    add.add_argument(
        "--adjust", choices=ADJUSTMENTS, help="a fixed-time fire on an excluded day (skip)"
    )
    add.add_argument("--tz", metavar="ZONE", help="IANA time zone of the wall times (default UTC)")
    add.add_argument("--anchor", metavar="T", help="instant --every counts from (default epoch)")
    what = add.add_mutually_exclusive_group(required=True)
    what.add_argument("--job", metavar="NAME", help="registered job name")
    add.add_argument("--args", metavar="JSON", help="job arguments, a JSON object")
    target_args.add_arguments(add, what)
    add.add_argument("--misfire", choices=MISFIRE_POLICIES, help="after downtime (run_once)")
    add.add_argument("--grace-s", type=int, metavar="N", help="misfire grace in seconds (300)")
    add.add_argument("--catch-up-max", type=int, metavar="N", help="catch_up fires at most N")
    add.add_argument("--overlap", choices=OVERLAP_POLICIES, help="if still running (skip)")
    add.add_argument("--spread-s", type=int, metavar="N", help="spread window in seconds (0)")
    add.add_argument("--dst-gap", choices=tuple(DstGap), help="nonexistent wall time (shift)")
    add.add_argument("--dst-fold", choices=tuple(DstFold), help="repeated wall time (once)")
    add.add_argument("--max-attempts", type=int, metavar="N", help="attempts before DLQ (5)")
    add.add_argument("--initial-s", type=float, metavar="S", help="first retry backoff (1)")
    add.add_argument("--coefficient", type=float, metavar="X", help="backoff growth (2.0)")
    add.add_argument("--max-interval-s", type=float, metavar="S", help="backoff cap (100)")
    add.add_argument("--jitter", choices=tuple(JitterMode), help="backoff jitter (full)")
    add.add_argument(
        "--non-retryable",
        action="append",
        metavar="ERROR",
        help="error type that goes straight to the DLQ (repeatable)",
    )
    add.add_argument("--timeout-s", type=int, metavar="N", help="attempt timeout (3600)")
    add.add_argument("--start", metavar="T", help="no fires before this instant")
    add.add_argument("--end", metavar="T", help="no fires after this instant")
    add.add_argument(
        "--max-runs", type=int, metavar="N", help="at most N runs ever start (triggers count)"
    )
    add.add_argument(
        "--start-within-s",
        type=int,
        metavar="S",
        help="deadline: each run starts within S s of its instant, else a deadline_missed alert",
    )
    add.add_argument(
        "--finish-within-s",
        type=int,
        metavar="F",
        help="deadline: each run ends within F s of its instant, else a deadline_missed alert",
    )
    add.add_argument(
        "--queue",
        metavar="NAME",
        help="worker queue of the job's runs (default: the default queue, {ns}.runs);"
        " only workers started with --queue NAME take them",
    )
    add.add_argument(
        "--concurrency-key",
        metavar="KEY",
        help="at most --concurrency-limit runs of KEY at once, across every schedule naming it;"
        " KEY may name {schedule_id} (a key per schedule) and {args.NAME} (a field of --args,"
        " such as invoice-{args.customer}); {{ and }} are literal braces",
    )
    add.add_argument(
        "--concurrency-limit", type=int, metavar="N", help="runs of the key at once (1)"
    )
    add.add_argument(
        "--concurrency-strategy",
        choices=[str(s) for s in ConcurrencyStrategy],
        help="a run finding its key at the limit: waits (queue), ends cancelled"
        " (cancel_newest) or stops the oldest (cancel_in_progress)",
    )
    add.add_argument(
        "--priority",
        type=int,
        metavar="P",
        help="0-9, higher first within the queue (default 0); 5-9 go to the queue's high"
        " lane, which workers started with --lanes read first",
    )
    rate_args.add_arguments(add)
    add.add_argument("--print", action="store_true", help="print the command, send nothing")
    add.set_defaults(func=run_add)


def concurrency_of(args: argparse.Namespace) -> Concurrency | None:
    """The ``--concurrency-*`` flags as a `Concurrency`; ValueError if a limit or a
    strategy is given without a key."""
    key = args.concurrency_key
    if key is None:
        if args.concurrency_limit is not None or args.concurrency_strategy is not None:
            raise ValueError(
                "--concurrency-limit and --concurrency-strategy need --concurrency-key"
            )
        return None
    strategy = args.concurrency_strategy or ConcurrencyStrategy.QUEUE
    limit = 1 if args.concurrency_limit is None else args.concurrency_limit
    return Concurrency(key, limit, ConcurrencyStrategy(strategy))


def build_upsert(args: argparse.Namespace) -> CommandRecord:
    """The schedule.upsert of ``args``, built and checked by the one builder of
    commands (`topics.command_builders`); ``ValueError`` on a bad flag, `InvalidCommand`
    naming the field the shard would reject."""
    target = target_args.target_of(args)
    if target is not None and args.args is not None:
        raise ValueError("--args applies to --job only")
    job_args: Any = {}
    if args.args is not None:
        try:
            job_args = codec.loads(args.args)
        except ValueError:
            raise ValueError(
                f"--args {args.args!r} is not JSON; write an object like '{{\"k\": 1}}'"
            ) from None
        if not isinstance(job_args, dict):
            raise ValueError('--args must be a JSON object, like \'{"customer": "c-42"}\'')
    spec = spec_of(args)
    try:
        return _upsert(args, spec, job_args, target)
    except InvalidCommand as error:
        if error.field == "max_runs":
            raise InvalidCommand(f"--max-runs: {error.reason}") from None
        if error.field.startswith("deadline"):
            name = error.field.rpartition(".")[2].replace("_", "-")
            flag = f"--{name}" if name != "deadline" else "--start-within-s/--finish-within-s"
            raise InvalidCommand(f"{flag}: {error.reason}") from None
        if error.field in ("queue", "job.queue"):
            raise InvalidCommand(f"--queue: {error.reason}") from None
        if error.field in ("priority", "job.priority"):
            raise InvalidCommand(f"--priority: {error.reason}") from None
        if error.field is not None and error.field.startswith("job.args."):  # named by a key
            raise InvalidCommand(f"--args: {error.reason}") from None
        if error.field is not None and error.field.startswith(("concurrency", "job.concurrency")):
            flag = error.field.rsplit(".", 1)[-1]
            flag = "concurrency-key" if flag == "concurrency" else f"concurrency-{flag}"
            raise InvalidCommand(f"--{flag}: {error.reason}") from None
        if error.field is not None and error.field.startswith("job.rate_limit"):
            raise InvalidCommand(f"{rate_args.flag_of(error.field)}: {error.reason}") from None
        raise InvalidCommand(target_args.flag_of(error.reason)) from None


def spec_of(args: argparse.Namespace) -> Spec:
    """The spec of the when-flags (several, exclusions and adjustment make an AnyOf)."""
    zoned = args.cron is not None or args.rrule is not None or args.business_day is not None
    if args.tz is not None and not zoned and not args.exclude:
        raise ValueError("--tz applies to --cron, --rrule, --business-day and --exclude")
    if args.anchor is not None and args.every is None:
        raise ValueError("--anchor applies to --every only")
    if args.dtstart is not None and args.rrule is None:
        raise ValueError("--dtstart applies to --rrule only")
    if args.time is not None and args.business_day is None:
        raise ValueError("--time applies to --business-day only")
    if args.spec is not None:
        if args.exclude or args.adjust or args.tz:
            raise ValueError("--spec is the whole spec: put exclude, adjust and tz inside it")
        try:
            raw = codec.loads(args.spec)
        except ValueError:
            raise ValueError(f"--spec {args.spec!r} is not JSON") from None
        if not isinstance(raw, dict):
            raise ValueError("--spec must be a JSON object")
        return SpecJson(raw)
    singles: list[Single]
    if args.cron is not None:
        singles = [Cron(expr, tz=args.tz) for expr in args.cron]
    elif args.every is not None:
        singles = [Every(args.every, anchor=args.anchor)]
    elif args.rrule is not None:
        if args.dtstart is None:
            raise ValueError("--rrule needs --dtstart, its local start (2026-01-05T09:00:00)")
        singles = [RRule(args.rrule, args.dtstart, tz=args.tz)]
    elif args.business_day is not None:
        if args.time is None:
            raise ValueError("--business-day needs --time, the local time of day (18:00)")
        singles = [BusinessDay(args.business_day, args.time, tz=args.tz)]
    else:
        singles = [At(args.at)]
    if len(singles) == 1 and not args.exclude and args.adjust is None:
        return singles[0]
    return AnyOf(singles, exclude=exclusions(args.exclude or [], args.tz), adjust=args.adjust)


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def exclusions(texts: list[str], tz: str | None) -> list[Days | Single | SpecJson | str]:
    """``--exclude`` values: weekends, dates and ranges make one calendar in ``tz``;
    any other word names a calendar of the namespace."""
    dates: list[str] = []
    ranges: list[tuple[str, str]] = []
    weekdays: list[str] = []
    found: list[Days | Single | SpecJson | str] = []
    for text in texts:
        if text.strip().startswith("{"):
            try:
                raw = codec.loads(text)
            except ValueError:
                raise ValueError(f"--exclude {text!r} is not JSON") from None
            if not isinstance(raw, dict):
                raise ValueError("--exclude JSON must be an object")
            found.append(SpecJson(raw))
        elif text.lower() == "weekends":
            weekdays += ["SAT", "SUN"]
        elif ".." in text:
            first, last = text.split("..", 1)
            ranges.append((first, last))
        elif _DATE.fullmatch(text):
            dates.append(text)
        else:
            found.append(text)  # a named calendar
    if dates or ranges or weekdays:
        found.insert(
            0, Days(tz=tz, dates=tuple(dates), ranges=tuple(ranges), weekdays=tuple(weekdays))
        )
    return found


def _upsert(
    args: argparse.Namespace,
    spec: Spec,
    job_args: Any,
    target: KafkaTarget | HttpTarget | None,
) -> CommandRecord:
    return schedule_upsert(
        args.id,
        spec,
        args.job,
        args=job_args if target is None else None,
        target=target,
        misfire=Misfire(args.misfire, grace_s=args.grace_s, catch_up_max=args.catch_up_max),
        overlap=args.overlap,
        dst=Dst(gap=args.dst_gap, fold=args.dst_fold),
        spread_s=args.spread_s,
        retry=Retry(
            max_attempts=args.max_attempts,
            initial_s=args.initial_s,
            coefficient=args.coefficient,
            max_interval_s=args.max_interval_s,
            jitter=args.jitter,
            non_retryable=args.non_retryable,
        ),
        timeout_s=args.timeout_s,
        start=args.start,
        end=args.end,
        max_runs=args.max_runs,
        queue=args.queue,
        concurrency=concurrency_of(args),
        priority=args.priority,
        rate_limit=rate_args.rate_limit_of(args),
        deadline=deadline_of(args),
    )


def deadline_of(args: argparse.Namespace) -> Deadline | None:
    """The ``deadline`` of ``--start-within-s`` / ``--finish-within-s`` (None: neither)."""
    start, finish = args.start_within_s, args.finish_within_s
    return None if start is None and finish is None else Deadline(start, finish)


_SIMPLE_BUILDERS: dict[str, Callable[[str], CommandRecord]] = {
    "rm": schedule_delete,
    "pause": schedule_pause,
    "resume": schedule_resume,
    "trigger": schedule_trigger,
}


def _send_or_print(command_name: str, build: Callable[[], CommandRecord], print_only: bool) -> int:
    try:
        record = build()
    except ValueError as exc:  # InvalidCommand included: it names the field
        return output.fail(command_name, str(exc), 2)
    if print_only:
        sys.stdout.write(record.value.decode("utf-8") + "\n")
        return 0
    return produce(command_name, Settings.from_env(), [(record.key, record.value)])


def run_add(args: argparse.Namespace) -> int:
    return _send_or_print("schedule add", lambda: build_upsert(args), args.print)


def run_pause(args: argparse.Namespace) -> int:
    return _send_or_print("schedule pause", lambda: pause_args.build_pause(args), args.print)


def run_simple(args: argparse.Namespace) -> int:
    build = _SIMPLE_BUILDERS[args.schedule_action]
    return _send_or_print(f"schedule {args.schedule_action}", lambda: build(args.id), args.print)
