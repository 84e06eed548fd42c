"""What the console's pages show, read from the changelog and the history database.

The console keeps no state of its own: schedules and DAG runs come from the
compacted ``{ns}.schedules`` changelog (decoded by the shard's own decoder, as
`kafkron ls` does), runs, attempts, dead letters and rejections from the
recorder's history database. A changelog read is cached for `CHANGELOG_TTL_S`,
so a page that links to several schedules reads the topic once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson

from actors.history.flow_keys import TOP_KEYS, FlowView, with_pauses
from actors.history.store import AttemptView, HistoryError, HistoryStore
from actors.shard.state import ScheduleState, decode_schedule
from actors.timespec import UnknownCalendar, compile_spec
from actors.views.calendars import fires_of, read_calendars
from actors.views.queues import QueueState, queue_states
from actors.views.ratelimits import rate_waiting_note, read_pauses
from actors.views.schedule_status import status_text
from actors.views.schedules import (
    last_outcome,
    latest_states,
    shown_job,
    spec_text,
    spec_zone,
    waiting_note,
)
from actors.views.tail import read_to_end
from topics.calendar_days import CalendarDays, calendar_names, parse_calendar_days
from topics.messages import Result
from topics.names import Settings, TopicKind
from topics.queues import DEFAULT_QUEUE
from topics.ratelimits import PauseState
from topics.timefmt import format_ms
from topics.vocabulary import DstFold, DstGap, RunStatus

log = logging.getLogger("kafkron.web")

# Spec kinds whose wall times are in a zone ("When will it run?" takes one).
_ZONED = ("cron", "rrule", "business_day", "any")

CHANGELOG_TTL_S = 1.0
NEXT_FIRES = 3


@dataclass(frozen=True, slots=True)
class Fire:
    utc: str
    local: str | None
    """Local wall time with its zone abbreviation, for zoned (cron) specs."""


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    id: str
    spec: str
    zone: str
    job: str
    paused: bool
    next_fires: list[Fire]
    last_outcome: str
    is_dag: bool
    dead: list[str]
    error: str | None = None
    state: str = "-"
    """The schedule's own state (`actors.views.schedule_status`): ``active (runs 1/3)``,
    ``paused until ... by ops: db migration``, ``completed (max_runs 3/3)`` ..."""


class Changelog:
    """The latest state of every schedule, read from the changelog at most once a second."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._states: dict[str, bytes] = {}
        self._read_at = -CHANGELOG_TTL_S
        self._lock = asyncio.Lock()

    async def states(self) -> dict[str, bytes]:
        async with self._lock:
            if time.monotonic() - self._read_at >= CHANGELOG_TTL_S:
                topic = self._settings.topic(TopicKind.SCHEDULES)
                self._states = latest_states(await read_to_end(self._settings, topic))
                self._read_at = time.monotonic()
            return self._states

    async def state(self, schedule_id: str) -> ScheduleState | None:
        value = (await self.states()).get(schedule_id)
        return None if value is None else decode_schedule(value)

    def forget(self) -> None:
        """The next read goes to the topic (after an action changed something)."""
        self._read_at = -CHANGELOG_TTL_S


def next_fires(state: ScheduleState, count: int = NEXT_FIRES) -> list[Fire]:
    """The next ``count`` fires of a schedule by the shard's own compiled spec."""
    zone_name = _zone_of(orjson.loads(state.def_bytes).get("spec", {}))
    zone = ZoneInfo(zone_name) if zone_name != "UTC" else None
    return [_fire(at_ms, zone) for at_ms in fires_of(state, count)]


def _fire(at_ms: int, zone: ZoneInfo | None) -> Fire:
    local = None
    if zone is not None:
        wall = datetime.fromtimestamp(at_ms / 1000, zone)
        local = f"{wall.strftime('%Y-%m-%d %H:%M:%S')} {wall.tzname()}"
    return Fire(utc=format_ms(at_ms), local=local)


def _zone_of(spec: Mapping[str, Any]) -> str:
    return spec_zone(dict(spec)) or "UTC"


