"""What the front ends read of rate-limit pauses (docs/DESIGN.md §8.5).

``{ns}.ratelimits`` holds each paused key (the latest record of its key; a tombstone
resumes it). The CLI (`kafkron ratelimit ls`, `kafkron ls`), the client and the
console read it; workers follow it themselves (`actors/worker/ratelimit_follower.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from actors.shard.state import ScheduleState
from actors.views.tail import Record, read_to_end
from topics.key_templates import rendered_key_of, renders_keys
from topics.names import Settings, TopicKind
from topics.ratelimits import PauseState, decode_pause_value
from topics.timefmt import format_ms


def latest_pauses(records: list[Record]) -> dict[str, PauseState]:
    """key -> its pause, from ``{ns}.ratelimits`` records in log order."""
    found: dict[str, PauseState] = {}
    for record in sorted(records, key=lambda r: r.offset):
        if record.key is None:
            continue
        key = record.key.decode("utf-8", "replace")
        if record.value is None:
            found.pop(key, None)
            continue
        try:
            found[key] = decode_pause_value(record.value, key)
        except (ValueError, KeyError, TypeError):
            continue  # not a record a shard wrote (workers take it as a pause)
    return found


async def read_pauses(settings: Settings) -> dict[str, PauseState]:
    return latest_pauses(await read_to_end(settings, settings.topic(TopicKind.RATELIMITS)))


def pause_text(key: str, pause: PauseState, now_ms: int) -> str:
    """``rate-limit key K paused until T (note, by B)``, or ``... (ended)`` once past."""
    until = "resumed" if pause.until_ms is None else format_ms(pause.until_ms)
    text = f"rate-limit key {key} paused until {until}"
    extra = [part for part in (pause.note, None if pause.by is None else f"by {pause.by}") if part]
    if extra:
        text += f" ({', '.join(extra)})"
    if not pause.holds(now_ms):
        text += " (ended)"
    return text


def rate_note(
    job: Mapping[str, Any] | None,
    pauses: Mapping[str, PauseState],
    now_ms: int,
    schedule_id: str = "",
    *,
    templates: bool,
) -> str | None:
    """Why a job's runs wait, when its rate-limit key (a template rendered for
    ``schedule_id``: pauses name the key the runs carry) is paused now; None otherwise."""
    limit = None if job is None else job.get("rate_limit")
    if not isinstance(limit, Mapping):
        return None
    key = limit.get("key")
    if not isinstance(key, str):
        return None
    args = job.get("args") if job else None
    key = rendered_key_of(limit, schedule_id, args, templates) or key
    pause = pauses.get(key)
    if pause is None or not pause.holds(now_ms):
        return None
    return pause_text(key, pause, now_ms)


def with_rate(text: str, rate_limit: Any, rendered: str | None = None) -> str:
    """``text`` and, for a job with a rate limit, ``[rate K R/s burst B]``; a template's
    ``rendered`` key beside it, ``[rate T → K R/s burst B]``."""
    if not isinstance(rate_limit, Mapping):
        return text
    key = rate_limit.get("key")
    shown = key if rendered is None else f"{key} → {rendered}"
    return f"{text} [rate {shown} {rate_limit.get('per_s')}/s burst {rate_limit.get('burst', 1)}]"


def rate_waiting_note(
    state: ScheduleState, pauses: Mapping[str, PauseState], now_ms: int
) -> str | None:
    """``waiting (attempt N since T): rate-limit key K paused until U (note)`` for a
    schedule whose latest run is out (not retrying) while its job's key is paused: its
    worker holds it (docs/DESIGN.md §8.5)."""
    if not pauses:
        return None
    runs = [r for r in state.runs.values() if r.retry_ms is None and r.task is None]
    if not runs:
        return None
    try:
        doc = orjson.loads(state.def_bytes)
    except ValueError:
        return None
    job = doc.get("job")
    templates = renders_keys(doc)
    note = rate_note(
        job if isinstance(job, Mapping) else None, pauses, now_ms, state.id, templates=templates
    )
    if note is None:
        return None
    latest = max(runs, key=lambda r: r.scheduled_ms)
    return f"waiting (attempt {latest.attempt} since {format_ms(latest.fired_ms)}): {note}"
