"""`kafkron ls [--json]`: every schedule, as the shards' changelog holds it.

Reads the compacted ``{ns}.schedules`` topic to its end (read_committed) and keeps
the latest record per key, so it shows exactly the state a shard would restore;
it needs no recorder and no database. The reading and the summary of each schedule
(its last outcome included) are `actors.views.schedules`, shared with the web
console. The result of each attempt, worker and duration live in `kafkron history`.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from actors.cli import output
from actors.shard.state import decode_schedule
from actors.views.schedules import latest_states, schedule_json, spec_text
from actors.views.tail import TailError, read_to_end
from topics.names import Settings, TopicKind

_EPILOG = """\
examples:
  kafkron ls
  kafkron ls --json | jq '.[] | select(.paused)'
  KAFKRON_NAMESPACE=staging kafkron ls

Columns: id, spec, zone, job (a target shows where it goes: → kafka:TOPIC, → POST URL),
next fire (UTC), state, last fired (the latest occurrence fired), last outcome of its
latest run (running, retrying, dead_lettered, completed). state is the schedule's own:
  active                     (active (runs 1/3) with --max-runs 3: one run started)
  paused until 2026-12-03 14:00 UTC by ops: db migration   (what the pause said)
  pausing after the current run                             (pause --after-current)
  completed (max_runs 3/3)   every run it may start has started
  completed (end)            its spec has nothing more (an --end, an --at)
--json gives a target as "target" ({"kafka": {...}} or {"http": {...}}, its fields)
and "job" null, and the state as "state" (the text), "paused", "pause" ({"at", "note",
"until", "by", "pending"} or null), "completed", "fired_count" and "max_runs".
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "ls",
        help="list every schedule with its next fire and last outcome",
        description="List schedules from the {ns}.schedules changelog.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    topic = settings.topic(TopicKind.SCHEDULES)
    try:
        records = asyncio.run(read_to_end(settings, topic))
    except TailError as exc:
        return output.fail("ls", str(exc))
    rows: list[dict[str, Any]] = []
    for key, value in sorted(latest_states(records).items()):
        try:
            rows.append(schedule_json(decode_schedule(value)))
        except (ValueError, KeyError, TypeError) as exc:
            rows.append({"id": key, "error": f"unreadable changelog record ({exc})"})
    if args.json:
        output.print_json(rows)
        return 0
    if not rows:
        print(f"no schedules in {topic}; add one with `kafkron schedule add`")
        return 0
    output.print_table(
        ("id", "spec", "zone", "job", "next fire", "state", "last fired", "last outcome"),
        [_table_row(row) for row in rows],
        title=f"schedules in {topic}",
        status_column="last outcome",
    )
    return 0


def _table_row(row: dict[str, Any]) -> tuple[str, ...]:
    if "error" in row:
        return (row["id"], "-", "-", "-", "-", "-", "-", row["error"])
    return (
        row["id"],
        spec_text(row["spec"]),
        row["zone"] or "-",
        _job(row),
        _short(row["next_fire"]),
        row["state"],
        _short(row["last_fired"]),
        row["last_outcome"],
    )


def _job(row: dict[str, Any]) -> str:
    target = output.target_text(row.get("target"))
    return f"→ {target}" if target is not None else output.job_text(row["job"])


def _short(text: str | None) -> str:
    return "-" if text is None else text[:-1].replace("T", " ")
