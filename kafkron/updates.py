"""Changing some fields of a schedule: what `Client.update` sends.

A ``schedule.upsert`` replaces a schedule whole, so an update starts from the
definition its shard keeps in the changelog (`Schedule.definition`, every default
filled in), replaces the fields given and is built and checked by the one builder
of commands (`topics.command_builders.validated`). A part such as ``retry`` replaces
the whole part. A target schedule is kept in the changelog as its carrier job
(`topics.targets`); it is sent back as its ``target``, since a job named
``kafkron.`` is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from kafkron.schedules import Schedule
from topics import command_builders as build
from topics.command_builders import CommandRecord, InvalidCommand
from topics.command_fields import FieldError
from topics.command_parts import (
    HttpTarget,
    KafkaTarget,
    Spec,
    instant_text,
)
from topics.key_templates import RENDERED_MARK
from topics.priority import PRIORITY_WITH_TARGET
from topics.schedule_fields import ScheduleFields, unknown_fields
from topics.targets import HTTP_JOB, KAFKA_JOB

_CARRIERS = {KAFKA_JOB: "kafka", HTTP_JOB: "http"}


def updated(
    current: Schedule,
    *,
    spec: Spec | None = None,
    job: str | None = None,
    **fields: Unpack[ScheduleFields],
) -> CommandRecord:
    """The ``schedule.upsert`` of ``current`` with the fields given replaced (None
    keeps a field); `InvalidCommand` naming the field if the shard would refuse it.

    ``job`` (with ``args``, or the old args) replaces a job or a target; ``target``
    replaces either; ``args`` alone changes a job's arguments.

    Example: ``updated(await client.get_schedule("fx-rates"), spec=Every("10m"))``.
    """
    unknown_fields(fields, "updated")
    if current.kind != "schedule":
        raise InvalidCommand(
            f"id: {current.id!r} is a DAG; change it with upsert_dag (the whole DAG)"
        )
    body = dict(current.definition)
    body.pop(RENDERED_MARK, None)  # the changelog's, not a field of an upsert
    body["spread"] = {"window_s": body.pop("spread_window_s", 0)}
    start, end = fields.get("start"), fields.get("end")
    misfire, dst, retry = fields.get("misfire"), fields.get("dst"), fields.get("retry")
    spread_s = fields.get("spread_s")
    try:
        when = {
            "start": None if start is None else instant_text(start, "start"),
            "end": None if end is None else instant_text(end, "end"),
            "spec": None if spec is None else spec.json(),
        }
    except FieldError as error:
        raise InvalidCommand(str(error)) from None
    changes = {
        **when,
        "misfire": None if misfire is None else misfire.json(),
        "overlap": fields.get("overlap"),
        "dst": None if dst is None else dst.json(),
        "spread": None if spread_s is None else {"window_s": spread_s},
        "retry": None if retry is None else retry.json(),
        "timeout_s": fields.get("timeout_s"),
        "max_runs": fields.get("max_runs"),
        "deadline": None if (deadline := fields.get("deadline")) is None else deadline.wire(),
    }
    body.update({name: value for name, value in changes.items() if value is not None})
    old_job = dict(body.pop("job"))
    body.update(_what_runs(old_job, job, fields.get("args"), fields.get("target")))
    queue = fields.get("queue") or old_job.get("queue")  # a job keeps its queue
    if queue is not None and "job" in body:
        body["job"]["queue"] = queue
    elif fields.get("queue") is not None:
        raise InvalidCommand(build.QUEUE_WITH_TARGET)
    given = fields.get("concurrency")  # a job keeps its concurrency key
    concurrency = given.wire() if given is not None else old_job.get("concurrency")
    if concurrency is not None and "job" in body:
        body["job"]["concurrency"] = concurrency
    elif given is not None:
        raise InvalidCommand(build.CONCURRENCY_WITH_TARGET)
    rank = fields.get("priority")  # a job keeps its priority; 0 sets it back
    priority = rank if rank is not None else old_job.get("priority")
    if priority and "job" in body:
        body["job"]["priority"] = priority
    elif rank and "job" not in body:
        raise InvalidCommand(PRIORITY_WITH_TARGET)
    limit = fields.get("rate_limit")  # and its rate limit
    rate_limit = limit.wire() if limit is not None else old_job.get("rate_limit")
    if rate_limit is not None and "job" in body:
        body["job"]["rate_limit"] = rate_limit
    elif limit is not None:
        raise InvalidCommand(build.RATE_LIMIT_WITH_TARGET)
    return build.validated({"v": 1, "type": "schedule.upsert", "id": current.id, **body})


def _what_runs(
    old: dict[str, Any],
    job: str | None,
    args: Mapping[str, Any] | None,
    target: KafkaTarget | HttpTarget | None,
) -> dict[str, Any]:
    """The ``job`` or ``target`` field of the update."""
    old_args = dict(old.get("args") or {})
    carrier = _CARRIERS.get(old.get("name", ""))
    if target is not None:
        fields: dict[str, Any] = {"target": target.json()}
        if job is not None:  # both: the shard's decoder names the conflict
            fields["job"] = {"name": job, "args": dict(args or {})}
        return fields
    if job is None and carrier is not None:
        if args is not None:
            raise InvalidCommand(
                f"args: the schedule runs a {carrier} target, which takes no args; give"
                " target= to change it, or job= with args= to run a job instead"
            )
        return {"target": {carrier: old_args}}
    if carrier is not None:  # a job instead of the target
        return {"job": {"name": job, "args": dict(args or {})}}
    return {
        "job": {
            "name": old["name"] if job is None else job,
            "args": old_args if args is None else dict(args),
        }
    }
