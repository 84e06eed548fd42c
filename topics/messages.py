"""The records kafkron writes: runs, results, dead letters and rejections.

Builders sit on the firing path (hundreds of thousands of runs per second across a
cluster), so each builds one dict and hands it to orjson: no dataclass, no
validation beyond what costs nothing. Parsers sit on the reading side (workers,
the history actor, tests, users) and are strict: they return a frozen dataclass
with instants as ``*_ms`` ints, or raise ``ValueError`` naming the bad field.

Every value carries ``"v": 1``; instants are RFC 3339 UTC with milliseconds
(`topics.timefmt.format_ms`). Every record is keyed by the schedule id (UTF-8);
a rejection is keyed by the rejected record's original key.

Run ids are deterministic, ``{schedule_id}@{scheduled_at}`` plus ``/{task}`` for a
DAG task: the same occurrence always has the same id, on any shard, after any
failover, and every attempt of it keeps it. Ids cannot contain ``@`` or ``/``
(`topics.command_fields.identifier`), so a run id splits back unambiguously.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from topics.command_types import Job
from topics.concurrency import parse_concurrency
from topics.covers import Covers, covers_from_message, covers_json, parse_covers
from topics.priority import parse_priority
from topics.queues import DEFAULT_QUEUE
from topics.ratelimits import parse_rate_limit
from topics.timefmt import format_ms, parse_instant
from topics.vocabulary import FOLDED, RunStatus

STATUSES = tuple(RunStatus)
"""Result statuses, as strings on the wire (`topics.vocabulary.RunStatus` says who
writes which). ``running`` is a progress report (`PROGRESS_STATUS`), never an
attempt's outcome."""

PROGRESS_STATUS = RunStatus.RUNNING
"""A worker's progress report for an attempt still running (``ctx.heartbeat(details)``):
it carries ``progress`` (``{"details", "at"}``), is written at most once per
`PROGRESS_INTERVAL_MS` per attempt, and is kept out of the one-result-per-attempt
rule: readers wanting outcomes skip it (the shard ignores it)."""
PROGRESS_INTERVAL_MS = 10_000
PROGRESS_DETAILS_MAX_BYTES = 4_096
"""Larger ``details`` are replaced by a note saying how large they were (a progress
report must never be refused by the results topic)."""
RETRY_AFTER_FIELD = "retry_after_s"
"""An optional field of a failed result's ``error``: the least number of seconds
(decimal text) before the next attempt, an HTTP target's ``Retry-After``. The shard
waits the larger of it and its backoff (`retry_after_ms`)."""
RETRY_AFTER_MAX_S = 3600
"""A longer ``retry_after_s`` counts as this: a run waiting a day in the changelog
because one server said so would look lost."""

# The member each wire string names: membership test and conversion in one lookup,
# on the reading hot path.
_STATUS_OF: Mapping[str, RunStatus] = {status.value: status for status in RunStatus}

# Formatted instants, by epoch ms. A firing batch formats the same few instants over
# and over (every schedule due this tick shares scheduled_at, fired_at and mostly
# deadline), so a dict lookup replaces most of the formatting work. Bounded: emptied
# when full, which only costs a refill.
_FORMATTED_MAX = 8192
_formatted: dict[int, str] = {}


def _format(instant_ms: int) -> str:
    text = _formatted.get(instant_ms)
    if text is None:
        if len(_formatted) >= _FORMATTED_MAX:
            _formatted.clear()
        text = _formatted[instant_ms] = format_ms(instant_ms)
    return text


_parsed: dict[str, int] = {}


def _parse(text: str) -> int:
    """`parse_instant` with the same bounded memo (readers see the same few instants)."""
    instant_ms = _parsed.get(text)
    if instant_ms is None:
        instant_ms = parse_instant(text)  # raises before anything is cached
        if len(_parsed) >= _FORMATTED_MAX:
            _parsed.clear()
        _parsed[text] = instant_ms
    return instant_ms


# --- run ids and idempotency keys -------------------------------------------------


