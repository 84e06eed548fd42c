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
import logging
import time
from typing import Any

from actors.cli import output
from actors.shard.state import decode_schedule
from actors.views.queues import QueueState, queue_states
from actors.views.ratelimits import rate_waiting_note, read_pauses, with_rate
from actors.views.schedules import (
    latest_states,
    schedule_json,
    spec_text,
    waiting_note,
    with_key,
    with_priority,
)
from actors.views.tail import TailError, read_to_end
from topics.names import Settings, TopicKind
from topics.queues import DEFAULT_QUEUE
from topics.ratelimits import PauseState

log = logging.getLogger("kafkron.ls")

_EPILOG = """\
examples:
  kafkron ls
  kafkron ls --json | jq '.[] | select(.paused)'
  KAFKRON_NAMESPACE=staging kafkron ls

Columns: id, spec, zone, job (a target shows where it goes: → kafka:TOPIC, → POST URL),
next fire (UTC), state, last fired (the latest occurrence fired), last outcome of its
latest run (running, retrying, dead_lettered, completed; "waiting ...: no worker serves
queue Q" for a run out on a worker queue whose group has no member now; "waiting ...:
rate-limit key K paused until T" for a run held by `kafkron ratelimit pause`). A job on a
worker queue shows it: "media.render (queue gpu)", and a table of the queues follows
(workers, records not finished, the oldest one's age). state is the schedule's own:
  active                     (active (runs 1/3) with --max-runs 3: one run started)
  paused until 2026-12-03 14:00 UTC by ops: db migration   (what the pause said)
  pausing after the current run                             (pause --after-current)
  completed (max_runs 3/3)   every run it may start has started
  completed (end)            its spec has nothing more (an --end, an --at)
--json gives a target as "target" ({"kafka": {...}} or {"http": {...}}, its fields)
and "job" null, and the state as "state" (the text), "paused", "pause" ({"at", "note",
"until", "by", "pending", "resumed", "resumed_as_of"} or null), "completed", "fired_count"
and "max_runs".
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
    queues = _queues(settings)
    unserved = {q.queue for q in queues if q.workers == 0}
    pauses = _pauses(settings)
    now_ms = time.time_ns() // 1_000_000
    rows: list[dict[str, Any]] = []
    for key, value in sorted(latest_states(records).items()):
        try:
            state = decode_schedule(value)
            row = schedule_json(state)
            waiting = waiting_note(state, unserved) or rate_waiting_note(state, pauses, now_ms)
            if waiting is not None:  # the shard says "in flight"; nobody can be running it
                row["last_outcome"] = waiting
            rows.append(row)
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
    if any(q.queue != DEFAULT_QUEUE for q in queues):  # a namespace without queues: as before
        now = time.time_ns() // 1_000_000
        print()
        output.print_table(
            ("queue", "topic", "workers", "open records", "oldest open"),
            [
                (
                    q.queue,
                    q.topic,
                    str(q.workers) if q.workers else "0 (no worker serves it)",
                    str(q.open_runs),
                    "-" if q.oldest_open_ms is None else f"{q.age_s(now):.0f} s ago",
                )
                for q in queues
            ],
            title="worker queues",
        )
    return 0


def _pauses(settings: Settings) -> dict[str, PauseState]:
    """The paused rate-limit keys; none if the broker will not say."""
    try:
        return asyncio.run(read_pauses(settings))
    except Exception as exc:  # ACLs, no {ns}.ratelimits yet: the schedules are the point
        log.debug("rate-limit pauses not read: %s", exc)
        return {}


def _queues(settings: Settings) -> list[QueueState]:
    """The queues' states; none if the broker will not say (ls still lists schedules)."""
    try:
        return asyncio.run(queue_states(settings))
    except Exception as exc:  # ACLs, a slow broker: the schedules are the point of ls
        log.debug("queues not read: %s", exc)
        return []


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
    if target is not None:
        return f"→ {target}"
    queue = row.get("queue")
    text = output.job_text(row["job"])
    if queue not in (None, DEFAULT_QUEUE):
        text = f"{text} (queue {queue})"
    rendered = row.get("run_key")  # a key from placeholders, as its runs carry it
    return with_rate(
        with_priority(with_key(text, row.get("concurrency"), rendered), row.get("priority")),
        row.get("rate_limit"),
        rendered,
    )


def _short(text: str | None) -> str:
    return "-" if text is None else text[:-1].replace("T", " ")
