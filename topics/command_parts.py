"""The typed parts of a command a program writes: specs, policies and DAG tasks.

`topics.command_builders` assembles them into commands; `kafkron` re-exports both,
so a program writes ``Cron("0 0 * * *", tz="Europe/London")`` or
``Retry(max_attempts=3)`` and a type checker sees every field. Each part holds only
what its author gave: a field left ``None`` is left out of the command, and the shard
applies the default documented in `topics.command_types` (as ``null`` would). No part
validates anything itself: the command they make is validated whole by the shard's
own decoder (`topics.commands.decode_command`), so there is one set of rules.

Instants are aware `datetime`s or RFC 3339 text; durations are `timedelta`s (whole
seconds) or the wire's text (``"90s"``, ``"1h30m"``).
"""

from __future__ import annotations

from base64 import b64encode
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from topics.command_fields import FieldError
from topics.concurrency import Concurrency
from topics.job_fields import optional_job_fields
from topics.ratelimits import RateLimit
from topics.timefmt import format_ms
from topics.vocabulary import DstFold, DstGap, JitterMode, MisfireMode, OverlapPolicy

OverlapName = OverlapPolicy | Literal["allow", "skip", "buffer_one", "buffer_all", "cancel_other"]
"""``overlap``: a `topics.vocabulary.OverlapPolicy` or its wire string."""
MisfireName = MisfireMode | Literal["run_once", "catch_up", "skip"]
"""``misfire.policy``: a `topics.vocabulary.MisfireMode` or its wire string."""
JitterName = JitterMode | Literal["full", "none"]
"""``retry.jitter``: a `topics.vocabulary.JitterMode` or its wire string."""
DstGapName = DstGap | Literal["shift", "skip"]
"""``dst.gap``: a `topics.vocabulary.DstGap` or its wire string."""
DstFoldName = DstFold | Literal["once", "twice"]
"""``dst.fold``: a `topics.vocabulary.DstFold` or its wire string."""
Instant = datetime | str
"""An aware `datetime`, or RFC 3339 text such as ``"2026-12-04T14:05:00Z"``."""
Duration = timedelta | str
"""A `timedelta` of whole seconds, or the wire's text such as ``"90s"`` or ``"1h30m"``."""


def instant_text(value: Instant, path: str) -> str:
    """``value`` as the wire writes an instant; a naive `datetime` is refused, naming
    ``path``, since it names no instant. Text is passed on for the decoder to judge.

    Example: ``instant_text(datetime(2026, 12, 4, 14, 5, tzinfo=UTC), "spec.at")``
    is ``"2026-12-04T14:05:00.000Z"``.
    """
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise FieldError(
                f"{path}: the datetime {value.isoformat()} has no time zone, so it names no "
                "instant; give an aware datetime, such as datetime(..., tzinfo=timezone.utc)"
            )
        return format_ms(round(value.timestamp() * 1000))
    return value


def duration_text(value: Duration, path: str) -> str:
    """``value`` as the wire writes a duration (``timedelta(minutes=90)`` is ``"5400s"``);
    a `timedelta` that is not whole seconds is refused, naming ``path``.

    Example: ``duration_text(timedelta(seconds=90), "spec.every")`` is ``"90s"``.
    """
    if isinstance(value, timedelta):
        seconds, rest = divmod(value, timedelta(seconds=1))
        if rest:
            raise FieldError(
                f"{path}: {value} is not a whole number of seconds; intervals are counted "
                "in seconds (the shortest is 1s)"
            )
        return f"{seconds}s"
    return value