def row_of(
    state: ScheduleState,
    unserved: Collection[str] = (),
    pauses: Mapping[str, PauseState] | None = None,
) -> ScheduleRow:
    """``unserved``: queues no worker serves now (their runs only wait); ``pauses``: the
    paused rate-limit keys (their runs wait on their workers, docs/DESIGN.md §8.5)."""
    now_ms = time.time_ns() // 1_000_000
    definition = orjson.loads(state.def_bytes)
    spec = definition.get("spec", {})
    job = "DAG" if state.dag is not None else shown_job(definition, state.id)
    return ScheduleRow(
        id=state.id,
        spec=spec_text(spec),
        zone=_zone_of(spec),
        job=job,
        paused=state.paused,
        next_fires=[] if state.paused else next_fires(state),
        last_outcome=waiting_note(state, unserved)
        or rate_waiting_note(state, pauses or {}, now_ms)
        or last_outcome(state),
        is_dag=state.dag is not None,
        dead=list(state.dead_or_none or ()),
        state=status_text(state),
    )


def schedule_row(
    key: str,
    value: bytes,
    unserved: Collection[str] = (),
    pauses: Mapping[str, PauseState] | None = None,
) -> ScheduleRow:
    """The row of a changelog record; an unreadable record is a row saying so."""
    try:
        return row_of(decode_schedule(value), unserved, pauses)
    except (ValueError, KeyError, TypeError) as exc:
        return ScheduleRow(
            id=key, spec="-", zone="-", job="-", paused=False, next_fires=[],
            last_outcome="-", is_dag=False, dead=[],
            error=f"unreadable changelog record ({exc})",
        )  # fmt: skip


async def schedule_rows(
    changelog: Changelog,
    unserved: Collection[str] = (),
    pauses: Mapping[str, PauseState] | None = None,
) -> list[ScheduleRow]:
    states = sorted((await changelog.states()).items())
    return [schedule_row(k, v, unserved, pauses) for k, v in states]


async def rate_pauses(settings: Settings) -> dict[str, PauseState]:
    """The paused rate-limit keys (`actors.views.ratelimits`); none when the broker
    will not say (the page still shows the schedules)."""
    try:
        return await read_pauses(settings)
    except Exception as exc:  # ACLs, no {ns}.ratelimits yet
        log.debug("rate-limit pauses not read: %s", exc)
        return {}


async def worker_queues(settings: Settings) -> list[QueueState]:
    """The namespace's worker queues (`actors.views.queues`); none when there are no
    queues but the default one, or when the broker will not say (the page still shows
    the schedules)."""
    try:
        queues = await queue_states(settings)
    except Exception as exc:  # ACLs, a slow broker
        log.debug("queues not read: %s", exc)
        return []
    return queues if any(q.queue != DEFAULT_QUEUE for q in queues) else []


