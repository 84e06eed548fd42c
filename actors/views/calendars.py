"""What the front ends read of named calendars: the calendars and who names them.

``{ns}.calendars`` holds each calendar (the latest record of its name; a tombstone
deletes it); the changelog (``{ns}.schedules``) holds each schedule's spec, and so
which calendars it names. The CLI (`kafkron calendar`), the client and the console
read both; the shards follow the calendars topic themselves (docs/DESIGN.md §5.7).
"""

from __future__ import annotations

from typing import Any

import orjson

from actors.shard.state import ScheduleState, decode_schedule
from actors.views.schedules import latest_states
from actors.views.tail import Record, read_to_end
from topics.calendar_days import calendar_names
from topics.names import Settings, TopicKind


def latest_calendars(records: list[Record]) -> dict[str, dict[str, Any]]:
    """name -> the calendar object, from ``{ns}.calendars`` records in log order."""
    found: dict[str, dict[str, Any]] = {}
    for record in sorted(records, key=lambda r: r.offset):
        if record.key is None:
            continue
        name = record.key.decode("utf-8", "replace")
        if record.value is None:
            found.pop(name, None)
            continue
        try:
            body = orjson.loads(record.value)
            found[name] = dict(body["calendar"])
        except (ValueError, KeyError, TypeError):
            continue  # not a record a shard wrote; the shards count it unreadable
    return found


def calendar_users(records: list[Record]) -> dict[str, list[str]]:
    """calendar name -> the ids of the schedules whose spec names it (changelog records)."""
    users: dict[str, list[str]] = {}
    for schedule_id, value in sorted(latest_states(records).items()):
        try:
            spec = orjson.loads(decode_schedule(value).def_bytes).get("spec")
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        if not isinstance(spec, dict):
            continue
        for name in calendar_names(spec):
            users.setdefault(name, []).append(schedule_id)
    return users


async def read_calendars(settings: Settings) -> dict[str, dict[str, Any]]:
    return latest_calendars(await read_to_end(settings, settings.topic(TopicKind.CALENDARS)))


async def read_users(settings: Settings) -> dict[str, list[str]]:
    return calendar_users(await read_to_end(settings, settings.topic(TopicKind.SCHEDULES)))


def fires_of(state: ScheduleState, count: int) -> list[int]:
    """A schedule's next ``count`` fires (epoch ms) as its changelog record says them:
    its ``next`` and the fires of its spec after it. A spec that names calendars is
    bound to the calendars on the shard, not here: only its ``next`` (which the shard
    computed with them; none while it waits for one) is shown."""
    fires: list[int] = []
    at_ms = state.next_ms
    if at_ms is None or count < 1:
        return fires
    fires.append(at_ms)
    spec = orjson.loads(state.def_bytes).get("spec")
    if isinstance(spec, dict) and calendar_names(spec):
        return fires
    next_after = state.definition.compiled.next_after
    while len(fires) < count:
        following = next_after(fires[-1])
        if following is None:
            break
        fires.append(following)
    return fires
