"""Faust ``Record`` models of the six records kafkron writes: run, result, dead letter,
rejection, deadline alert and named calendar.

Each model mirrors the JSON of its topic field for field, as `topics.messages`
builds it: the same names, instants kept as the RFC 3339 text on the wire (with a
``*_ms`` property each, so re-encoding never changes a byte's meaning), ``"v"``
included. They are decoded through `actors.faust.serializers`, which first runs the
codec's own strict parser (``"v"`` must be 1, every field its type) and then keeps
only the fields the model knows, so a record written by a newer kafkron with more
fields still reads. tests/faust/test_faust_records.py builds every variant of every
record with the codec's builders and checks that the models hold exactly those
fields and write them back unchanged: the models cannot drift from the codec
without that test failing.

``include_metadata=False``: Faust would otherwise add a ``__faust`` key naming the
Python class to everything it writes, which is not part of the topics' contract.
"""

from __future__ import annotations

import base64
from typing import Any

import faust

from topics.timefmt import parse_instant


class ConcurrencyRecord(faust.Record, include_metadata=False):
    """``{"key", "limit", "strategy"}``: a job's concurrency key (docs/DESIGN.md §8.2).
    In a run record the key is literal, rendered by the shard; in a command it may name
    ``{schedule_id}`` and ``{args.NAME}`` (`topics.key_templates`)."""

    key: str
    limit: int
    strategy: str


class RateLimitRecord(faust.Record, include_metadata=False):
    """``{"key", "per_s", "burst"}``: a job's rate limit (docs/DESIGN.md §8.5); ``per_s``
    is written as an integer when whole. Its key, as the concurrency key's, is rendered
    in a run record and may be a template in a command."""

    key: str
    per_s: float
    burst: int


class JobRecord(faust.Record, include_metadata=False):
    """``{"name", "args", "queue"?, "concurrency"?, "priority"?, "rate_limit"?}``: the
    registered job, its keyword arguments, its worker queue (None, left out on the wire:
    the default queue), its concurrency key (None: none), its priority (None: 0) and its
    rate limit (None: none)."""

    name: str
    args: dict[str, Any]
    queue: str | None = None
    concurrency: ConcurrencyRecord | None = None
    priority: int | None = None
    """0-9, higher first (docs/DESIGN.md §8.4); None, left out on the wire: 0."""
    rate_limit: RateLimitRecord | None = None


class ErrorRecord(faust.Record, include_metadata=False):
    """``{"type", "message"}`` of a failed attempt (the exception's type name and text)."""

    type: str
    message: str


class IntervalRecord(faust.Record, include_metadata=False):
    """``{"start", "end"}`` of the data a DAG run covers (Airflow's data interval)."""

    start: str
    end: str


class RunRecord(faust.Record, include_metadata=False):
    """One attempt of one occurrence, as ``{ns}.runs`` carries it."""

    v: int
    run_id: str
    schedule_id: str
    scheduled_at: str
    fired_at: str
    attempt: int
    job: JobRecord
    idempotency_key: str
    deadline: str
    task: str | None = None
    logical_date: str | None = None
    data_interval: IntervalRecord | None = None
    report_start: bool | None = None
    """True under a start deadline (a schedule's, or a DAG's for each task run): the
    worker reports the start."""

    @property
    def scheduled_ms(self) -> int:
        return parse_instant(self.scheduled_at)

    @property
    def fired_ms(self) -> int:
        return parse_instant(self.fired_at)

    @property
    def deadline_ms(self) -> int:
        return parse_instant(self.deadline)


class ResultRecord(faust.Record, include_metadata=False):
    """The outcome of one attempt, as ``{ns}.results`` carries it."""

    v: int
    run_id: str
    schedule_id: str
    attempt: int
    status: str
    """One of `topics.messages.STATUSES`."""
    scheduled_at: str
    started_at: str | None
    """None when the attempt never started (missed, skipped, upstream_failed)."""
    finished_at: str | None
    worker: str
    """A worker's id, or ``shard-{p}`` for the results the shard decides."""
    task: str | None = None
    error: ErrorRecord | None = None
    counts: dict[str, int] | None = None
    """A DAG run's own result (``task`` None): how many of its tasks ended in each state."""
    progress: dict[str, Any] | None = None
    """A ``running`` progress report only: ``{"details": ..., "at": instant}``; it is
    not an outcome (the attempt's one result comes later)."""
    covers: dict[str, Any] | None = None
    """A folded missed/skipped result only: ``{"from", "to", "count", "exact"}``, the
    occurrences it stands for (`topics.covers`); a plain object, as ``from`` is no
    Python name."""
    target: dict[str, Any] | None = None
    """A target's result only (`topics.targets`): ``{"kafka": {"topic", "partition"}}``
    where the shard wrote the record, or ``{"http": {"status", "duration_ms", "body"}}``
    of the worker's call; a plain object, as its one key says which kind it is."""

    @property
    def scheduled_ms(self) -> int:
        return parse_instant(self.scheduled_at)

    @property
    def finished_ms(self) -> int | None:
        return None if self.finished_at is None else parse_instant(self.finished_at)


