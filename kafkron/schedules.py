"""Schedules as the shards' changelog holds them, typed, and when a spec fires.

`Schedule` is one schedule (or DAG) of ``{ns}.schedules`` read to its end, as
`kafkron ls` shows it: the reading and the summary are `actors.views.schedules`'
(the records decoded by the shard's own `actors.shard.state.decode_schedule`), and
the next fires are computed from the changelog's next occurrence by the shard's own
compiled spec. `next_fires` answers "when will it run?" for a spec not sent yet, by
the same code: the spec is decoded as part of a ``schedule.upsert`` by the shard's
decoder, which compiles it exactly as a shard would.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from actors.display import carrier_target
from actors.shard.state import ScheduleState, decode_schedule
from actors.views.calendars import fires_of
from actors.views.schedules import last_outcome, latest_states
from actors.views.tail import Record
from topics.command_builders import InvalidCommand
from topics.command_fields import FieldError, instant
from topics.command_parts import Dst, Instant, Spec, instant_text
from topics.command_types import Rejection, ScheduleUpsert
from topics.commands import decode_object
from topics.concurrency import Concurrency, concurrency_of
from topics.key_templates import rendered_key_of, renders_keys
from topics.queues import DEFAULT_QUEUE
from topics.ratelimits import RateLimit, rate_limit_of
from topics.spec_compiler import CompiledSpec
from topics.timefmt import to_datetime

DEFAULT_FIRES = 5
"""How many next fires a `Schedule` carries."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """One schedule or DAG as its shard last wrote it to the changelog.

    Example::

        schedule = await client.get_schedule("invoice-nightly")
        if schedule is not None and not schedule.paused:
            print(schedule.job, "next at", schedule.next_fires[0])
    """

    id: str
    """The schedule (or DAG) id."""
    kind: str
    """``"schedule"`` or ``"dag"``."""
    definition: Mapping[str, Any]
    """The normalised definition the shard keeps (every default filled in)."""
    paused: bool
    """Whether ``schedule.pause`` holds it."""
    next_fires: tuple[datetime, ...]
    """Its next occurrences (UTC, at most `DEFAULT_FIRES`), from the changelog's next one
    on; empty once the spec is exhausted (a one-off fired)."""
    last_fired: datetime | None
    """The latest occurrence fired, None before the first."""
    last_outcome: str
    """As ``kafkron ls`` says it: ``running (attempt N)``, ``retrying (...)``,
    ``dead_lettered``, ``completed`` or ``-``."""
    in_flight: tuple[str, ...]
    """Run ids the shard has in flight (running or waiting to retry)."""
    dead_lettered: tuple[str, ...]
    """Recent dead-lettered run ids the shard remembers (for ``replay``)."""

    @property
    def spec(self) -> Mapping[str, Any]:
        """The ``spec`` object: ``{"cron", "tz"}``, ``{"every", "anchor"}`` or ``{"at"}``."""
        spec: Mapping[str, Any] = self.definition.get("spec", {})
        return spec

    @property
    def job(self) -> str | None:
        """The job name of a schedule; None for a DAG (its tasks each have one) and for
        a target (see `target`)."""
        job = self.definition.get("job")
        if not isinstance(job, Mapping) or self.target is not None:
            return None
        name: str | None = job.get("name")
        return name

    @property
    def queue(self) -> str | None:
        """The worker queue of a schedule's job runs (``"default"`` unless it names
        one); None for a DAG (each task names its own) and for a target."""
        job = self.definition.get("job")
        if self.job is None or not isinstance(job, Mapping):
            return None
        queue: str = job.get("queue") or DEFAULT_QUEUE
        return queue

    @property
    def concurrency(self) -> Concurrency | None:
        """The concurrency key of a schedule's job (docs/DESIGN.md §8.2), or None."""
        job = self.definition.get("job")
        if self.job is None or not isinstance(job, Mapping):
            return None
        return concurrency_of(job)

    @property
    def run_key(self) -> str | None:
        """The concurrency key (else the rate-limit key) as the schedule's run records
        carry it: a template's ``{schedule_id}`` and ``{args.NAME}`` rendered (`concurrency`
        and `rate_limit` keep the template); None without a key.

        Example: ``schedule.run_key`` is ``"invoice-c-42"`` for the key
        ``"invoice-{args.customer}"`` and the args ``{"customer": "c-42"}``."""
        job = self.definition.get("job")
        if self.job is None or not isinstance(job, Mapping):
            return None
        for wire in (job.get("concurrency"), job.get("rate_limit")):
            if isinstance(wire, Mapping):
                templates = renders_keys(self.definition)
                rendered = rendered_key_of(wire, self.id, job.get("args"), templates)
                return wire.get("key") if rendered is None else rendered
        return None

    @property
    def priority(self) -> int:
        """The priority of a schedule's job runs (docs/DESIGN.md §8.4): 0-9, 0 for a
        target and a DAG (each task names its own)."""
        job = self.definition.get("job")
        if self.job is None or not isinstance(job, Mapping):
            return 0
        priority: int = job.get("priority") or 0
        return priority

    @property
    def rate_limit(self) -> RateLimit | None:
        """The rate limit of a schedule's job (docs/DESIGN.md §8.5), or None."""
        job = self.definition.get("job")
        if self.job is None or not isinstance(job, Mapping):
            return None
        return rate_limit_of(job)

    @property
    def target(self) -> Mapping[str, Any] | None:
        """A target schedule's target, ``{"kafka": {...}}`` or ``{"http": {...}}`` with
        its normalised fields (as `kafkron.KafkaTarget` and `kafkron.HttpTarget` write
        them); None for a job or a DAG."""
        job = self.definition.get("job")
        if not isinstance(job, Mapping):
            return None
        return carrier_target(job.get("name"), job.get("args"))

    @property
    def next_fire(self) -> datetime | None:
        """The next occurrence, None once exhausted."""
        return self.next_fires[0] if self.next_fires else None


