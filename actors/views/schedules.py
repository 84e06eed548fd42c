"""Schedules as the shards' changelog holds them: the latest state per id, and its summary.

The changelog is read whole (`actors.views.tail.read_to_end`) and reduced to the
latest record per key, so what is shown is exactly the state a shard would restore;
records are decoded with the shard's own `actors.shard.state.decode_schedule`.
The last outcome comes from the changelog too, so it says what the shard knows: a
run in flight (``running``, or ``retrying`` with the next attempt's instant), a
dead-lettered run, or ``completed`` (the run ended without a dead letter).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import orjson

from actors.display import carrier_target, instant, job_text
from actors.shard.retired import is_gone_key
from actors.shard.state import (
    ScheduleState,
    decode_definition,
    decode_schedule,
    encode_schedule,
    is_definition_key,
)
from actors.views.ratelimits import with_rate
from actors.views.schedule_status import status_json
from actors.views.tail import Record
from topics.key_templates import rendered_key_of, renders_keys
from topics.queues import DEFAULT_QUEUE


def latest_states(records: list[Record]) -> dict[str, bytes]:
    """The last value per schedule id (tombstones remove), in log order per partition.

    A schedule's record of version 2 (its state without its definition, see
    `actors.shard.state`) comes back whole, as the version-1 record of the same
    state, its definition taken from the definition's own record; those records,
    and a deleted schedule's ``@gone/`` record, are not schedules and are left
    out. A record that cannot be completed so is left as it is, for its reader to
    report unreadable.
    """
    latest: dict[str, bytes] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        key = (record.key or b"").decode("utf-8", errors="replace")
        if record.value is None:
            latest.pop(key, None)
        else:
            latest[key] = record.value
    definitions: dict[bytes, bytes] = {}
    for key in [key for key in latest if is_gone_key(key.encode())]:
        del latest[key]  # a deleted schedule's floor (`actors.shard.retired`)
    for key in [key for key in latest if is_definition_key(key.encode())]:
        value = latest.pop(key)
        try:
            definitions[key.encode()] = decode_definition(value)
        except (ValueError, KeyError, TypeError):
            continue  # the schedules that name it are reported unreadable
    for key, value in latest.items():
        if value.startswith(b'{"v":2'):
            try:
                latest[key] = encode_schedule(decode_schedule(value, definitions))
            except (ValueError, KeyError, TypeError):
                continue
    return latest


def spec_text(spec: dict[str, Any]) -> str:
    if "cron" in spec:
        return f"cron {spec['cron']}"
    if "every" in spec:
        anchor = spec.get("anchor")
        return f"every {spec['every']}" + (f" from {anchor}" if anchor else "")
    if "at" in spec:
        return f"at {spec['at']}"
    if "rrule" in spec:
        return f"rrule {spec['rrule']} from {spec.get('dtstart')}"
    if "business_day" in spec:
        nth = spec["business_day"]
        return f"business day {'last' if nth == -1 else nth} at {spec.get('time')}"
    if "any" in spec and isinstance(spec["any"], list):
        parts = " + ".join(spec_text(m) if isinstance(m, dict) else str(m) for m in spec["any"])
        exclude = spec.get("exclude") or []
        text = parts + (f" minus {len(exclude)} exclusion(s)" if exclude else "")
        adjust = spec.get("adjust")
        return text + (f", {adjust}" if adjust and adjust != "skip" else "")
    return orjson.dumps(spec).decode()


def spec_zone(spec: dict[str, Any]) -> str | None:
    """The zone a spec's wall times are in (None for instants: every, at)."""
    if any(k in spec for k in ("cron", "rrule", "business_day")):
        tz = spec.get("tz", "UTC")
        return tz if isinstance(tz, str) else None
    if "any" in spec and isinstance(spec["any"], list):
        if isinstance(spec.get("tz"), str):
            return str(spec["tz"])
        zones = [spec_zone(m) for m in spec["any"] if isinstance(m, dict)]
        return next((z for z in zones if z is not None), None)
    return None


def last_outcome(state: ScheduleState) -> str:
    if state.runs:
        latest = max(state.runs.values(), key=lambda r: (r.scheduled_ms, r.task or ""))
        if latest.retry_ms is not None:
            return f"retrying (attempt {latest.attempt + 1} at {instant(latest.retry_ms)})"
        return f"running (attempt {latest.attempt})"
    dead = state.dead_or_none
    if dead:
        newest_dead = next(reversed(dead))
        if state.last_fired_ms is not None and instant(state.last_fired_ms) in newest_dead:
            return "dead_lettered"
    if state.last_fired_ms is None:
        return "-"
    return "completed"


