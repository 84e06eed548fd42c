"""Building commands in Python: one function per command type, validated as the shard validates.

The one way to make a command. The CLI (`kafkron schedule|dag|dlq|run|submit`), the
Python client (`kafkron.Client`), the web console's actions and the demo all build
theirs here. Each builder writes only the fields its caller gave (the rest keep the
defaults documented in `topics.command_types`) and decodes the result with the shard's
own decoder (`topics.commands.decode_command`) before returning it, so a mistake
raises `InvalidCommand` naming the field, at the caller, before anything is sent.

Example::

    command = schedule_upsert("invoice-nightly", Cron("0 0 * * *", tz="Europe/London"),
                              "billing.invoice_nightly", retry=Retry(max_attempts=3))
    producer.send("kafkron.commands", key=command.key, value=command.value)

The decoder compiles specs with the time rules of `actors.timespec`, which install
themselves when `actors` (or `kafkron`) is imported (docs/DESIGN.md §4.2).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Unpack

from topics import codec
from topics.alerts import Deadline
from topics.backfill_commands import BACKFILL_CANCEL_TYPE, BACKFILL_TYPE, RANGES_PER_COMMAND
from topics.command_fields import FieldError
from topics.command_parts import (
    Dst,
    Instant,
    Misfire,
    Retry,
    Spec,
    Task,
    instant_text,
)
from topics.command_types import Command, Rejection
from topics.commands import decode_command
from topics.job_fields import optional_job_fields
from topics.messages import parse_run_id
from topics.priority import PRIORITY_WITH_TARGET
from topics.schedule_fields import ScheduleFields, unknown_fields
from topics.timefmt import format_ms


class InvalidCommand(ValueError):
    """A command the shard would reject; raised by every builder before anything is sent.

    ``field`` is the dotted path of the field at fault (``"spec.cron"``,
    ``"retry.max_attempts"``, ``"tasks.load.after"``; ``"id"``, ``"run_id"``, or
    ``"value"`` for the command as a whole) and ``reason`` the shard's whole sentence,
    the one ``{ns}.rejected`` would carry.

    Example::

        try:
            schedule_upsert("nightly", Cron("0 25 * * *"), "billing.invoice_nightly")
        except InvalidCommand as error:
            print(error.field)   # spec.cron
            print(error.reason)  # spec.cron: hour 25 is out of range ...
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.field = field_of(reason)


def field_of(reason: str) -> str:
    """The field a rejection's reason names: the path before its first ``": "``, less
    any remark in parentheses (``"run_id (the part after '@')"`` names ``run_id``).

    Example: ``field_of("retry.initial_s: must be between 0.001 and 86400")`` is
    ``"retry.initial_s"``.
    """
    head = reason.split(": ", 1)[0]
    return head.split(" (", 1)[0].strip() or "value"


@dataclass(frozen=True, slots=True)
class CommandRecord:
    """A validated command, ready to produce to ``{ns}.commands``: its key and value.

    Example::

        record = schedule_trigger("invoice-nightly")
        record.key    # b"invoice-nightly"
        record.value  # b'{"v":1,"type":"schedule.trigger","id":"invoice-nightly"}'
    """

    id: str
    """The schedule (or DAG) id; its UTF-8 bytes are the record key."""
    type: str
    """The command type, such as ``"schedule.upsert"``."""
    body: Mapping[str, Any]
    """The command object as sent (only the fields given)."""
    value: bytes
    """The record value: ``body`` as JSON."""
    decoded: Command
    """What the shard will make of it (`topics.command_types`), defaults filled in."""

    @property
    def key(self) -> bytes:
        """The record key: the id in UTF-8, so the command reaches the shard owning it."""
        return self.id.encode("utf-8")