def _pick(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


@dataclass(frozen=True, slots=True)
class Cron:
    """``{"cron": expr, "tz": zone}``: fire at the wall times ``expr`` matches in ``tz``.

    Five fields (or six, seconds first), names, ``L``, ``@daily`` and Jenkins' ``H``
    (a stable per-id spread). ``tz`` is an IANA zone, UTC when None.

    Example: ``Cron("0 0 * * *", tz="Europe/London")`` fires at every London midnight.
    """

    expr: str
    """The cron expression, as ``kafkron next`` takes it."""
    tz: str | None = None
    """IANA time zone of the wall times; None for UTC."""

    def json(self) -> dict[str, Any]:
        """The ``spec`` object: ``{"cron": "0 0 * * *", "tz": "Europe/London"}``."""
        return _pick(cron=self.expr, tz=self.tz)


@dataclass(frozen=True, slots=True)
class Every:
    """``{"every": interval, "anchor": instant}``: fire every ``interval`` from ``anchor``.

    Occurrences are ``anchor + k * interval`` (the epoch when no anchor is given), so
    they do not drift and every shard computes the same ones.

    Example: ``Every(timedelta(minutes=5))`` or ``Every("5m", anchor="2026-01-01T00:02:00Z")``.
    """

    interval: Duration
    """How often: a `timedelta` of whole seconds or text such as ``"90s"``."""
    anchor: Instant | None = None
    """The instant occurrences count from; None for the epoch."""

    def json(self) -> dict[str, Any]:
        """The ``spec`` object: ``{"every": "300s"}``."""
        return _pick(
            every=duration_text(self.interval, "spec.every"),
            anchor=None if self.anchor is None else instant_text(self.anchor, "spec.anchor"),
        )


@dataclass(frozen=True, slots=True)
class At:
    """``{"at": instant}``: fire once, at ``instant`` (a one-off schedule).

    The instant may be no older than ``misfire.grace_s`` (300 s by default) and at
    most ten years ahead.

    Example: ``At(datetime.now(timezone.utc) + timedelta(seconds=30))``.
    """

    instant: Instant
    """When to fire: an aware `datetime` or RFC 3339 text."""

    def json(self) -> dict[str, Any]:
        """The ``spec`` object: ``{"at": "2026-12-04T14:05:00.000Z"}``."""
        return {"at": instant_text(self.instant, "spec.at")}


@dataclass(frozen=True, slots=True)
class RRule:
    """``{"rrule": rule, "dtstart": local_time, "tz": zone}``: an RFC 5545 recurrence.

    ``rule`` is one RRULE line (``FREQ=...;...``), expanded in the local wall time of
    ``tz`` from ``dtstart`` (a local time without offset, as RFC 5545's DTSTART with a
    TZID); the cron DST rule applies (docs/DESIGN.md §5.6).

    Example: ``RRule("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
    dtstart="2026-01-01T18:00:00", tz="Europe/London")``: 18:00 on the last weekday.
    """

    rule: str
    """The RRULE, e.g. ``"FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9;BYMINUTE=0"``."""
    dtstart: str
    """The local start, ``YYYY-MM-DDTHH:MM:SS`` (no offset): times of day default to it."""
    tz: str | None = None
    """IANA time zone of the wall times; None for UTC."""

    def json(self) -> dict[str, Any]:
        """The ``spec`` object."""
        return _pick(rrule=self.rule, dtstart=self.dtstart, tz=self.tz)


@dataclass(frozen=True, slots=True)
class BusinessDay:
    """``{"business_day": nth, "time": "HH:MM", "tz": zone}``: at ``time`` on the
    ``nth`` business day of every month (-1 the last), a business day being a Monday
    to Friday that the spec's exclusions leave (inside `AnyOf`).

    Example: ``AnyOf([BusinessDay(-1, "18:00")], exclude=[uk_holidays], tz="Europe/London")``.
    """

    nth: int
    """1 to 23 from the start of the month, -1 to -23 from its end."""
    time: str
    """Local time of day, ``"HH:MM"`` or ``"HH:MM:SS"``."""
    tz: str | None = None
    """IANA time zone; inside `AnyOf`, None takes the AnyOf's."""

    def json(self) -> dict[str, Any]:
        """The ``spec`` object."""
        return _pick(business_day=self.nth, time=self.time, tz=self.tz)


@dataclass(frozen=True, slots=True)
class Days:
    """A calendar's days, for ``AnyOf(exclude=[...])``: dates, inclusive date ranges
    and weekdays, each a whole local day of ``tz``.

    Example: ``Days(tz="Europe/London", dates=["2026-12-25"], weekdays=["SAT", "SUN"])``.
    """

    tz: str | None = None
    """IANA zone whose days these are; None for UTC."""
    dates: tuple[str, ...] = ()
    """``YYYY-MM-DD`` dates."""
    ranges: tuple[tuple[str, str], ...] = ()
    """``(first, last)`` date pairs, both included."""
    weekdays: tuple[str, ...] = ()
    """``MON`` ... ``SUN``."""

    def json(self) -> dict[str, Any]:
        """The ``{"calendar": {...}}`` exclusion."""
        days = _pick(
            tz=self.tz,
            dates=list(self.dates) or None,
            ranges=[list(r) for r in self.ranges] or None,
            weekdays=list(self.weekdays) or None,
        )
        return {"calendar": days}


@dataclass(frozen=True, slots=True)
class SpecJson:
    """A spec given as its JSON object, as the topics contract writes it
    (docs/DESIGN.md §2.2): for what the typed parts do not say, or a spec read back.

    Example: ``SpecJson({"any": [{"cron": "0 9 * * *"}], "exclude": [{"cron": "0 0 * * SUN"}]})``.
    """

    value: Mapping[str, Any]
    """The ``spec`` object (judged by the shard's own decoder when the command is built)."""

    def json(self) -> dict[str, Any]:
        """A copy of the object."""
        return dict(self.value)


Single = Cron | Every | At | RRule | BusinessDay | SpecJson


@dataclass(frozen=True, slots=True)
class AnyOf:
    """``{"any": [...], "exclude": [...], "adjust": ..., "tz": zone}``: several specs
    merged (an instant fired by two fires once), minus the days of ``exclude``
    (`Days` calendars, calendar names (a ``str``, DESIGN §5.7), or specs: the days
    they fire on), a fixed-time fire on an excluded day moved by ``adjust`` (``skip``,
    ``next_business_day``, ``previous_business_day``, ``modified_following``). §5.6.

    Example: ``AnyOf([Cron("0 6 * * *")], exclude=[Days(weekdays=("SAT", "SUN"))],
    adjust="next_business_day", tz="Europe/London")``.
    """

    specs: Sequence[Single]
    """The specs whose fires are merged."""
    exclude: Sequence[Days | Single | str] = ()
    """Calendars, calendar names and specs whose days are taken away."""
    adjust: str | None = None
    """What becomes of a fixed-time fire on an excluded day; None is ``skip``."""
    tz: str | None = None
    """Zone of the days and of members without one; None: the first member's zone."""

    def json(self) -> dict[str, Any]:
        """The ``spec`` object."""
        return _pick(
            any=[s.json() for s in self.specs],
            exclude=[e if isinstance(e, str) else e.json() for e in self.exclude] or None,
            adjust=self.adjust,
            tz=self.tz,
        )


Spec = Cron | Every | At | RRule | BusinessDay | AnyOf | SpecJson
"""When a schedule or a DAG fires: `Cron`, `Every`, `At`, `RRule`, `BusinessDay`,
`AnyOf` (several, minus excluded days) or `SpecJson` (the object itself)."""


@dataclass(frozen=True, slots=True)
class Misfire:
    """``misfire``: what to do with occurrences that came due while no shard owned the
    schedule (default ``run_once`` with a grace of 300 s).

    Example: ``Misfire("catch_up", grace_s=3600, catch_up_max=24)``.
    """

    policy: MisfireName | None = None
    """``run_once``, ``catch_up`` or ``skip`` (`topics.command_types.MISFIRE_POLICIES`)."""
    grace_s: int | None = None
    """How late an occurrence may still fire, in seconds."""
    catch_up_max: int | None = None
    """``catch_up`` fires at most this many missed occurrences."""

    def json(self) -> dict[str, Any]:
        """The ``misfire`` object, with only the fields given."""
        return _pick(policy=self.policy, grace_s=self.grace_s, catch_up_max=self.catch_up_max)


@dataclass(frozen=True, slots=True)
class Retry:
    """``retry``: how a failed or timed-out attempt is retried (default 5 attempts,
    1 s, ×2, capped at 100 s, full jitter); a run out of attempts is dead-lettered.

    Example: ``Retry(max_attempts=3, initial_s=2, non_retryable=["AccountDeleted"])``.
    """

    max_attempts: int | None = None
    """Attempts in total, the first included; 1 means never retry."""
    initial_s: float | None = None
    """Wait before the second attempt, in seconds."""
    coefficient: float | None = None
    """Growth of the wait from one retry to the next (>= 1)."""
    max_interval_s: float | None = None
    """Cap of the wait between attempts, in seconds."""
    jitter: JitterName | None = None
    """``full`` (uniform in [0, wait]) or ``none``."""
    non_retryable: Sequence[str] | None = None
    """Error types (a result's ``error.type``) that go straight to the dead letters."""

    def json(self) -> dict[str, Any]:
        """The ``retry`` object, with only the fields given."""
        return _pick(
            max_attempts=self.max_attempts,
            initial_s=self.initial_s,
            coefficient=self.coefficient,
            max_interval_s=self.max_interval_s,
            jitter=self.jitter,
            non_retryable=None if self.non_retryable is None else list(self.non_retryable),
        )


@dataclass(frozen=True, slots=True)
class KafkaTarget:
    """``target.kafka``: the shard writes a record to ``topic`` in the fire's own
    transaction, exactly once per occurrence, with no worker (`topics.targets`).

    ``value`` is any JSON (written as its JSON bytes), or ``raw`` bytes instead;
    ``key`` text or None. Strings may hold placeholders such as ``{scheduled_at}``
    (``{{`` for a literal brace). The topic must be allowed (``--target-topic``).

    Example: ``KafkaTarget("orders.due", key="{schedule_id}", value={"order": "o-1"})``.
    """

    topic: str
    """The target topic, one the schedulers allow."""
    key: str | None = None
    """The record's key (text, placeholders rendered); None: keyless."""
    value: Any = None
    """Any JSON value; strings in it may hold placeholders."""
    raw: bytes | None = None
    """Raw bytes for the value instead of JSON (never rendered)."""
    headers: Mapping[str, str] | None = None
    """Extra headers (kafkron adds the run id, scheduled instant, attempt and key)."""

    def json(self) -> dict[str, Any]:
        """The ``target`` object."""
        value = self.value if self.raw is None else {"base64": b64encode(self.raw).decode()}
        kafka = {"topic": self.topic, "key": self.key, "value": value}
        if self.headers:
            kafka["headers"] = dict(self.headers)
        return {"kafka": kafka}


@dataclass(frozen=True, slots=True)
class HttpTarget:
    """``target.http``: a worker calls ``url`` for each attempt, with the run's
    ``Idempotency-Key``; 2xx succeeds, 408/429/5xx and network errors are retried by
    the schedule's retry policy, other 4xx fail for good.

    Example: ``HttpTarget("https://billing.example/charge", body={"run": "{run_id}"},
    headers={"Authorization": {"secret": "billing-api"}})``.
    """

    url: str
    """An http:// or https:// URL; placeholders rendered."""
    method: str | None = None
    """GET, POST (the default), PUT, PATCH or DELETE."""
    headers: Mapping[str, Any] | None = None
    """Header values: text, or ``{"secret": NAME}`` resolved by the worker."""
    body: Any = None
    """Any JSON value, sent as JSON; strings may hold placeholders."""
    timeout_s: int | None = None
    """One request's limit in seconds (default 10)."""

    def json(self) -> dict[str, Any]:
        """The ``target`` object, with only the fields given."""
        http = {"url": self.url} | _pick(
            method=self.method,
            headers=None if self.headers is None else dict(self.headers),
            body=self.body,
            timeout_s=self.timeout_s,
        )
        return {"http": http}


@dataclass(frozen=True, slots=True)
class Dst:
    """``dst``: what a fixed-time cron does at daylight saving changes (default
    ``shift`` and ``once``, cronie's rule; docs/DESIGN.md §5.3).

    Example: ``Dst(gap="skip", fold="twice")``.
    """

    gap: DstGapName | None = None
    """A wall time the clocks skip: fire just after it (``shift``) or not (``skip``)."""
    fold: DstFoldName | None = None
    """A wall time the clocks pass twice: fire on the first pass (``once``) or both."""

    def json(self) -> dict[str, Any]:
        """The ``dst`` object, with only the fields given."""
        return _pick(gap=self.gap, fold=self.fold)


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a DAG: a job, the tasks it runs after, its own retry and timeout
    (the DAG's when None).

    Example::

        tasks = {
            "extract": Task("etl.extract"),
            "load": Task("etl.load", args={"table": "sales"}, after=["extract"]),
        }
    """

    job: str | None = None
    """The registered job name (``@job("etl.extract")``); or give ``target``."""
    args: Mapping[str, Any] | None = None
    """The job's keyword arguments, any JSON object."""
    target: HttpTarget | None = None
    """An HTTP call instead of a job (a DAG task's target is http only)."""
    after: Sequence[str] = field(default=())
    """Names of the tasks that must succeed first; empty for a root."""
    retry: Retry | None = None
    """The task's own retry policy; the DAG's when None."""
    timeout_s: int | None = None
    """The task's own attempt timeout in seconds; the DAG's when None."""
    queue: str | None = None  # its runs' worker queue (`topics.queues`); None: the default
    concurrency: Concurrency | None = None  # its concurrency key (`topics.concurrency`)
    priority: int | None = None  # 0-9, higher first (`topics.priority`); 0 when None
    rate_limit: RateLimit | None = None  # its rate limit (`topics.ratelimits`)

    def json(self) -> dict[str, Any]:
        """The task's object in ``tasks``."""
        job = None
        if self.job is not None or self.target is None:  # neither: the shard names it
            parts = (self.queue, self.concurrency, self.priority, self.rate_limit)
            job = {"name": self.job, "args": dict(self.args or {}), **optional_job_fields(*parts)}
        return _pick(
            job=job,
            target=None if self.target is None else self.target.json(),
            after=list(self.after) or None,
            retry=None if self.retry is None else self.retry.json(),
            timeout_s=self.timeout_s,
        )
