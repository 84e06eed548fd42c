"""`kafkron dag show|clear|upsert`: DAGs, and where each of their runs stands.

``show`` reads the compacted ``{ns}.schedules`` changelog to its end
(read_committed, no group, like `kafkron ls`), decodes the DAG's record with the
shard's own decoder, and prints its graph with the state of each task of one run
(the latest unless ``--run``): a table, ``--json``, or ``--dot`` for Graphviz.
It shows exactly what a shard would restore, so it needs no recorder. For a run
that ended it also reads the run's own result (status, counts of task states,
duration) from ``{ns}.results``: on the DAG's partition, from about when the run
ended by the broker's time index (`result_query`), not the whole topic.

``clear`` sends ``dag.clear``: the owning shard reruns the task (a failed one,
typically, after a fix) and resets what is downstream of it; the run goes on.
``upsert`` sends a ``dag.upsert`` command from a JSON file (one object, which may
span lines), checked first with the shard's decoder.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from actors.cli import output
from actors.cli.schedule_cmd import deadline_of
from actors.cli.submit_cmd import produce
from actors.shard.state import decode_schedule
from actors.views.dag_view import (
    ResultQuery,
    ViewError,
    dag_view,
    deadline_text,
    dot,
    header_lines,
    other_runs_line,
    result_query,
    stages_text,
    table_rows,
    view_json,
)
from actors.views.schedules import latest_states
from actors.views.tail import Record, TailError, read_partition_since, read_to_end
from topics import codec
from topics.command_builders import InvalidCommand, dag_clear, validated
from topics.command_types import DagUpsert
from topics.messages import Result
from topics.names import Settings, TopicKind

_EPILOG = """\
examples:
  kafkron dag upsert actors/examples/billing/nightly-billing.json
  kafkron dag show nightly-billing
  kafkron dag show nightly-billing --run 'nightly-billing@2026-10-10T00:00:00.000Z'
  kafkron dag show nightly-billing --dot | dot -Tsvg > run.svg
  kafkron dag clear nightly-billing 'nightly-billing@2026-10-10T00:00:00.000Z' invoice-nightly

Task states: waiting, running, retrying, succeeded, failed (retries exhausted: see
`kafkron dlq list`), cancelled, upstream_failed (a task upstream did not succeed),
removed. Fix what failed, then clear the failed task: it reruns and the run goes on.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dag",
        help="show a DAG run's tasks, clear a failed task, upsert a DAG",
        description="DAG workflows: tasks run when the tasks they depend on succeeded.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="dag_action", metavar="ACTION")
    show = actions.add_parser(
        "show",
        help="the graph with the state of each task of a run",
        epilog="example: kafkron dag show nightly-billing --dot | dot -Tpng > run.png",
    )
    show.add_argument("dag_id", metavar="ID", help="the DAG id")
    show.add_argument("--run", metavar="RUN_ID", help="which run (default: the latest)")
    form = show.add_mutually_exclusive_group()
    form.add_argument("--dot", action="store_true", help="print Graphviz DOT")
    form.add_argument("--json", action="store_true", help="print JSON for scripts")
    show.set_defaults(func=run_show)
    clear = actions.add_parser(
        "clear",
        help="rerun a task of a run, and what is downstream of it",
        epilog="example: kafkron dag clear nightly-billing "
        "'nightly-billing@2026-10-10T00:00:00.000Z' invoice-nightly",
    )
    clear.add_argument("dag_id", metavar="ID", help="the DAG id")
    clear.add_argument("run_id", metavar="RUN_ID", help="the DAG run (see `kafkron dag show`)")
    clear.add_argument("task", metavar="TASK", help="the task to rerun")
    clear.set_defaults(func=run_clear)
    upsert = actions.add_parser(
        "upsert",
        help="create or replace a DAG from a JSON file (a dag.upsert command)",
        epilog="example: kafkron dag upsert actors/examples/billing/nightly-billing.json",
    )
    upsert.add_argument("file", metavar="FILE|-", help="one dag.upsert object, or - for stdin")
    upsert.add_argument(
        "--start-within-s",
        type=int,
        metavar="S",
        help="deadline: each task run starts within S s of becoming ready (a root: the DAG"
        " run's instant), else a deadline_missed alert; replaces the file's deadline",
    )
    upsert.add_argument(
        "--finish-within-s",
        type=int,
        metavar="F",
        help="deadline: each task run ends within F s of becoming ready, else a"
        " deadline_missed alert; replaces the file's deadline",
    )
    upsert.add_argument(
        "--print", action="store_true", help="print the checked command instead of sending it"
    )
    upsert.set_defaults(func=run_upsert)
    parser.set_defaults(func=output.usage(parser))