def validated(body: Mapping[str, Any], *, now_ms: int | None = None) -> CommandRecord:
    """``body`` (a whole command object) checked by the shard's decoder at ``now_ms``
    (default now); `InvalidCommand` naming the field if the shard would reject it.

    For commands written as JSON (``kafkron submit``, ``kafkron dag upsert FILE``).

    Example::

        validated({"v": 1, "type": "schedule.pause", "id": "invoice-nightly"})
    """
    schedule_id = body.get("id")
    if not isinstance(schedule_id, str) or not schedule_id:
        raise InvalidCommand(
            'id: missing; every command names its schedule, as "id": "invoice-nightly"'
        )
    try:
        value = codec.dumps(body)
    except TypeError as error:
        raise InvalidCommand(
            f"value: cannot be written as JSON ({error}); job.args must hold JSON values only"
        ) from None
    at_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    decoded = decode_command(schedule_id.encode("utf-8"), value, at_ms)
    if isinstance(decoded, Rejection):
        raise InvalidCommand(decoded.reason)
    return CommandRecord(schedule_id, str(body["type"]), dict(body), value, decoded)


def _build(body: dict[str, Any], now_ms: int | None) -> CommandRecord:
    return validated(
        {name: value for name, value in body.items() if value is not None}, now_ms=now_ms
    )


def _timing(
    spec: Spec,
    *,
    misfire: Misfire | None,
    dst: Dst | None,
    spread_s: int | None,
    retry: Retry | None,
    timeout_s: int | None,
    start: Instant | None,
    end: Instant | None,
) -> dict[str, Any]:
    """The fields schedules and DAGs share; a part that cannot be written names its field."""
    try:
        return {
            "spec": spec.json(),
            # An empty part is left out as a part not given is: both mean the defaults.
            "misfire": None if misfire is None else misfire.json() or None,
            "dst": None if dst is None else dst.json() or None,
            "spread": None if spread_s is None else {"window_s": spread_s},
            "retry": None if retry is None else retry.json() or None,
            "timeout_s": timeout_s,
            "start": None if start is None else instant_text(start, "start"),
            "end": None if end is None else instant_text(end, "end"),
        }
    except FieldError as error:
        raise InvalidCommand(str(error)) from None


def schedule_upsert(
    schedule_id: str,
    spec: Spec,
    job: str | None = None,
    *,
    now_ms: int | None = None,
    **fields: Unpack[ScheduleFields],
) -> CommandRecord:
    """``schedule.upsert``: create or replace the schedule ``schedule_id``.

    ``job`` is the registered job name and ``args`` its keyword arguments (a JSON
    object); or, instead of a job, ``target`` (a `KafkaTarget` or `HttpTarget`).
    Every other keyword is a field of the command (`topics.schedule_fields.ScheduleFields`
    says each), left out when None: the shard's default applies.
    ``now_ms`` is the instant the command is judged at (default now: an ``At`` must
    not be past its grace).

    Example::

        schedule_upsert("fx-rates", Every("5m"), "billing.fx_rates",
                        overlap="skip", retry=Retry(max_attempts=3), timeout_s=60)
    """
    unknown_fields(fields, "schedule_upsert")
    target = fields.get("target")
    body = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        **_timing(
            spec,
            misfire=fields.get("misfire"),
            dst=fields.get("dst"),
            spread_s=fields.get("spread_s"),
            retry=fields.get("retry"),
            timeout_s=fields.get("timeout_s"),
            start=fields.get("start"),
            end=fields.get("end"),
        ),
        "overlap": fields.get("overlap"),
        "max_runs": fields.get("max_runs"),
        "deadline": None if (deadline := fields.get("deadline")) is None else deadline.wire(),
    }
    if target is not None:
        body["target"] = target.json()
    if job is not None or target is None:  # neither: the shard's validation names it
        extra = optional_job_fields(
            fields.get("queue"),
            fields.get("concurrency"),
            fields.get("priority"),
            fields.get("rate_limit"),
        )
        body["job"] = {"name": job, "args": dict(fields.get("args") or {}), **extra}
    elif fields.get("queue") is not None:
        raise InvalidCommand(QUEUE_WITH_TARGET)
    elif fields.get("concurrency") is not None:
        raise InvalidCommand(CONCURRENCY_WITH_TARGET)
    elif fields.get("priority"):
        raise InvalidCommand(PRIORITY_WITH_TARGET)
    elif fields.get("rate_limit") is not None:
        raise InvalidCommand(RATE_LIMIT_WITH_TARGET)
    return _build(body, now_ms)