def run_id_for(schedule_id: str, scheduled_ms: int, task: str | None = None) -> str:
    """``{schedule_id}@{scheduled_at}``, plus ``/{task}`` for a DAG task."""
    if task is None:
        return f"{schedule_id}@{_format(scheduled_ms)}"
    return f"{schedule_id}@{_format(scheduled_ms)}/{task}"


def parse_run_id(run_id: str) -> tuple[str, int, str | None]:
    """``(schedule_id, scheduled_ms, task)`` of a run id; ``ValueError`` if it is not one."""
    schedule_id, at, rest = run_id.partition("@")
    if not at or not schedule_id:
        raise ValueError(f"{run_id!r} is not a run id (expected id@2026-10-10T00:00:00.000Z)")
    scheduled, slash, task = rest.partition("/")
    if slash and not task:
        raise ValueError(f"{run_id!r} has an empty task after '/'")
    return schedule_id, parse_instant(scheduled), task if slash else None


def idempotency_key(run_id: str, *parts: str) -> str:
    """A stable key for one side effect of a run: the same on every attempt.

    sha256 over the run id and the parts, each length-prefixed so that
    ``("a", "bc")`` and ``("ab", "c")`` differ; 64 hex characters. The same
    ``(run_id, parts)`` gives the same key in any process, on any machine.
    """
    framed = bytearray()
    for text in (run_id, *parts):
        data = text.encode("utf-8")
        framed += len(data).to_bytes(4, "big")
        framed += data
    return hashlib.sha256(framed).hexdigest()


# --- runs --------------------------------------------------------------------------


@dataclass(slots=True)
class Run:
    """One attempt of one occurrence, as a worker receives it from ``{ns}.runs``.

    Never changed once built, but not a frozen dataclass: a worker builds one per
    record it reads, and a frozen class's constructor (an ``object.__setattr__`` call
    per field) cost a sixth of the worker core's time per run (``bench/worker_core.py``).
    """

    run_id: str
    schedule_id: str
    task: str | None
    """The DAG task name, or None for a plain schedule."""
    scheduled_ms: int
    """The occurrence's instant (what the run id names), not when it was fired."""
    fired_ms: int
    """When the shard emitted this attempt."""
    attempt: int
    """1 for the first attempt."""
    job: Job
    idempotency_key: str
    """Stable across attempts: ``idempotency_key(run_id)``."""
    deadline_ms: int
    """The attempt is cancelled and reported ``timed_out`` past this instant."""
    logical_date_ms: int | None = None
    """The data date a DAG run processes (Airflow's logical date), if any."""
    data_interval: tuple[int, int] | None = None
    """``(start_ms, end_ms)`` of the data a DAG run covers, if any."""
    report_start: bool = False
    """The run's schedule has a start deadline: the worker reports the attempt's start
    (a progress report at once, docs/WORKER-PROTOCOL.md §8.3)."""


def run_value(
    *,
    run_id: str,
    schedule_id: str,
    task: str | None,
    scheduled_ms: int,
    fired_ms: int,
    attempt: int,
    job: Job,
    idempotency_key: str,
    deadline_ms: int,
    logical_date_ms: int | None = None,
    data_interval: tuple[int, int] | None = None,
    report_start: bool = False,
) -> bytes:
    """The ``{ns}.runs`` value of one attempt."""
    record: dict[str, Any] = {
        "v": 1,
        "run_id": run_id,
        "schedule_id": schedule_id,
        "scheduled_at": _format(scheduled_ms),
        "fired_at": _format(fired_ms),
        "attempt": attempt,
        "job": job.wire(),
        "idempotency_key": idempotency_key,
        "deadline": _format(deadline_ms),
    }
    if task is not None:
        record["task"] = task
    if logical_date_ms is not None:
        record["logical_date"] = _format(logical_date_ms)
    if data_interval is not None:
        record["data_interval"] = {
            "start": _format(data_interval[0]),
            "end": _format(data_interval[1]),
        }
    if report_start:
        record["report_start"] = True
    return orjson.dumps(record)


