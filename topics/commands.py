"""Decoding ``{ns}.commands`` records into typed commands, or into a reason to reject them.

`decode_command` is the only door into a shard for user input, and it never raises:
whatever the bytes, it returns a `Command` or a `Rejection` whose reason names the
field, says what was wrong and what to write instead. The shard writes rejections
to ``{ns}.rejected`` and moves on, so bad input never crashes or stalls a partition.

The schema (docs/DESIGN.md §2.2), one JSON object per record, UTF-8, ``"v": 1``::

    {"v": 1, "type": "schedule.upsert", "id": "invoice-nightly",
     "spec": {"cron": "0 0 * * *", "tz": "Europe/London"},
     "job": {"name": "billing.invoice_nightly", "args": {}},
     "misfire": {...}, "overlap": "skip", "dst": {...}, "spread": {"window_s": 900},
     "retry": {...}, "timeout_s": 3600, "start": "...", "end": "..."}

Rules beyond the field types:

- The record key is the schedule id in UTF-8, or null (or empty): then the body's
  ``id`` routes it. A key that is not UTF-8 or differs from ``id`` is rejected,
  because the command would be applied by a shard that does not own the id.
- A value over `MAX_COMMAND_BYTES` is rejected before it is parsed.
- Unknown fields are rejected with the closest known name: a typo must not silently
  become a default. An optional field given as ``null`` means "use the default".
- ``spec.at`` older than ``misfire.grace_s`` could never fire, and one more than ten
  years ahead is almost surely a typo in the year; both are rejected, as is an
  ``end`` already past. These depend on ``now_ms``; a changelog rebuild passes
  ``now_ms=None`` to `decode_object` to skip them.

Field defaults are documented on the types, in `topics.command_types`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from topics import codec, spec_compiler
from topics.alerts import deadline_field
from topics.backfill_commands import (
    BACKFILL_CANCEL_TYPE,
    BACKFILL_TYPE,
    BackfillCancel,
    ScheduleBackfill,
    decode_backfill,
    decode_backfill_cancel,
)
from topics.calendar_commands import (
    CALENDAR_DELETE_TYPE,
    CALENDAR_UPSERT_TYPE,
    decode_calendar_delete,
    decode_calendar_upsert,
)
from topics.command_fields import (
    FieldError,
    check_keys,
    choice,
    clip,
    describe,
    identifier,
    instant,
    integer,
    number,
    obj,
    string,
    string_list,
)
from topics.command_types import (
    DEFAULT_DST,
    DEFAULT_TIMEOUT_S,
    MAX_CANCEL_REASON_CHARS,
    MISFIRE_POLICIES,
    OVERLAP_POLICIES,
    Command,
    DagClear,
    DagTask,
    DagUpsert,
    DlqReplay,
    Job,
    MisfirePolicy,
    Rejection,
    RetryPolicy,
    RunCancel,
    ScheduleDelete,
    SchedulePause,
    ScheduleResume,
    ScheduleTrigger,
    ScheduleUpsert,
)
from topics.concurrency import check_concurrency
from topics.dag_graph import MAX_TASKS, GraphError, topological_order
from topics.key_templates import check_job_keys
from topics.priority import DEFAULT_PRIORITY, PRIORITY_WITH_KEY, check_priority
from topics.queues import DEFAULT_QUEUE, check_queue
from topics.ratelimits import (
    RATE_PAUSE_TYPE,
    RATE_RESUME_TYPE,
    check_rate_limit,
    check_with_concurrency,
    decode_rate_pause,
    decode_rate_resume,
)
from topics.spec_compiler import CompiledSpec, NoSpecCompiler, SpecError
from topics.targets import KAFKA_JOB, RESERVED_JOB_PREFIX, target_job
from topics.vocabulary import DstFold, DstGap, JitterMode, MisfireMode, OverlapPolicy

__all__ = [
    "COMMAND_TYPES",
    "DEFAULT_DST",
    "DEFAULT_TIMEOUT_S",
    "MAX_COMMAND_BYTES",
    "MISFIRE_POLICIES",
    "OVERLAP_POLICIES",
    "BackfillCancel",
    "Command",
    "DagClear",
    "DagTask",
    "DagUpsert",
    "DlqReplay",
    "Job",
    "MisfirePolicy",
    "Rejection",
    "RetryPolicy",
    "RunCancel",
    "ScheduleBackfill",
    "ScheduleDelete",
    "SchedulePause",
    "ScheduleResume",
    "ScheduleTrigger",
    "ScheduleUpsert",
    "command_id",
    "decode_command",
    "decode_object",
]

MAX_COMMAND_BYTES = 256 * 1024
MAX_AT_AHEAD_MS = 3653 * 86_400_000  # ten years, leap days included
MAX_GRACE_S = 366 * 86_400
MAX_TIMEOUT_S = 30 * 86_400
MAX_SPREAD_WINDOW_S = 86_400
MAX_RETRY_ATTEMPTS = 1000
MAX_RETRY_INTERVAL_S = 7 * 86_400
MAX_CATCH_UP = 10_000
MAX_ACTIVE_RUNS = 1000
MAX_RUNS = 1_000_000_000
MAX_PAUSE_NOTE_CHARS = 500

COMMAND_TYPES = (
    "schedule.upsert",
    "schedule.delete",
    "schedule.pause",
    "schedule.resume",
    "schedule.trigger",
    "dag.upsert",
    "dag.clear",
    "dlq.replay",
    "run.cancel",
    BACKFILL_TYPE,
    BACKFILL_CANCEL_TYPE,
    CALENDAR_UPSERT_TYPE,
    CALENDAR_DELETE_TYPE,
    RATE_PAUSE_TYPE,
    RATE_RESUME_TYPE,
)
_ENVELOPE = ("v", "type", "id")
_SCHEDULE_FIELDS = ("spec", "misfire", "dst", "spread", "start", "end", "retry", "timeout_s")
_UPSERT_KEYS = frozenset(
    (*_ENVELOPE, *_SCHEDULE_FIELDS, "job", "target", "overlap", "max_runs", "deadline")
)
_DAG_KEYS = frozenset((*_ENVELOPE, *_SCHEDULE_FIELDS, "tasks", "max_active_runs", "deadline"))
_TASK_KEYS = frozenset(("job", "target", "after", "retry", "timeout_s"))
_SPEC_KINDS = ("cron", "every", "at", "rrule", "business_day", "any")
# The fields of each kind are checked by the compiler (actors/timespec/compile.py).
_SPEC_KEYS = frozenset((*_SPEC_KINDS, "tz", "anchor", "dtstart", "time", "exclude", "adjust"))
_SPEC_ALIASES = {"timezone": "tz", "time_zone": "tz", "zone": "tz", "interval": "every"}

_FIELD_PATH = re.compile(r"[a-z_]+(\[\d+\])?(\.[a-z_]+(\[\d+\])?)*: ")

_EXAMPLE_COMMAND = '{"v": 1, "type": "schedule.delete", "id": "invoice-nightly"}'
_EXAMPLE_SPEC = '{"cron": "0 0 * * *", "tz": "Europe/London"}'
_EXAMPLE_JOB = '{"name": "billing.invoice_nightly", "args": {}}'


def decode_command(key: bytes | None, value: bytes | None, now_ms: int) -> Command | Rejection:
    """Decode one ``{ns}.commands`` record. Never raises, whatever the bytes (only
    `NoSpecCompiler` when the process never imported `actors.timespec`)."""
    try:
        key_text = _key_text(key)
        return _decode(_parse_body(value), now_ms, key_text)
    except FieldError as error:
        return Rejection(str(error))
    except NoSpecCompiler:
        raise  # the process is wired wrongly: no command is at fault
    except Exception as error:  # the promise is "never raises": a bug here must not stall a shard
        return Rejection(
            f"value: could not be decoded ({type(error).__name__}: {error}); "
            "check it against the command schema"
        )


def decode_object(body: Mapping[str, Any], *, now_ms: int | None) -> Command | Rejection:
    """Decode an already parsed command object (such as ``raw`` kept in the changelog).

    With ``now_ms=None`` the checks that depend on the clock (``spec.at`` too old or
    too far ahead, ``end`` already past) are skipped, so a schedule accepted once is
    rebuilt identically later. Never raises.
    """
    try:
        return _decode(obj(body, "value", _EXAMPLE_COMMAND), now_ms)
    except FieldError as error:
        return Rejection(str(error))
    except NoSpecCompiler:
        raise
    except Exception as error:
        return Rejection(f"value: could not be decoded ({type(error).__name__}: {error})")


def command_id(key: bytes | None, value: bytes | None) -> str | None:
    """The routing key of a command, cheaply: the key if it is UTF-8, else the body's id.

    A shard uses it to forward a command that landed on a partition it does not own.
    None when neither exists (the record will be rejected wherever it is decoded).
    """
    if key:
        try:
            return key.decode("utf-8")
        except UnicodeDecodeError:
            pass
    if value is None or len(value) > MAX_COMMAND_BYTES:
        return None
    try:
        body = codec.loads(value)
    except ValueError:
        return None
    found = body.get("id") if isinstance(body, dict) else None
    return found if isinstance(found, str) and found else None


def _key_text(key: bytes | None) -> str | None:
    if not key:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FieldError(
            f"key: not valid UTF-8 (byte 0x{key[error.start]:02x} at offset {error.start}); "
            "the key must be the schedule id encoded as UTF-8, or null"
        ) from None


def _parse_body(value: bytes | None) -> dict[str, Any]:
    if value is None:
        raise FieldError(
            f"value: the record has no value (a tombstone); produce a command object such as "
            f"{_EXAMPLE_COMMAND}"
        )
    if len(value) > MAX_COMMAND_BYTES:
        raise FieldError(
            f"value: {len(value)} bytes is over the {MAX_COMMAND_BYTES // 1024} KiB limit of a "
            "command; keep job.args small and pass references (ids, URLs) instead of data"
        )
    try:
        body = codec.loads(value)
    except ValueError as error:
        raise FieldError(
            f"value: not valid JSON ({error}); produce one UTF-8 JSON object per record, "
            f"such as {_EXAMPLE_COMMAND}"
        ) from None
    return obj(body, "value", _EXAMPLE_COMMAND)


def _decode(
    body: dict[str, Any], now_ms: int | None, key_text: str | None = None
) -> Command | Rejection:
    if "v" not in body:
        raise FieldError('v: missing; add "v": 1 (the version of the command schema)')
    version = body["v"]
    if type(version) is not int or version != 1:  # not True, not 1.0: exactly the integer 1
        raise FieldError(
            f"v: expected 1, got {describe(version)}; this version of kafkron understands "
            "version 1 of the command schema"
        )
    if "type" not in body:
        raise FieldError(f"type: missing; expected one of {', '.join(COMMAND_TYPES)}")
    kind = body["type"]
    if not isinstance(kind, str) or kind not in COMMAND_TYPES:
        raise FieldError(
            f"type: unknown command type {describe(kind)}; expected one of "
            f"{', '.join(COMMAND_TYPES)}"
        )
    if body.get("id") is None:
        raise FieldError(
            "id: missing; every command names the schedule it applies to, "
            'such as "id": "invoice-nightly"'
        )
    schedule_id = identifier(body["id"], "id")
    if key_text is not None and key_text != schedule_id:
        raise FieldError(
            f"key: the record key {clip(key_text, 200)!r} differs from id {schedule_id!r}; "
            "produce the "
            "command keyed by its id (or with a null key) so the shard owning it applies it"
        )
    if kind == "schedule.upsert":
        return _schedule_upsert(body, schedule_id, now_ms)
    if kind == "dag.upsert":
        return _dag_upsert(body, schedule_id, now_ms)
    if kind == CALENDAR_UPSERT_TYPE:
        return decode_calendar_upsert(body, schedule_id)
    if kind == CALENDAR_DELETE_TYPE:
        return decode_calendar_delete(body, schedule_id)
    if kind == RATE_PAUSE_TYPE:
        return decode_rate_pause(body, schedule_id, now_ms)
    if kind == RATE_RESUME_TYPE:
        return decode_rate_resume(body, schedule_id)
    if kind == "dag.clear":
        check_keys(body, "", (*_ENVELOPE, "run_id", "task"))
        run_id = _run_id(body.get("run_id"), schedule_id, allow_task=False)
        return DagClear(schedule_id, run_id, identifier(body.get("task"), "task"))
    if kind == "dlq.replay":
        check_keys(body, "", (*_ENVELOPE, "run_id"))
        return DlqReplay(schedule_id, _run_id(body.get("run_id"), schedule_id, allow_task=True))
    if kind == "run.cancel":
        check_keys(body, "", (*_ENVELOPE, "run_id", "reason"))
        run_id = _run_id(body.get("run_id"), schedule_id, allow_task=True)
        reason = body.get("reason")
        if reason is None:
            return RunCancel(schedule_id, run_id)
        text = string(reason, "reason", max_chars=MAX_CANCEL_REASON_CHARS)
        if not text.strip():
            raise FieldError('reason: blank; say why, such as "reason": "bad input file"')
        return RunCancel(schedule_id, run_id, text)
    if kind == "schedule.pause":
        return _pause(body, schedule_id)
    if kind == BACKFILL_TYPE:
        return decode_backfill(body, schedule_id)
    if kind == BACKFILL_CANCEL_TYPE:
        return decode_backfill_cancel(body, schedule_id)
    check_keys(body, "", _ENVELOPE)
    if kind == "schedule.delete":
        return ScheduleDelete(schedule_id)
    if kind == "schedule.resume":
        return ScheduleResume(schedule_id)
    return ScheduleTrigger(schedule_id)


def _pause(body: dict[str, Any], schedule_id: str) -> SchedulePause:
    check_keys(body, "", (*_ENVELOPE, "note", "until", "after_current", "by"))
    note, by, until = body.get("note"), body.get("by"), body.get("until")
    after_current = body.get("after_current", False)
    if not isinstance(after_current, bool):
        raise FieldError(f"after_current: expected true or false, got {describe(after_current)}")
    return SchedulePause(
        schedule_id,
        note=None if note is None else string(note, "note", max_chars=MAX_PAUSE_NOTE_CHARS),
        until_ms=None if until is None else instant(until, "until"),
        after_current=after_current,
        by=None if by is None else string(by, "by", max_chars=200),
    )


def _run_id(value: Any, schedule_id: str, *, allow_task: bool) -> str:
    text = string(value, "run_id", max_chars=1000)
    example = f"{schedule_id}@2026-10-10T00:00:00.000Z"
    prefix = f"{schedule_id}@"
    if not text.startswith(prefix):
        raise FieldError(
            f"run_id: {clip(text, 100)!r} is not a run of {schedule_id!r}; "
            f"a run id looks like {example!r}"
        )
    scheduled, slash, task = text[len(prefix) :].partition("/")
    if slash and not allow_task:
        raise FieldError(
            f"run_id: {clip(text, 100)!r} names a task run; give the DAG run id "
            f'({example!r}) and the task in "task"'
        )
    instant(scheduled, "run_id (the part after '@')")
    if slash:
        identifier(task, "run_id (the task after '/')")
    return text


def _schedule_upsert(body: dict[str, Any], schedule_id: str, now_ms: int | None) -> ScheduleUpsert:
    if "args" in body:
        raise FieldError(
            'args: belongs inside job, as "job": {"name": "billing.invoice_nightly", "args": {...}}'
        )
    check_keys(body, "", _UPSERT_KEYS)
    job = _job_or_target(body)
    check_job_keys(job, schedule_id, "job")
    overlap = _optional(body, "overlap")
    when = _When(body, schedule_id, now_ms)
    deadline = deadline_field(body.get("deadline"))
    if deadline is not None and job.name == KAFKA_JOB:
        raise FieldError(
            "deadline: a Kafka target's record is written by the shard at its fire, "
            "never waits for a worker: leave deadline out"
        )
    return ScheduleUpsert(
        id=schedule_id,
        spec=when.spec,
        compiled=when.compiled,
        job=job,
        misfire=when.misfire,
        overlap=OverlapPolicy.SKIP
        if overlap is None
        else choice(overlap, "overlap", OverlapPolicy),
        dst=when.dst,
        spread_window_s=when.spread_window_s,
        retry=_retry(_optional(body, "retry"), "retry", RetryPolicy()),
        timeout_s=_timeout(_optional(body, "timeout_s"), "timeout_s", DEFAULT_TIMEOUT_S),
        start_ms=when.start_ms,
        end_ms=when.end_ms,
        raw=body,
        max_runs=None
        if body.get("max_runs") is None
        else integer(body["max_runs"], "max_runs", low=1, high=MAX_RUNS),
        deadline=deadline,
    )


def _dag_upsert(body: dict[str, Any], schedule_id: str, now_ms: int | None) -> DagUpsert:
    check_keys(body, "", _DAG_KEYS)
    dag_retry = _retry(_optional(body, "retry"), "retry", RetryPolicy())
    dag_timeout_s = _timeout(_optional(body, "timeout_s"), "timeout_s", DEFAULT_TIMEOUT_S)
    example = '{"extract": {"job": {...}}, "load": {"job": {...}, "after": ["extract"]}}'
    raw_tasks = obj(body.get("tasks"), "tasks", example)
    if len(raw_tasks) > MAX_TASKS:  # before parsing each one: the bound protects the shard
        raise FieldError(
            f"tasks: at most {MAX_TASKS} tasks per DAG, got {len(raw_tasks)}; split it into "
            "several DAGs"
        )
    tasks: dict[str, DagTask] = {}
    for name, raw_task in raw_tasks.items():
        identifier(name, "tasks (a task name)")
        path = f"tasks.{name}"
        task = obj(raw_task, path, '{"job": {"name": "..."}, "after": ["extract"]}')
        check_keys(task, path, _TASK_KEYS)
        after = task.get("after")
        job = _task_job(task, path)
        check_job_keys(job, schedule_id, f"{path}.job")  # {schedule_id}: the DAG's id
        tasks[name] = DagTask(
            job=job,
            after=()
            if after is None
            else tuple(dict.fromkeys(string_list(after, f"{path}.after"))),
            retry=_retry(task.get("retry"), f"{path}.retry", dag_retry),
            timeout_s=_timeout(task.get("timeout_s"), f"{path}.timeout_s", dag_timeout_s),
        )
    try:
        order = topological_order({name: task.after for name, task in tasks.items()})
    except GraphError as error:
        raise FieldError(str(error)) from None
    max_active = _optional(body, "max_active_runs")
    when = _When(body, schedule_id, now_ms)
    return DagUpsert(
        id=schedule_id,
        spec=when.spec,
        compiled=when.compiled,
        misfire=when.misfire,
        dst=when.dst,
        spread_window_s=when.spread_window_s,
        start_ms=when.start_ms,
        end_ms=when.end_ms,
        tasks=tasks,
        topo_order=order,
        max_active_runs=1
        if max_active is None
        else integer(max_active, "max_active_runs", low=1, high=MAX_ACTIVE_RUNS),
        raw=body,
        deadline=deadline_field(body.get("deadline")),
    )


class _When:
    """The timing fields shared by schedules and DAGs, validated together.

    They depend on each other: ``spec.at`` is judged against ``misfire.grace_s``,
    and the compiled spec takes dst, spread, start and end.
    """

    __slots__ = ("compiled", "dst", "end_ms", "misfire", "spec", "spread_window_s", "start_ms")

    def __init__(self, body: dict[str, Any], schedule_id: str, now_ms: int | None) -> None:
        self.misfire = _misfire(_optional(body, "misfire"))
        self.dst = _dst(_optional(body, "dst"))
        self.spread_window_s = _spread(_optional(body, "spread"))
        start, end = _optional(body, "start"), _optional(body, "end")
        self.start_ms = None if start is None else instant(start, "start")
        self.end_ms = None if end is None else instant(end, "end")
        if self.start_ms is not None and self.end_ms is not None and self.end_ms <= self.start_ms:
            raise FieldError(f"end: {end} is not after start {start}; swap them or drop one")
        if now_ms is not None and self.end_ms is not None and self.end_ms <= now_ms:
            raise FieldError(
                f"end: {end} is already past, so the schedule would never fire; "
                "give a later end or none"
            )
        self.spec = _spec_shape(body.get("spec"))
        if "at" in self.spec:
            _check_at(self.spec["at"], self.misfire.grace_s, now_ms)
        self.compiled = _compile(
            self.spec,
            schedule_id=schedule_id,
            dst=self.dst,
            spread_window_s=self.spread_window_s,
            start_ms=self.start_ms,
            end_ms=self.end_ms,
        )


def _optional(body: Mapping[str, Any], name: str) -> Any:
    """The field's value, None when absent or null (null means "use the default")."""
    return body.get(name)