QUEUE_WITH_TARGET = "queue: a queue is a job's (job.queue); a target's runs go to the default queue"
CONCURRENCY_WITH_TARGET = "concurrency: a concurrency key is a job's (job.concurrency)"
RATE_LIMIT_WITH_TARGET = "rate_limit: a rate limit is a job's (job.rate_limit)"


def dag_upsert(
    dag_id: str,
    spec: Spec,
    tasks: Mapping[str, Task],
    *,
    max_active_runs: int | None = None,
    misfire: Misfire | None = None,
    dst: Dst | None = None,
    spread_s: int | None = None,
    retry: Retry | None = None,
    timeout_s: int | None = None,
    start: Instant | None = None,
    end: Instant | None = None,
    deadline: Deadline | None = None,
    now_ms: int | None = None,
) -> CommandRecord:
    """``dag.upsert``: create or replace the DAG ``dag_id``; each occurrence of ``spec``
    starts a DAG run of ``tasks`` (by name, 1 to 1000, without a cycle).

    ``retry`` and ``timeout_s`` are the tasks' defaults; ``max_active_runs`` how many
    DAG runs may be running at once (1 when None); ``deadline`` per task run, from when
    it became ready (docs/DESIGN.md §6.10). The other fields as in `schedule_upsert`.

    Example::

        dag_upsert("nightly-etl", Cron("0 2 * * *"), {
            "extract": Task("etl.extract"),
            "load": Task("etl.load", after=["extract"]),
        })
    """
    body = {
        "v": 1,
        "type": "dag.upsert",
        "id": dag_id,
        **_timing(
            spec,
            misfire=misfire,
            dst=dst,
            spread_s=spread_s,
            retry=retry,
            timeout_s=timeout_s,
            start=start,
            end=end,
        ),
        "tasks": {name: task.json() for name, task in tasks.items()},
        "max_active_runs": max_active_runs,
        "deadline": None if deadline is None else deadline.wire(),
    }
    return _build(body, now_ms)


def schedule_delete(schedule_id: str) -> CommandRecord:
    """``schedule.delete``: forget the schedule (or DAG); its pending retries stop.

    Example: ``schedule_delete("invoice-nightly")``.
    """
    return _build({"v": 1, "type": "schedule.delete", "id": schedule_id}, None)


def schedule_pause(
    schedule_id: str,
    *,
    note: str | None = None,
    until: Instant | timedelta | None = None,
    after_current: bool | None = None,
    by: str | None = None,
    now_ms: int | None = None,
) -> CommandRecord:
    """``schedule.pause``: stop firing. ``note`` says why (``ls`` and the console show
    it, with ``by``); with ``until`` (an instant, or a `timedelta` from now) it
    resumes by itself then, exactly once, and its misfire policy decides about what
    came due meanwhile; otherwise it lasts until `schedule_resume`, and what came due
    is reported ``skipped``. ``after_current``: pause once the run in flight has ended.

    Example: ``schedule_pause("invoice-nightly", note="db migration",
    until=timedelta(hours=2))``.
    """
    if isinstance(until, timedelta):
        base_ms = int(time.time() * 1000) if now_ms is None else now_ms
        until = datetime.fromtimestamp(base_ms / 1000, UTC) + until
    body = {
        "v": 1,
        "type": "schedule.pause",
        "id": schedule_id,
        "note": note,
        "until": None if until is None else instant_text(until, "until"),
        "after_current": after_current,
        "by": by,
    }
    return _build(body, now_ms)


def schedule_resume(schedule_id: str) -> CommandRecord:
    """``schedule.resume``: fire again from the next occurrence after now.

    Example: ``schedule_resume("invoice-nightly")``.
    """
    return _build({"v": 1, "type": "schedule.resume", "id": schedule_id}, None)


