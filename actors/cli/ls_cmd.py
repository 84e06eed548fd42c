"""`kafkron ls [--json]`: every schedule, as the shards' changelog holds it.

Reads the compacted ``{ns}.schedules`` topic to its end (read_committed) and keeps
the latest record per key, so it shows exactly the state a shard would restore;
it needs no recorder and no database. Records are decoded with the shard's own
`actors.shard.state.decode_schedule`.

The last outcome comes from the changelog too, so it says what the shard knows: a
run in flight (``running``, or ``retrying`` with the next attempt's instant), a
dead-lettered run, or ``completed`` (the run ended without a dead letter). The
result of each attempt, worker and duration live in `kafkron history`.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import orjson

from actors.cli import output
from actors.cli.tail import Record, TailError, read_to_end
from actors.shard.state import ScheduleState, decode_schedule
from topics.names import Settings, TopicKind

_EPILOG = """\
examples:
  kafkron ls
  kafkron ls --json | jq '.[] | select(.paused)'
  KAFKRON_NAMESPACE=staging kafkron ls

Columns: id, spec, zone, job, next fire (UTC), paused, last fired (the latest
occurrence fired), last outcome (running, retrying, dead_lettered, completed).
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


def latest_states(records: list[Record]) -> dict[str, bytes]:
    """The last value per key (tombstones remove), in log order per partition."""
    latest: dict[str, bytes] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        key = (record.key or b"").decode("utf-8", errors="replace")
        if record.value is None:
            latest.pop(key, None)
        else:
            latest[key] = record.value
    return latest


def spec_text(spec: dict[str, Any]) -> str:
    if "cron" in spec:
        return f"cron {spec['cron']}"
    if "every" in spec:
        anchor = spec.get("anchor")
        return f"every {spec['every']}" + (f" from {anchor}" if anchor else "")
    if "at" in spec:
        return f"at {spec['at']}"
    return orjson.dumps(spec).decode()


def last_outcome(state: ScheduleState) -> str:
    if state.runs:
        latest = max(state.runs.values(), key=lambda r: (r.scheduled_ms, r.task or ""))
        if latest.retry_ms is not None:
            return f"retrying (attempt {latest.attempt + 1} at {output.instant(latest.retry_ms)})"
        return f"running (attempt {latest.attempt})"
    if state.dead:
        newest_dead = next(reversed(state.dead))
        if state.last_fired_ms is not None and output.instant(state.last_fired_ms) in newest_dead:
            return "dead_lettered"
    if state.last_fired_ms is None:
        return "-"
    return "completed"


def schedule_json(state: ScheduleState) -> dict[str, Any]:
    definition = orjson.loads(state.def_bytes)
    spec = definition.get("spec", {})
    return {
        "id": state.id,
        "spec": spec,
        "zone": spec.get("tz", "UTC") if "cron" in spec else None,
        "job": definition.get("job", {}).get("name"),
        "next_fire": None if state.next_ms is None else output.instant(state.next_ms),
        "paused": state.paused,
        "last_fired": None if state.last_fired_ms is None else output.instant(state.last_fired_ms),
        "last_outcome": last_outcome(state),
        "in_flight": [
            {"run_id": r.run_id, "attempt": r.attempt, "waiting_retry": r.retry_ms is not None}
            for r in state.runs.values()
        ],
        "dead_lettered": list(state.dead),
        "dag": state.dag is not None,
    }


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
        ("id", "spec", "zone", "job", "next fire", "paused", "last fired", "last outcome"),
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
        row["job"] or "-",
        _short(row["next_fire"]),
        "yes" if row["paused"] else "no",
        _short(row["last_fired"]),
        row["last_outcome"],
    )


def _short(text: str | None) -> str:
    return "-" if text is None else text[:-1].replace("T", " ")