def _spec_shape(value: Any) -> dict[str, Any]:
    if value is None:
        raise FieldError(f'spec: missing; say when it fires, such as "spec": {_EXAMPLE_SPEC}')
    spec = obj(value, "spec", _EXAMPLE_SPEC)
    check_keys(spec, "spec", _SPEC_KEYS, _SPEC_ALIASES)
    kinds = [kind for kind in _SPEC_KINDS if kind in spec]
    if len(kinds) != 1:
        found = f"got {' and '.join(kinds)}" if kinds else "got none"
        raise FieldError(
            f"spec: give exactly one of {', '.join(_SPEC_KINDS)} ({found}); for example "
            f'{_EXAMPLE_SPEC}, {{"every": "60s"}} or {{"at": "2026-12-04T14:05:00Z"}}'
        )
    return spec


def _check_at(value: Any, grace_s: int, now_ms: int | None) -> None:
    at_ms = instant(value, "spec.at")
    if now_ms is None:
        return
    if at_ms < now_ms - grace_s * 1000:
        late_s = (now_ms - at_ms) // 1000
        late = f"{late_s} s" if late_s < 2 * 86_400 else f"{late_s // 86_400} days"
        raise FieldError(
            f"spec.at: {value} is {late} in the past, beyond misfire.grace_s ({grace_s} s), "
            "so it would never fire; give a future instant (or a larger misfire.grace_s)"
        )
    if at_ms > now_ms + MAX_AT_AHEAD_MS:
        raise FieldError(
            f"spec.at: {value} is more than 10 years ahead; check the year (a one-off "
            "schedule that far out is almost surely a typo)"
        )