def parse_run(value: bytes) -> Run:
    """The run in ``value``; ``ValueError`` naming the field if it is not a valid run."""
    try:
        return _parse_run_fast(orjson.loads(value))
    except Exception:  # anything unusual: the strict reader finds and names the problem
        return _parse_run_strict(value)


def _parse_run_fast(data: Any) -> Run:
    """The common case without per-field method calls; raises on anything unusual."""
    if type(data) is not dict or type(data["v"]) is not int or data["v"] != 1:
        raise _Unusual
    run_id, schedule_id, key = data["run_id"], data["schedule_id"], data["idempotency_key"]
    task, attempt, job = data.get("task"), data["attempt"], data["job"]
    if not (
        type(run_id) is str
        and type(schedule_id) is str
        and type(key) is str
        and (task is None or type(task) is str)
        and type(attempt) is int
        and type(job) is dict
        and type(job["name"]) is str
        and type(job.get("args", {})) is dict
        and "queue" not in job
        and "concurrency" not in job
        and "priority" not in job
        and "rate_limit" not in job
        and "logical_date" not in data
        and "data_interval" not in data
    ):
        raise _Unusual
    return Run(
        run_id,
        schedule_id,
        task,
        _parse(data["scheduled_at"]),
        _parse(data["fired_at"]),
        attempt,
        Job(job["name"], job.get("args") or {}),
        key,
        _parse(data["deadline"]),
        report_start=data.get("report_start") is True,
    )


def _parse_run_strict(value: bytes) -> Run:
    fields = _Fields(value, "run")
    interval = fields.optional_object("data_interval")
    return Run(
        run_id=fields.string("run_id"),
        schedule_id=fields.string("schedule_id"),
        task=fields.optional_string("task"),
        scheduled_ms=fields.instant("scheduled_at"),
        fired_ms=fields.instant("fired_at"),
        attempt=fields.integer("attempt"),
        job=fields.job("job"),
        idempotency_key=fields.string("idempotency_key"),
        deadline_ms=fields.instant("deadline"),
        logical_date_ms=fields.optional_instant("logical_date"),
        data_interval=None
        if interval is None
        else (
            _Fields.of(interval, "run.data_interval").instant("start"),
            _Fields.of(interval, "run.data_interval").instant("end"),
        ),
        report_start=fields.has("report_start") and fields.raw("report_start") is True,
    )


# --- cancel records (also on {ns}.runs) -------------------------------------------

CANCEL_TYPE = "run.cancel"
_CANCEL_MARK = b'"type"'  # a run record never has a "type" field


@dataclass(frozen=True, slots=True)
class RunCancelRecord:
    """A request to stop one attempt, written by the shard to ``{ns}.runs`` under the
    run's key, so it lands on the run's partition after the run itself
    (docs/DESIGN.md §6.6). Readers of ``{ns}.runs`` tell it apart with `is_cancel`."""

    run_id: str
    schedule_id: str
    task: str | None
    attempt: int
    """The attempt to stop; a worker running another attempt of the run ignores it."""
    reason: str
    requested_ms: int


def cancel_value(
    *,
    run_id: str,
    schedule_id: str,
    task: str | None,
    attempt: int,
    reason: str,
    requested_ms: int,
) -> bytes:
    """The ``{ns}.runs`` value that asks the worker of ``(run_id, attempt)`` to stop it."""
    record: dict[str, Any] = {
        "v": 1,
        "type": CANCEL_TYPE,
        "run_id": run_id,
        "schedule_id": schedule_id,
        "attempt": attempt,
        "reason": reason,
        "requested_at": _format(requested_ms),
    }
    if task is not None:
        record["task"] = task
    return orjson.dumps(record)


def is_cancel(value: bytes | None) -> bool:
    """Whether a ``{ns}.runs`` value is a cancel record rather than a run (cheap: a run
    record has no ``type`` field, so most values are told apart by a substring test)."""
    if value is None or _CANCEL_MARK not in value:
        return False
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError:
        return False
    return isinstance(data, dict) and data.get("type") == CANCEL_TYPE