class RunCancelRecord(
    faust.Record, include_metadata=False, allow_blessed_key=True, namespace="kafkron.run_cancel"
):
    """A cancel record, which ``{ns}.runs`` also carries (under the run's key, after
    the run): the worker holding that attempt stops it. An agent on ``{ns}.runs``
    receives these next to `RunRecord` values and tells them apart with ``isinstance``
    (the runs codec names this model in Faust's blessed key when it reads one)."""

    v: int
    type: str
    run_id: str
    schedule_id: str
    attempt: int
    reason: str
    requested_at: str
    task: str | None = None

    @property
    def requested_ms(self) -> int:
        return parse_instant(self.requested_at)


class DeadLetterRecord(faust.Record, include_metadata=False):
    """A run that exhausted its retries, as ``{ns}.dlq`` carries it."""

    v: int
    run_id: str
    schedule_id: str
    job: JobRecord
    last_error: ErrorRecord | None
    attempts: list[dict[str, Any]]
    """The attempt history the shard kept, oldest first (``attempt``, ``status``, ...)."""
    dead_at: str
    task: str | None = None

    @property
    def dead_at_ms(self) -> int:
        return parse_instant(self.dead_at)

    @property
    def last_attempt(self) -> int | None:
        """The number of the attempt that dead-lettered the run, if the history has it."""
        if not self.attempts:
            return None
        number = self.attempts[-1].get("attempt")
        return number if isinstance(number, int) else None

    @property
    def letter_id(self) -> str:
        """Names this dead letter among all of the run's: ``{run_id}#{last attempt}``.

        A replayed run that dies again has a later last attempt, so a new id; the
        same dead letter read twice (a redelivery) has the same id.
        """
        attempt = self.last_attempt
        return f"{self.run_id}#{self.dead_at if attempt is None else attempt}"


class RejectedRecord(faust.Record, include_metadata=False):
    """A record a shard refused, and why, as ``{ns}.rejected`` carries it."""

    v: int
    reason: str
    original: str | None
    """The refused value, base64; `original_bytes` decodes it."""
    topic: str
    partition: int
    offset: int

    @property
    def original_bytes(self) -> bytes | None:
        return None if self.original is None else base64.b64decode(self.original)


class AlertRecord(faust.Record, include_metadata=False):
    """A deadline alert, as ``{ns}.alerts`` carries it (`topics.alerts`): a run that
    broke its start or finish deadline (``deadline_missed``, once per run and deadline),
    or such a run that started or ended at last (``deadline_recovered``)."""

    v: int
    type: str
    """``deadline_missed`` or ``deadline_recovered``."""
    deadline: str
    """``start`` or ``finish``."""
    run_id: str
    schedule_id: str
    task: str | None
    """The task of a DAG's task run (a DAG's deadline is per task run); None for a
    schedule's run."""
    scheduled_at: str
    """The occurrence's instant (a DAG run's, for a task run)."""
    due_at: str
    """The instant the deadline fell: the instant plus the deadline, or for a DAG's task
    run the instant it became ready plus the deadline."""
    attempt: int
    late_by_ms: int
    """How far past ``due_at`` the run was when decided (0 or less in a recovered
    record: in time after all, only its report came late)."""
    observed_at: str | None
    """The start (a start deadline's record) or the end (a finish deadline's) it was
    decided from; None when decided by silence."""
    at: str

    @property
    def due_ms(self) -> int:
        return parse_instant(self.due_at)


class CalendarDaysRecord(faust.Record, include_metadata=False):
    """A named calendar's days (`topics.calendar_days`): ``tz`` (an IANA zone, UTC when
    absent), ``dates`` (``YYYY-MM-DD``), ``ranges`` (``[first, last]``, both included)
    and ``weekdays`` (``MON`` .. ``SUN``); a field the calendar was given without is
    None here and absent on the wire."""

    tz: str | None = None
    dates: list[str] | None = None
    ranges: list[list[str]] | None = None
    weekdays: list[str] | None = None


class CalendarRecord(faust.Record, include_metadata=False):
    """A named calendar as ``{ns}.calendars`` carries it, keyed by its name (a null value,
    a tombstone, deletes it): written by the shard that applied a ``calendar.upsert``
    (docs/DESIGN.md §5.7)."""

    v: int
    calendar: CalendarDaysRecord