def _fires(compiled: CompiledSpec, first_ms: int | None, n: int) -> tuple[datetime, ...]:
    found: list[datetime] = []
    at_ms = first_ms
    while at_ms is not None and len(found) < n:
        found.append(to_datetime(at_ms))
        at_ms = compiled.next_after(at_ms)
    return tuple(found)


def schedule_of(state: ScheduleState, fires: int = DEFAULT_FIRES) -> Schedule:
    """The `Schedule` of a decoded changelog state.

    Example: ``schedule_of(decode_schedule(value))``.
    """
    definition = orjson.loads(state.def_bytes)
    return Schedule(
        id=state.id,
        kind="dag" if state.dag is not None or "tasks" in definition else "schedule",
        definition=definition,
        paused=state.paused,
        next_fires=tuple(to_datetime(at_ms) for at_ms in fires_of(state, fires)),
        last_fired=None if state.last_fired_ms is None else to_datetime(state.last_fired_ms),
        last_outcome=last_outcome(state),
        in_flight=tuple(run.run_id for run in state.runs.values()),
        dead_lettered=tuple(state.dead_or_none or ()),
    )


def schedules_of(records: list[Record], fires: int = DEFAULT_FIRES) -> dict[str, Schedule]:
    """Every readable schedule of the changelog's records, by id (the latest record per
    id, as `kafkron ls` reads them; a record this version cannot read is left out).

    Example: ``schedules_of(await read_to_end(settings, settings.topic(TopicKind.SCHEDULES)))``.
    """
    found: dict[str, Schedule] = {}
    for key, value in sorted(latest_states(records).items()):
        try:
            found[key] = schedule_of(decode_schedule(value), fires)
        except (ValueError, KeyError, TypeError):
            continue  # `kafkron ls` reports it; a typed listing has no row for it
    return found


def next_fires(
    spec: Spec,
    n: int = DEFAULT_FIRES,
    *,
    after: Instant | None = None,
    schedule_id: str = "next-fires",
    dst: Dst | None = None,
    spread_s: int | None = None,
    start: Instant | None = None,
    end: Instant | None = None,
) -> list[datetime]:
    """The next ``n`` fires of ``spec`` strictly after ``after`` (default now), in UTC,
    by the schedulers' own code; fewer once the spec is exhausted.

    ``schedule_id`` matters only to Jenkins ``H`` fields and a spread window (both a
    stable offset per id): pass the id the schedule will have. A spec the shard would
    reject raises `InvalidCommand` naming the field.

    Example::

        next_fires(Cron("30 2 * * *", tz="America/New_York"), 3,
                   after=datetime(2026, 3, 7, tzinfo=timezone.utc))
    """
    body: dict[str, Any] = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": spec.json(),
        "job": {"name": "next-fires"},
    }
    if dst is not None:
        body["dst"] = dst.json()
    if spread_s is not None:
        body["spread"] = {"window_s": spread_s}
    try:
        if start is not None:
            body["start"] = instant_text(start, "start")
        if end is not None:
            body["end"] = instant_text(end, "end")
        after_ms = (
            time.time_ns() // 1_000_000
            if after is None
            else instant(instant_text(after, "after"), "after")
        )
    except FieldError as error:
        raise InvalidCommand(str(error)) from None
    decoded = decode_object(body, now_ms=None)  # a spec's fires do not depend on now
    if not isinstance(decoded, ScheduleUpsert):
        raise InvalidCommand(decoded.reason if isinstance(decoded, Rejection) else "spec: invalid")
    return list(_fires(decoded.compiled, decoded.compiled.next_after(after_ms), n))