def job_of(definition: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """(job name, target) of a schedule's definition: a target (``{"kafka": {...}}`` or
    ``{"http": {...}}``, its carrier job's args) has no job name of its own."""
    job = definition.get("job") or {}
    target = carrier_target(job.get("name"), job.get("args"))
    return (None, target) if target is not None else (job.get("name"), None)


def shown_job(definition: dict[str, Any], schedule_id: str = "") -> str:
    """The job cell of every schedule view: its name (and its worker queue, when not the
    default, and its concurrency key), or ``→ kafka:TOPIC``/``→ POST URL``. A key from
    placeholders is shown as its template and what it renders to for ``schedule_id``."""
    job = definition.get("job") or {}
    text = job_text(job.get("name"), job.get("args"))
    queue = job.get("queue")
    if queue not in (None, DEFAULT_QUEUE):
        text = f"{text} (queue {queue})"
    rendered = run_key_of(job, schedule_id, renders_keys(definition))
    return with_rate(
        with_priority(with_key(text, job.get("concurrency"), rendered), job.get("priority")),
        job.get("rate_limit"),
        rendered,
    )


def run_key_of(job: Any, schedule_id: str, templates: bool) -> str | None:
    """The key a changelog job's runs carry when its key is a template (its concurrency
    key, else its rate-limit key: the two are one key when both are given); None for a
    literal key or none (`topics.key_templates`; ``templates``: its definition's doc has
    `RENDERED_MARK`, else a key with braces is literal)."""
    if not isinstance(job, dict):
        return None
    for wire in (job.get("concurrency"), job.get("rate_limit")):
        if wire is not None:
            return rendered_key_of(wire, schedule_id, job.get("args"), templates)
    return None


def with_priority(text: str, priority: Any) -> str:
    """``text`` and, for a job of a priority other than 0, `` !P`` (docs/DESIGN.md §8.4)."""
    if not isinstance(priority, int) or isinstance(priority, bool) or priority == 0:
        return text
    return f"{text} !{priority}"


def with_key(text: str, concurrency: Any, rendered: str | None = None) -> str:
    """``text`` and, for a job with a concurrency key, ``[key K ≤ N, strategy]``; a
    template's ``rendered`` key beside it, ``[key T → K ≤ N, strategy]``."""
    if not isinstance(concurrency, dict):
        return text
    key = concurrency.get("key")
    shown = key if rendered is None else f"{key} → {rendered}"
    return f"{text} [key {shown} ≤ {concurrency.get('limit')}, {concurrency.get('strategy')}]"


def waiting_note(state: ScheduleState, unserved: Collection[str]) -> str | None:
    """``waiting (attempt N): no worker serves queue Q`` for a schedule whose latest run
    is out on a queue no worker serves now (``unserved``: `actors.views.queues`)."""
    runs = [r for r in state.runs.values() if r.queue in unserved and r.retry_ms is None]
    if not runs:
        return None
    latest = max(runs, key=lambda r: (r.scheduled_ms, r.task or ""))
    return (
        f"waiting (attempt {latest.attempt} since {instant(latest.fired_ms)}):"
        f" no worker serves queue {latest.queue}"
    )


def schedule_json(state: ScheduleState) -> dict[str, Any]:
    definition = orjson.loads(state.def_bytes)
    spec = definition.get("spec", {})
    job, target = job_of(definition)
    return {
        "id": state.id,
        "spec": spec,
        "zone": spec_zone(spec),
        "job": job,
        "target": target,
        "queue": None if job is None else (definition["job"].get("queue") or DEFAULT_QUEUE),
        "concurrency": None if job is None else definition["job"].get("concurrency"),
        "priority": None if job is None else definition["job"].get("priority"),
        "rate_limit": None if job is None else definition["job"].get("rate_limit"),
        # The key its runs carry, a template rendered (None: the key is literal, or none).
        "run_key": (
            None
            if job is None
            else run_key_of(definition["job"], state.id, renders_keys(definition))
        ),
        "next_fire": None if state.next_ms is None else instant(state.next_ms),
        "paused": state.paused,
        **status_json(state),
        "last_fired": None if state.last_fired_ms is None else instant(state.last_fired_ms),
        "last_outcome": last_outcome(state),
        "in_flight": [
            {
                "run_id": r.run_id,
                "attempt": r.attempt,
                "waiting_retry": r.retry_ms is not None,
                "queue": r.queue or DEFAULT_QUEUE,
                "fired_at": instant(r.fired_ms),
            }
            for r in state.runs.values()
        ],
        "dead_lettered": list(state.dead_or_none or ()),
        "dag": state.dag is not None,
    }