async def flow_view(
    history: History, settings: Settings, top: int = TOP_KEYS
) -> tuple[FlowView | None, str | None]:
    """The keys page's figures: the runs in flight by key (the ``top`` with the most
    waiting) and by queue, from the history; paused rate-limit keys marked from
    ``{ns}.ratelimits``. (None, why) without a history database."""
    try:
        store = await history.open()
    except HistoryError as exc:
        return None, str(exc)
    async with store:
        view = await store.open_flow(top)
    pauses = await rate_pauses(settings) if any(k.per_s is not None for k in view.keys) else {}
    return with_pauses(view, pauses, time.time_ns() // 1_000_000), None


class History:
    """The recorder's database, opened read-only for each page (SQLite opens in microseconds)."""

    def __init__(self, path: Path, namespace: str) -> None:
        self.path = path
        self._namespace = namespace

    async def open(self) -> HistoryStore:
        """The store; `HistoryError` (with what to do) if there is none yet."""
        if not self.path.exists():
            raise HistoryError(
                f"no history database at {self.path} yet: run `kafkron recorder --db"
                f" {self.path}` (the demo runs one), or start the console with --db"
            )
        return await HistoryStore.open(self.path, namespace=self._namespace, readonly=True)


def dst_rule(spec: Mapping[str, Any], dst: Mapping[str, Any] | None) -> str:
    """The daylight-saving rule that applies to ``spec``, in a sentence (cronie's rule)."""
    if any(k in spec for k in ("rrule", "business_day", "any")):
        return (
            f"Wall times of {_zone_of(spec)}: an RRULE of FREQ DAILY or coarser, a business"
            " day and a fixed-time cron fire once on a DST day (a time in the spring gap at"
            " its end, a repeated time once, unless dst says otherwise); an hourly or finer"
            " rule and a wildcard cron at every real instant. Excluded days never fire;"
            " adjust moves a fixed-time fire to the nearest allowed day."
        )
    if "cron" not in spec:
        return (
            "Not a cron: intervals and instants are UTC instants, so daylight saving"
            " never moves, skips or repeats them."
        )
    zone = _zone_of(spec)
    if zone == "UTC":
        return "A cron in UTC: UTC has no daylight saving, every matching minute fires once."
    fields = str(spec["cron"]).split()
    if fields and fields[0].startswith("@"):
        wildcard = fields[0].lower() == "@hourly"  # "0 * * * *"; the others name an hour
    else:
        minute_hour = fields[:2] if len(fields) == 5 else fields[1:3]
        wildcard = any(f.startswith("*") for f in minute_hour)
    if wildcard:
        return (
            f"Its minute or hour field starts with *, so in {zone} it fires at every real"
            " instant whose local wall time matches: an hour skipped in spring never fires,"
            " an hour repeated in autumn fires twice."
        )
    gap = (dst or {}).get("gap") or DstGap.SHIFT
    fold = (dst or {}).get("fold") or DstFold.ONCE
    gap_text = (
        "fires at the first instant after the gap"
        if gap == DstGap.SHIFT
        else "does not fire that day"
    )
    fold_text = (
        "fires once, at its first occurrence"
        if fold == DstFold.ONCE
        else "fires twice, once in each occurrence"
    )
    return (
        f"A fixed-time cron in {zone}: a wall time that falls in the spring-forward gap"
        f" {gap_text} (dst.gap: {gap}); a wall time repeated in autumn {fold_text}"
        f" (dst.fold: {fold})."
    )


async def calendars_named_by(spec_text_in: str, settings: Settings) -> dict[str, CalendarDays]:
    """The namespace's calendars when the spec names any (read from ``{ns}.calendars``,
    so the fires shown are the shard's, docs/DESIGN.md §5.7); else none are read."""
    from actors.views.spec_arg import parse_spec_text

    spec, _ = parse_spec_text(spec_text_in)
    if not calendar_names(spec):
        return {}
    found = await read_calendars(settings)
    return {name: parse_calendar_days(days, f"calendar {name!r}") for name, days in found.items()}


def when_will_it_run(
    spec_text_in: str,
    tz: str | None,
    count: int,
    now_ms: int,
    calendars: Mapping[str, CalendarDays] | None = None,
) -> tuple[list[Fire], str]:
    """The `kafkron next` answer: ``count`` fires after now, and the DST rule; `ValueError`.
    ``calendars``: the named calendars the spec may exclude (`calendars_named_by`)."""
    from actors.views.spec_arg import parse_spec_text

    spec, command = parse_spec_text(spec_text_in)
    if tz and any(k in spec for k in _ZONED):
        spec["tz"] = tz
    try:
        compiled = compile_spec(
            spec,
            schedule_id=str(command.get("id", "")),
            dst=command.get("dst"),
            calendars=calendars or {},
        )
    except UnknownCalendar as missing:
        raise ValueError(
            f"spec.exclude: there is no calendar {missing.name!r} in the namespace"
            " (a schedule naming it waits for it)"
        ) from None
    zone_name = tz or _zone_of(spec)
    zone = None if zone_name == "UTC" else ZoneInfo(zone_name)
    fires: list[Fire] = []
    at_ms: int | None = compiled.next_after(now_ms)
    while at_ms is not None and len(fires) < count:
        fires.append(_fire(at_ms, zone))
        at_ms = compiled.next_after(at_ms)
    return fires, dst_rule(spec, command.get("dst"))


__all__ = [
    "Changelog",
    "Fire",
    "History",
    "HistoryError",
    "ScheduleRow",
    "dst_rule",
    "next_fires",
    "schedule_rows",
    "when_will_it_run",
]


def dag_run_result(attempts: list[AttemptView], attempt: int) -> Result | None:
    """The run-level result of a DAG run (``task`` null, with counts) among the
    ``attempts`` the recorder holds for its run id, if its ``attempt`` (the run's
    ``ends``: a run cleared and ended again has a newer one) has arrived."""
    for a in attempts:
        if a.task is None and a.attempt == attempt and a.counts is not None:
            error = None
            if a.error_type is not None:
                error = {"type": a.error_type, "message": a.error_message or ""}
            return Result(
                run_id=a.run_id,
                schedule_id=a.schedule_id,
                task=None,
                attempt=a.attempt,
                status=RunStatus(a.status),
                scheduled_ms=a.scheduled_ms or 0,
                started_ms=a.started_ms,
                finished_ms=a.finished_ms,
                worker=a.worker or "",
                error=error,
                counts=orjson.loads(a.counts),
            )
    return None