def parse_cancel(value: bytes) -> RunCancelRecord:
    """The cancel record in ``value``; ``ValueError`` naming the field if it is not one."""
    fields = _Fields(value, "cancel")
    if fields.raw("type") != CANCEL_TYPE:
        raise ValueError(f"cancel.type: expected {CANCEL_TYPE!r}")
    return RunCancelRecord(
        run_id=fields.string("run_id"),
        schedule_id=fields.string("schedule_id"),
        task=fields.optional_string("task"),
        attempt=fields.integer("attempt"),
        reason=fields.string("reason"),
        requested_ms=fields.instant("requested_at"),
    )


# --- results -----------------------------------------------------------------------


@dataclass(slots=True)  # not frozen: a frozen __init__ costs a shard ~1 us per result read
class Result:
    """The outcome of one attempt; exactly one is visible per (run_id, attempt). Treat
    it as immutable."""

    run_id: str
    schedule_id: str
    task: str | None
    attempt: int
    status: RunStatus
    scheduled_ms: int
    started_ms: int | None
    """None when the attempt never started (missed, skipped, upstream_failed)."""
    finished_ms: int | None
    worker: str
    """Who wrote it: a worker's id, or ``shard-{p}`` for results the shard decides."""
    error: Mapping[str, str] | None
    """``{"type", "message"}`` of a failure, else None."""
    counts: Mapping[str, int] | None = None
    """A DAG run's own result only (``task`` null, run id without a task): how many
    of its tasks ended in each state, such as ``{"succeeded": 3, "failed": 1}``."""
    progress: Mapping[str, Any] | None = None
    """A ``running`` progress report only: ``{"details": ..., "at": instant}``."""
    covers: Covers | None = None
    """A folded ``missed``/``skipped`` result only: the occurrences it stands for
    (`topics.covers`); None for a result that stands for its own occurrence. Read it
    with `covers_of`, which also understands results written before the field."""
    target: Mapping[str, Any] | None = None
    """A target's attempt only (`topics.targets`): ``{"kafka": {"topic", "partition"}}``
    where the shard wrote the record, or ``{"http": {"status", "duration_ms", "body"}}``
    of the worker's call (the body's first KiB)."""


def result_value(
    *,
    run_id: str,
    schedule_id: str,
    task: str | None,
    attempt: int,
    status: RunStatus,
    scheduled_ms: int,
    started_ms: int | None,
    finished_ms: int | None,
    worker: str,
    error: Mapping[str, str] | None,
    counts: Mapping[str, int] | None = None,
    progress: tuple[Any, int] | None = None,
    covers: Covers | None = None,
    target: Mapping[str, Any] | None = None,
) -> bytes:
    """The ``{ns}.results`` value of one attempt (or, with ``counts``, of a DAG run as a
    whole; with ``progress`` = (details, at_ms), a ``running`` progress report; with
    ``target``, what a target's attempt did); ``ValueError`` on an unknown status."""
    if status not in _STATUS_OF:
        raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
    record: dict[str, Any] = {
        "v": 1,
        "run_id": run_id,
        "schedule_id": schedule_id,
        "attempt": attempt,
        "status": status,
        "scheduled_at": _format(scheduled_ms),
        "started_at": None if started_ms is None else _format(started_ms),
        "finished_at": None if finished_ms is None else _format(finished_ms),
        "worker": worker,
    }
    if task is not None:
        record["task"] = task
    if error is not None:
        record["error"] = _error_json(error)
    if counts is not None:
        record["counts"] = dict(counts)
    if progress is not None:
        record["progress"] = {"details": bounded_details(progress[0]), "at": _format(progress[1])}
    if covers is not None:
        record["covers"] = covers_json(covers)
    if target is not None:
        record["target"] = dict(target)
    return orjson.dumps(record)


def _error_json(error: Mapping[str, str]) -> dict[str, str]:
    out = {"type": error["type"], "message": error["message"]}
    after = error.get(RETRY_AFTER_FIELD)
    if after is not None:
        out[RETRY_AFTER_FIELD] = after
    return out