def run_show(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    topic = settings.topic(TopicKind.SCHEDULES)
    try:
        records = asyncio.run(read_to_end(settings, topic))
    except TailError as exc:
        return output.fail("dag show", str(exc))
    value = latest_states(records).get(args.dag_id)
    if value is None:
        return output.fail(
            "dag show",
            f"no DAG {args.dag_id!r} in {topic}; create it with `kafkron dag upsert FILE` "
            "(`kafkron ls` lists what exists)",
        )
    try:
        state = decode_schedule(value)
        query = result_query(state, args.run)
    except ViewError as exc:
        return output.fail("dag show", str(exc))
    except (ValueError, KeyError, TypeError) as exc:
        return output.fail("dag show", f"unreadable changelog record of {args.dag_id!r} ({exc})")
    result = None
    looked = False
    if query is not None:
        partition = max((r for r in records if r.key == args.dag_id.encode()), key=_offset)
        try:
            result = asyncio.run(_run_result(settings, partition.partition, query))
            looked = True
        except TailError as exc:
            print(f"kafkron dag show: the run's own result is not shown: {exc}", file=sys.stderr)
    try:
        view = dag_view(state, args.run, result=result, looked_for_result=looked)
    except ViewError as exc:
        return output.fail("dag show", str(exc))
    except (ValueError, KeyError, TypeError) as exc:
        return output.fail("dag show", f"unreadable changelog record of {args.dag_id!r} ({exc})")
    if args.dot:
        sys.stdout.write(dot(view))
        return 0
    if args.json:
        output.print_json(view_json(view))
        return 0
    for line in header_lines(view):
        print(line)
    print(f"stages: {stages_text(view.tasks)}")
    output.print_table(
        ("stage", "task", "state", "detail", "after"),
        table_rows(view),
        status_column="state",
    )
    others = other_runs_line(view)
    if others:
        print(others)
    return 0


def _offset(record: Record) -> int:
    return record.offset


async def _run_result(settings: Settings, partition: int, query: ResultQuery) -> Result | None:
    """The run-level result ``query`` names, from the results partition of its DAG (the
    shard writes it to the partition of the DAG's changelog record)."""
    records = await read_partition_since(
        settings,
        settings.topic(TopicKind.RESULTS),
        partition,
        query.since_ms,
        until=lambda r: query.done(r.value, r.timestamp_ms),
    )
    found = [query.result(r.value) for r in records]
    return next((r for r in reversed(found) if r is not None), None)


def run_clear(args: argparse.Namespace) -> int:
    try:
        record = dag_clear(args.run_id, args.task)
    except InvalidCommand as exc:
        return output.fail("dag clear", str(exc), 2)
    if record.id != args.dag_id:
        return output.fail(
            "dag clear",
            f"run_id: {args.run_id!r} is not a run of {args.dag_id!r}; a run id looks like "
            f"'{args.dag_id}@2026-10-10T00:00:00.000Z'",
            2,
        )
    return produce("dag clear", Settings.from_env(), [(record.key, record.value)])


def run_upsert(args: argparse.Namespace) -> int:
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as handle:
                text = handle.read()
    except OSError as exc:
        return output.fail("dag upsert", f"cannot read {args.file}: {exc.strerror}", 2)
    except UnicodeDecodeError:
        return output.fail("dag upsert", f"{args.file} is not UTF-8 text", 2)
    try:
        body = codec.loads(text)
    except ValueError as exc:
        return output.fail("dag upsert", f"{args.file} is not one JSON object ({exc})", 2)
    if not isinstance(body, dict) or body.get("type") != "dag.upsert":
        return output.fail(
            "dag upsert",
            f'{args.file} must hold one object with "type": "dag.upsert" '
            "(other commands go through `kafkron submit`)",
            2,
        )
    deadline = deadline_of(args)
    if deadline is not None:  # the flags replace the file's deadline
        body["deadline"] = deadline.wire()
    try:
        record = validated(body)
    except InvalidCommand as exc:
        if deadline is not None and exc.field.startswith("deadline"):
            name = exc.field.rpartition(".")[2].replace("_", "-")
            flag = f"--{name}" if name != "deadline" else "--start-within-s/--finish-within-s"
            return output.fail("dag upsert", f"{flag}: {exc.reason}", 2)
        return output.fail("dag upsert", str(exc), 2)
    decoded = record.decoded
    assert isinstance(decoded, DagUpsert)  # its type was checked above
    if args.print:
        print(record.value.decode())
        return 0
    code = produce("dag upsert", Settings.from_env(), [(record.key, record.value)])
    if code == 0:
        print(
            f"{decoded.id}: {len(decoded.tasks)} tasks, in order {' -> '.join(decoded.topo_order)}"
            + (
                ""
                if decoded.deadline is None
                else f"; deadline: {deadline_text(decoded.deadline.wire())}"
            )
        )
    return code
