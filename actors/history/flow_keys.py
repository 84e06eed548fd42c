"""The keys and queues of the runs in flight, from the history database: what the
console's keys page shows (docs/DESIGN.md §8.2, §8.5).

The recorder keeps, on each attempt it reads from a runs topic, its worker queue and
its key (`flow_of`: the concurrency key, else the rate-limit key, as the shard
rendered it, with its limit and rate). An attempt fired and not ended (no result yet)
is *running* once its start is known (a start report, or a job's progress: a worker
reports a start only for a run under a start deadline, so a run may show as waiting
until its result) and *waiting* before. `open_flow` groups them by key and by queue;
the keys are bounded to the top ``top`` by runs waiting (10,000 customers' keys make a
page of ``top`` rows and a count of the rest). `with_pauses` adds when each paused
rate-limit key resumes (from ``{ns}.ratelimits``, as ``kafkron ratelimit ls`` reads it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import aiosqlite
import orjson

from topics.command_types import Job
from topics.ratelimits import PauseState
from topics.timefmt import format_ms

TOP_KEYS = 50
"""Keys shown by default: those with the most runs waiting."""

_OPEN = "status IS NULL AND fired_ms IS NOT NULL"  # fired, no result (`attempts_open`)


def flow_of(job: Job) -> tuple[str | None, str | None]:
    """(key, its limits as JSON) of a run record's job; (None, None) without a key."""
    concurrency, rate_limit = job.concurrency, job.rate_limit
    if concurrency is None and rate_limit is None:
        return None, None
    found: dict[str, Any] = {}
    if concurrency is not None:
        found["limit"] = concurrency.limit
        found["strategy"] = str(concurrency.strategy)
    if rate_limit is not None:
        found["per_s"] = rate_limit.wire()["per_s"]
        found["burst"] = rate_limit.burst
    key = concurrency.key if concurrency is not None else rate_limit.key  # type: ignore[union-attr]
    return key, orjson.dumps(found).decode()


@dataclass(frozen=True, slots=True)
class KeyRow:
    key: str
    limit: int | None  # a concurrency key's
    strategy: str | None
    per_s: float | None  # a rate-limit key's
    burst: int | None
    running: int  # fired, started, no result
    waiting: int  # fired, not known started, no result
    paused_until: str | None = None  # a paused rate-limit key's: an instant, or "resume"


@dataclass(frozen=True, slots=True)
class QueueRow:
    queue: str
    running: int
    waiting: int


@dataclass(frozen=True, slots=True)
class FlowView:
    keys: list[KeyRow]
    """The top keys by runs waiting (then running, then name)."""
    keys_total: int
    """Keys with a run in flight, shown or not."""
    queues: list[QueueRow]


async def open_flow(db: aiosqlite.Connection, top: int = TOP_KEYS) -> FlowView:
    """The runs in flight by key (the ``top`` with the most waiting) and by queue."""
    started = "SUM(started_ms IS NOT NULL)"
    waiting = "SUM(started_ms IS NULL)"
    rows = await db.execute_fetchall(
        f"SELECT flow_key, MAX(flow), {started}, {waiting} FROM attempts "
        f"WHERE {_OPEN} AND flow_key IS NOT NULL GROUP BY flow_key "
        f"ORDER BY {waiting} DESC, {started} DESC, flow_key LIMIT ?",
        (top,),
    )
    [(total,)] = await db.execute_fetchall(
        f"SELECT COUNT(DISTINCT flow_key) FROM attempts WHERE {_OPEN} AND flow_key IS NOT NULL"
    )
    queues = await db.execute_fetchall(
        f"SELECT queue, {started}, {waiting} FROM attempts "
        f"WHERE {_OPEN} AND queue IS NOT NULL GROUP BY queue ORDER BY queue"
    )
    return FlowView(
        keys=[_key_row(str(key), flow, int(run), int(wait)) for key, flow, run, wait in rows],
        keys_total=int(total),
        queues=[QueueRow(str(queue), int(run), int(wait)) for queue, run, wait in queues],
    )


def _key_row(key: str, flow: str | None, running: int, waiting: int) -> KeyRow:
    limits: dict[str, Any] = {}
    if flow:
        try:
            found = orjson.loads(flow)
        except orjson.JSONDecodeError:
            found = None
        limits = found if isinstance(found, dict) else {}
    return KeyRow(
        key,
        limits.get("limit"),
        limits.get("strategy"),
        limits.get("per_s"),
        limits.get("burst"),
        running,
        waiting,
    )


def with_pauses(view: FlowView, pauses: Mapping[str, PauseState], now_ms: int) -> FlowView:
    """``view`` with each rate-limit key paused now marked with when it resumes."""
    keys = []
    for row in view.keys:
        pause = pauses.get(row.key)
        if row.per_s is not None and pause is not None and pause.holds(now_ms):
            until = "resume" if pause.until_ms is None else format_ms(pause.until_ms)
            row = replace(row, paused_until=until)
        keys.append(row)
    return replace(view, keys=keys)