def retry_after_ms(error: Mapping[str, str] | None) -> int:
    """The floor a failed result's error puts under the next retry's delay, in ms
    (0 without one, or when it is not a non-negative number), at most
    `RETRY_AFTER_MAX_S`."""
    text = None if error is None else error.get(RETRY_AFTER_FIELD)
    if text is None:
        return 0
    try:
        seconds = float(text)
    except (TypeError, ValueError):
        return 0
    if not 0 < seconds < float("inf"):  # NaN, negative, zero and infinity alike
        return 0
    return int(min(seconds, RETRY_AFTER_MAX_S) * 1000)


def bounded_details(details: Any) -> Any:
    """``details`` as JSON can carry them, at most `PROGRESS_DETAILS_MAX_BYTES` encoded:
    what JSON cannot encode becomes its ``repr``, what is too large a note saying so."""
    try:
        encoded = orjson.dumps(details)
    except TypeError:
        details = repr(details)[: PROGRESS_DETAILS_MAX_BYTES // 2]
        encoded = orjson.dumps(details)
    if len(encoded) > PROGRESS_DETAILS_MAX_BYTES:
        limit = PROGRESS_DETAILS_MAX_BYTES
        return {"omitted": f"details of {len(encoded)} bytes (at most {limit})"}
    return details


def parse_result(value: bytes) -> Result:
    """The result in ``value``; ``ValueError`` naming the field if it is not a valid result."""
    try:
        return _parse_result_fast(orjson.loads(value))
    except Exception:  # anything unusual: the strict reader finds and names the problem
        return _parse_result_strict(value)


def _parse_result_fast(data: Any) -> Result:
    """The common case without per-field method calls; raises on anything unusual."""
    if type(data) is not dict or type(data["v"]) is not int or data["v"] != 1:
        raise _Unusual
    run_id, schedule_id, task = data["run_id"], data["schedule_id"], data.get("task")
    attempt, status, worker = data["attempt"], data["status"], data["worker"]
    started, finished, error = data["started_at"], data["finished_at"], data.get("error")
    if not (
        type(run_id) is str
        and type(schedule_id) is str
        and (task is None or type(task) is str)
        and type(attempt) is int
        and type(status) is str
        and status in _STATUS_OF
        and type(worker) is str
        and error is None
        and "counts" not in data
        and "progress" not in data
        and "covers" not in data
        and "target" not in data
    ):
        raise _Unusual
    return Result(
        run_id,
        schedule_id,
        task,
        attempt,
        _STATUS_OF[status],
        _parse(data["scheduled_at"]),
        None if started is None else _parse(started),
        None if finished is None else _parse(finished),
        worker,
        None,
    )


def _parse_result_strict(value: bytes) -> Result:
    fields = _Fields(value, "result")
    covers = fields.optional_object("covers")
    status = _STATUS_OF.get(fields.string("status"))
    if status is None:
        raise ValueError(
            f"result.status: {fields.string('status')!r} is not one of {', '.join(STATUSES)}"
        )
    return Result(
        run_id=fields.string("run_id"),
        schedule_id=fields.string("schedule_id"),
        task=fields.optional_string("task"),
        attempt=fields.integer("attempt"),
        status=status,
        scheduled_ms=fields.instant("scheduled_at"),
        started_ms=fields.optional_instant("started_at"),
        finished_ms=fields.optional_instant("finished_at"),
        worker=fields.string("worker"),
        error=fields.error("error"),
        counts=_counts(fields.optional_object("counts")),
        covers=None if covers is None else parse_covers(covers, "result.covers"),
        progress=_progress(fields.optional_object("progress")),
        target=_target(fields.optional_object("target")),
    )


def _target(value: dict[str, Any] | None) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if len(value) != 1 or not isinstance(next(iter(value.values())), dict):
        raise ValueError(
            'result.target: expected one object, {"kafka": {...}} or {"http": {...}},'
            f" got {sorted(value)}"
        )
    return value


def _progress(value: dict[str, Any] | None) -> Mapping[str, Any] | None:
    if value is None:
        return None
    at = value.get("at")
    if not isinstance(at, str):
        raise ValueError(f"result.progress.at: expected an instant, got {at!r}")
    try:
        parse_instant(at)
    except ValueError as exc:
        raise ValueError(f"result.progress.at: {exc}") from None
    return value


def covers_of(result: Result) -> Covers | None:
    """The occurrences a folded result stands for, None for any other result.

    Reads ``covers``; a ``missed``/``skipped`` result written before that field
    existed states its range only in its error message, which is read instead."""
    if result.covers is not None:
        return result.covers
    if result.status in FOLDED and result.error is not None:
        return covers_from_message(result.error["message"])
    return None


def _counts(value: dict[str, Any] | None) -> Mapping[str, int] | None:
    if value is None:
        return None
    for state, number in value.items():
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"result.counts.{state}: expected a count, got {number!r}")
    return value