def _compile(
    spec: Mapping[str, Any],
    *,
    schedule_id: str,
    dst: Mapping[str, str],
    spread_window_s: int,
    start_ms: int | None,
    end_ms: int | None,
) -> CompiledSpec:
    # The compiler lives a layer up (actors.timespec) and installed itself here.
    compile_spec = spec_compiler.compiler()
    try:
        return compile_spec(
            spec,
            schedule_id=schedule_id,
            dst=dst,
            spread_window_s=spread_window_s,
            start_ms=start_ms,
            end_ms=end_ms,
        )
    except SpecError as error:
        # SpecError messages start with the field path ("spec.cron: ...", "dst.gap: ...").
        message = str(error)
        named = _FIELD_PATH.match(message) is not None
        raise FieldError(message if named else f"spec: {message}") from None


def _job_or_target(body: Mapping[str, Any]) -> Job:
    """The job, or the carrier job of a target (`topics.targets`): exactly one is given."""
    job, target = body.get("job"), body.get("target")
    if job is not None and target is not None:
        raise FieldError(
            "target: a schedule carries either job (a worker runs Python) or target"
            " (a Kafka record or an HTTP call), not both"
        )
    if target is not None:
        name, args = target_job(target)
        return Job(name, args)
    if job is None:
        raise FieldError(
            f'job: missing; say what runs, such as "job": {_EXAMPLE_JOB}, or give a target,'
            ' such as "target": {"kafka": {"topic": "orders.due", "value": {}}}'
        )
    return _job(job, "job")