def schedule_trigger(schedule_id: str) -> CommandRecord:
    """``schedule.trigger``: fire once now, besides the spec (the overlap policy applies).

    Example: ``schedule_trigger("invoice-nightly")``.
    """
    return _build({"v": 1, "type": "schedule.trigger", "id": schedule_id}, None)


def _schedule_of(run_id: str) -> str:
    try:
        return parse_run_id(run_id)[0]
    except ValueError as error:
        raise InvalidCommand(
            f"run_id: {error}; copy it from a result, `kafkron history` or `kafkron dlq list`"
        ) from None


def dag_clear(run_id: str, task: str) -> CommandRecord:
    """``dag.clear``: run ``task`` of the DAG run ``run_id`` again, and what runs after it.

    Example: ``dag_clear("nightly-etl@2026-10-10T02:00:00.000Z", "load")``.
    """
    body = {"v": 1, "type": "dag.clear", "id": _schedule_of(run_id), "run_id": run_id}
    return _build({**body, "task": task}, None)


def dlq_replay(run_id: str) -> CommandRecord:
    """``dlq.replay``: run a dead-lettered run again under its run id, attempts afresh.

    Example: ``dlq_replay("invoice-nightly@2026-10-10T00:00:00.000Z")``.
    """
    return _build(
        {"v": 1, "type": "dlq.replay", "id": _schedule_of(run_id), "run_id": run_id}, None
    )


def run_cancel(run_id: str, reason: str | None = None) -> CommandRecord:
    """``run.cancel``: stop a run in flight (a DAG task's, or a whole DAG run); its
    attempt ends ``cancelled`` with ``reason`` as the error message, never retried.

    Example: ``run_cancel("invoice-nightly@2026-10-10T00:00:00.000Z", "bad input file")``.
    """
    body = {"v": 1, "type": "run.cancel", "id": _schedule_of(run_id), "run_id": run_id}
    return _build({**body, "reason": reason}, None)


def schedule_backfill(
    schedule_id: str,
    backfill_id: str,
    ranges: list[tuple[int, int, int]] | tuple[tuple[int, int, int], ...],
    max_parallel: int | None = None,
) -> CommandRecord:
    """``schedule.backfill``: fire a planned backfill (docs/DESIGN.md §6.9): ``ranges`` of
    ``(first_ms, last_ms, attempt)``, consecutive occurrences to fire at that attempt,
    at most ``max_parallel`` in flight. Plans come from `kafkron backfill` (or the
    client's ``backfill_plan``); more than `RANGES_PER_COMMAND` ranges need several
    commands (`backfill_commands`).

    Example: ``schedule_backfill("nightly", "fix-oct", [(T1, T2, 1)], max_parallel=4)``.
    """
    body = {
        "v": 1,
        "type": BACKFILL_TYPE,
        "id": schedule_id,
        "backfill_id": backfill_id,
        "ranges": [[format_ms(a), format_ms(b), n] for a, b, n in ranges],
        "max_parallel": max_parallel,
    }
    return _build(body, None)


def backfill_commands(
    schedule_id: str,
    backfill_id: str,
    ranges: list[tuple[int, int, int]],
    max_parallel: int | None = None,
) -> list[CommandRecord]:
    """A plan's ranges as ``schedule.backfill`` commands of at most
    `RANGES_PER_COMMAND` ranges each, in order (the shard appends them)."""
    return [
        schedule_backfill(
            schedule_id, backfill_id, ranges[i : i + RANGES_PER_COMMAND], max_parallel
        )
        for i in range(0, len(ranges), RANGES_PER_COMMAND)
    ]


def backfill_cancel(
    schedule_id: str, backfill_id: str, *, running: bool = False, reason: str | None = None
) -> CommandRecord:
    """``schedule.backfill_cancel``: fire nothing more of the backfill; with ``running``,
    cancel its runs in flight too.

    Example: ``backfill_cancel("nightly", "fix-oct", running=True, reason="wrong input")``.
    """
    body = {
        "v": 1,
        "type": BACKFILL_CANCEL_TYPE,
        "id": schedule_id,
        "backfill_id": backfill_id,
        "running": running or None,
        "reason": reason,
    }
    return _build(body, None)