# --- dead letters ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A run that exhausted its attempts or failed with a non-retryable error."""

    run_id: str
    schedule_id: str
    task: str | None
    job: Job
    last_error: Mapping[str, str] | None
    """``{"type", "message"}`` of the last attempt (None if it timed out silently)."""
    attempts: tuple[Mapping[str, Any], ...]
    """The attempt history as the shard recorded it, oldest first."""
    dead_at_ms: int


def dlq_value(
    *,
    run_id: str,
    schedule_id: str,
    task: str | None,
    job: Job,
    last_error: Mapping[str, str] | None,
    attempts: Sequence[Mapping[str, Any]],
    dead_at_ms: int,
) -> bytes:
    """The ``{ns}.dlq`` value; ``attempts`` entries must be JSON objects (dicts)."""
    record: dict[str, Any] = {
        "v": 1,
        "run_id": run_id,
        "schedule_id": schedule_id,
        "job": job.wire(),
        "last_error": None
        if last_error is None
        else {"type": last_error["type"], "message": last_error["message"]},
        "attempts": [dict(entry) for entry in attempts],
        "dead_at": _format(dead_at_ms),
    }
    if task is not None:
        record["task"] = task
    return orjson.dumps(record)


def parse_dlq(value: bytes) -> DeadLetter:
    fields = _Fields(value, "dlq")
    attempts = fields.raw("attempts")
    if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
        raise ValueError("dlq.attempts: expected a list of objects")
    return DeadLetter(
        run_id=fields.string("run_id"),
        schedule_id=fields.string("schedule_id"),
        task=fields.optional_string("task"),
        job=fields.job("job"),
        last_error=fields.error("last_error"),
        attempts=tuple(attempts),
        dead_at_ms=fields.instant("dead_at"),
    )


# --- rejections --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record a shard could not accept, and why; the partition moved on."""

    reason: str
    original: bytes | None
    """The rejected value, byte for byte (None for a null value)."""
    topic: str
    partition: int
    offset: int


# The most of a rejected command's bytes a rejection carries. A command may be as
# large as {ns}.commands accepts (1 MiB by default) while base64 grows it by a third:
# a whole copy could make a rejection the rejected topic refuses, and a refused
# rejection would stop its shard for good. The rest is named, not copied.
REJECTED_ORIGINAL_MAX_BYTES = 64 * 1024


def rejected_value(
    *, reason: str, original: bytes | None, topic: str, partition: int, offset: int
) -> bytes:
    """The ``{ns}.rejected`` value; the original bytes travel base64-encoded.

    At most `REJECTED_ORIGINAL_MAX_BYTES` of them: a longer original is cut, and
    ``original_bytes`` (its full size) and ``original_sha256`` say what it was; the
    record itself stays at its topic, partition and offset until retention.
    """
    record: dict[str, Any] = {
        "v": 1,
        "reason": reason,
        "original": None,
        "topic": topic,
        "partition": partition,
        "offset": offset,
    }
    if original is not None:
        kept = original[:REJECTED_ORIGINAL_MAX_BYTES]
        record["original"] = base64.b64encode(kept).decode("ascii")
        if len(kept) < len(original):
            record["original_bytes"] = len(original)
            record["original_sha256"] = hashlib.sha256(original).hexdigest()
    return orjson.dumps(record)