def _task_job(task: Mapping[str, Any], path: str) -> Job:
    """A DAG task's job or HTTP target (a worker runs both); a Kafka target is refused."""
    try:
        job = _job_or_target(task)
    except FieldError as error:
        raise FieldError(f"{path}.{error}") from None
    if job.name == KAFKA_JOB:
        raise FieldError(
            f"{path}.target: a DAG task's target may be http; a kafka target is for a"
            " schedule (schedule.upsert) in this release"
        )
    return job


def _job(value: Any, path: str) -> Job:
    if value is None:
        raise FieldError(f'{path}: missing; say what runs, such as "job": {_EXAMPLE_JOB}')
    job = obj(value, path, _EXAMPLE_JOB)
    check_keys(job, path, ("name", "args", "queue", "concurrency", "priority", "rate_limit"))
    name = string(job.get("name"), f"{path}.name", max_chars=200)
    if name.startswith(RESERVED_JOB_PREFIX):
        raise FieldError(
            f"{path}.name: {name!r}: job names starting {RESERVED_JOB_PREFIX!r} are kafkron's"
            ' own; to write a Kafka record or call a URL, give "target" instead of "job"'
        )
    args = job.get("args")
    queue = job.get("queue")
    concurrency = job.get("concurrency")
    keyed = None if concurrency is None else check_concurrency(concurrency, f"{path}.concurrency")
    priority = job.get("priority")
    rank = DEFAULT_PRIORITY if priority is None else check_priority(priority, f"{path}.priority")
    if rank and keyed is not None:
        raise FieldError(f"{path}.{PRIORITY_WITH_KEY}")
    rate = job.get("rate_limit")
    rate_limit = None if rate is None else check_rate_limit(rate, f"{path}.rate_limit")
    check_with_concurrency(rate_limit, None if keyed is None else keyed.key)
    if rank and rate_limit is not None:  # a lane of its own would split the key's bucket
        raise FieldError(
            f"{path}.priority: a rate-limited job's runs are placed by their key on one"
            " partition; leave priority out (0) for a job with a rate_limit"
        )
    return Job(
        name,
        {} if args is None else obj(args, f"{path}.args", '{"customer": "c-42"}'),
        DEFAULT_QUEUE if queue is None else check_queue(queue, f"{path}.queue"),
        keyed,
        rank,
        rate_limit,
    )