def parse_rejected(value: bytes) -> Rejected:
    fields = _Fields(value, "rejected")
    encoded = fields.optional_string("original")
    try:
        original = None if encoded is None else base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("rejected.original: not valid base64") from None
    return Rejected(
        reason=fields.string("reason"),
        original=original,
        topic=fields.string("topic"),
        partition=fields.integer("partition"),
        offset=fields.integer("offset"),
    )


# --- strict field reading ----------------------------------------------------------


class _Unusual(Exception):
    """A fast-path parser met something it does not handle; the strict reader decides."""


class _Fields:
    """Typed access to a decoded record; every failure is a ``ValueError`` naming the field."""

    __slots__ = ("_data", "_what")

    def __init__(self, value: bytes, what: str) -> None:
        try:
            data = orjson.loads(value)
        except (orjson.JSONDecodeError, TypeError) as error:
            raise ValueError(f"{what}: not valid JSON ({error})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{what}: expected a JSON object")
        if data.get("v") != 1 or isinstance(data.get("v"), bool):
            raise ValueError(f"{what}.v: expected 1, got {data.get('v')!r}")
        self._data: dict[str, Any] = data
        self._what = what

    @classmethod
    def of(cls, data: dict[str, Any], what: str) -> _Fields:
        fields = cls.__new__(cls)
        fields._data = data
        fields._what = what
        return fields

    def has(self, name: str) -> bool:
        return name in self._data

    def raw(self, name: str) -> Any:
        if name not in self._data:
            raise ValueError(f"{self._what}.{name}: missing")
        return self._data[name]

    def string(self, name: str) -> str:
        value = self.raw(name)
        if not isinstance(value, str):
            raise ValueError(f"{self._what}.{name}: expected a string, got {value!r}")
        return value

    def optional_string(self, name: str) -> str | None:
        return None if self._data.get(name) is None else self.string(name)

    def integer(self, name: str) -> int:
        value = self.raw(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{self._what}.{name}: expected an integer, got {value!r}")
        return value

    def instant(self, name: str) -> int:
        try:
            return _parse(self.string(name))
        except ValueError as error:
            raise ValueError(f"{self._what}.{name}: {error}") from None

    def optional_instant(self, name: str) -> int | None:
        return None if self._data.get(name) is None else self.instant(name)

    def optional_object(self, name: str) -> dict[str, Any] | None:
        value = self._data.get(name)
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"{self._what}.{name}: expected an object, got {value!r}")
        return value

    def job(self, name: str) -> Job:
        value = self.raw(name)
        if not isinstance(value, dict):
            raise ValueError(f"{self._what}.{name}: expected an object, got {value!r}")
        inner = _Fields.of(value, f"{self._what}.{name}")
        args = inner.optional_object("args")
        queue = inner.optional_string("queue")
        concurrency = parse_concurrency(
            value.get("concurrency"), f"{self._what}.{name}.concurrency"
        )
        priority = parse_priority(value.get("priority"), f"{self._what}.{name}.priority")
        rate_limit = parse_rate_limit(value.get("rate_limit"), f"{self._what}.{name}.rate_limit")
        return Job(
            inner.string("name"),
            {} if args is None else args,
            queue or DEFAULT_QUEUE,
            concurrency,
            priority,
            rate_limit,
        )

    def error(self, name: str) -> Mapping[str, str] | None:
        value = self.optional_object(name)
        if value is None:
            return None
        inner = _Fields.of(value, f"{self._what}.{name}")
        error = {"type": inner.string("type"), "message": inner.string("message")}
        after = inner.optional_string(RETRY_AFTER_FIELD)
        if after is not None:
            error[RETRY_AFTER_FIELD] = after
        return error