def _misfire(value: Any) -> MisfirePolicy:
    if value is None:
        return MisfirePolicy()
    misfire = obj(value, "misfire", '{"policy": "run_once", "grace_s": 300}')
    check_keys(misfire, "misfire", ("policy", "grace_s", "catch_up_max"))
    default = MisfirePolicy()
    policy, grace_s, most = (misfire.get(name) for name in ("policy", "grace_s", "catch_up_max"))
    return MisfirePolicy(
        policy=default.policy if policy is None else choice(policy, "misfire.policy", MisfireMode),
        grace_s=default.grace_s
        if grace_s is None
        else integer(grace_s, "misfire.grace_s", low=0, high=MAX_GRACE_S, unit="seconds"),
        catch_up_max=default.catch_up_max
        if most is None
        else integer(most, "misfire.catch_up_max", low=1, high=MAX_CATCH_UP),
    )


def _dst(value: Any) -> dict[str, str]:
    if value is None:
        return dict(DEFAULT_DST)
    dst = obj(value, "dst", '{"gap": "shift", "fold": "once"}')
    check_keys(dst, "dst", ("gap", "fold"))
    gap, fold = dst.get("gap"), dst.get("fold")
    return {
        "gap": DEFAULT_DST["gap"] if gap is None else choice(gap, "dst.gap", DstGap),
        "fold": DEFAULT_DST["fold"] if fold is None else choice(fold, "dst.fold", DstFold),
    }


def _spread(value: Any) -> int:
    if value is None:
        return 0
    spread = obj(value, "spread", '{"window_s": 900}')
    check_keys(spread, "spread", ("window_s",))
    window = spread.get("window_s")
    if window is None:
        return 0
    return integer(window, "spread.window_s", low=0, high=MAX_SPREAD_WINDOW_S, unit="seconds")


def _timeout(value: Any, path: str, default: int) -> int:
    if value is None:
        return default
    return integer(value, path, low=1, high=MAX_TIMEOUT_S, unit="seconds")


def _retry(value: Any, path: str, base: RetryPolicy) -> RetryPolicy:
    """A retry policy; each omitted field falls back to ``base`` (the DAG's, or the default)."""
    if value is None:
        return base
    retry = obj(value, path, '{"max_attempts": 5, "initial_s": 1, "max_interval_s": 100}')
    check_keys(retry, path, RetryPolicy.__dataclass_fields__)
    attempts, initial, coefficient, cap, jitter, non_retryable = (
        retry.get(name)
        for name in (
            "max_attempts",
            "initial_s",
            "coefficient",
            "max_interval_s",
            "jitter",
            "non_retryable",
        )
    )
    initial_s = (
        base.initial_s
        if initial is None
        else number(initial, f"{path}.initial_s", low=0.001, high=86_400, unit="seconds")
    )
    max_interval_s = (
        base.max_interval_s
        if cap is None
        else number(
            cap, f"{path}.max_interval_s", low=0.001, high=MAX_RETRY_INTERVAL_S, unit="seconds"
        )
    )
    if max_interval_s < initial_s:
        raise FieldError(
            f"{path}.max_interval_s: {max_interval_s:g} s is below {path}.initial_s "
            f"({initial_s:g} s); the cap must be at least the first wait"
        )
    return RetryPolicy(
        max_attempts=base.max_attempts
        if attempts is None
        else integer(attempts, f"{path}.max_attempts", low=1, high=MAX_RETRY_ATTEMPTS),
        initial_s=initial_s,
        coefficient=base.coefficient
        if coefficient is None
        else number(coefficient, f"{path}.coefficient", low=1.0, high=100.0),
        max_interval_s=max_interval_s,
        jitter=base.jitter if jitter is None else choice(jitter, f"{path}.jitter", JitterMode),
        non_retryable=base.non_retryable
        if non_retryable is None
        else string_list(non_retryable, f"{path}.non_retryable", max_items=100),
    )
