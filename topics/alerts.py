"""Deadlines and the ``{ns}.alerts`` records they raise (docs/DESIGN.md §2.9, §6.10).

A schedule may promise when its runs start and end, counted from each run's
scheduled instant::

    "deadline": {"start_within_s": 5, "finish_within_s": 600}

(either or both). The shard that owns the run writes one ``deadline_missed``
record per run and deadline it broke, in its own transaction, and one
``deadline_recovered`` record when what it waited for finally happens (the late
start, the late end), with how late it was then::

    {"v": 1, "type": "deadline_missed", "deadline": "start",
     "run_id": "etl@2026-10-10T00:00:00.000Z", "schedule_id": "etl", "task": null,
     "scheduled_at": "2026-10-10T00:00:00.000Z", "due_at": "2026-10-10T00:00:05.000Z",
     "attempt": 1, "late_by_ms": 7012, "observed_at": null, "at": "..."}

``late_by_ms`` is how far past ``due_at`` the run was when the record was decided;
``observed_at`` is the start (a start deadline's record) or the end (a finish
deadline's) it was decided from, null when it was decided by silence. A
``deadline_recovered`` record whose ``late_by_ms`` is 0 or less says the run was in
time after all and only its report came late (`DEADLINE_REPORT_GRACE_MS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from topics.command_fields import FieldError, check_keys, integer, obj
from topics.timefmt import format_ms, parse_instant

# A promise longer than a month is a retention question, not a deadline.
MAX_WITHIN_S = 31 * 24 * 3600

# How long after a deadline the shard waits for the report of a start or an end
# before it decides by silence: a worker's start report rides its next commit, and a
# new owner of the shard reads the results written while it had none. A report
# later than this makes an alert for a run that was in time, which its
# ``deadline_recovered`` record (``late_by_ms`` <= 0) then says.
DEADLINE_REPORT_GRACE_MS = 5_000

_EXAMPLE = '{"start_within_s": 5, "finish_within_s": 600}'
_KEYS = ("start_within_s", "finish_within_s")


class DeadlineKind(StrEnum):
    START = "start"
    FINISH = "finish"


class AlertType(StrEnum):
    MISSED = "deadline_missed"
    RECOVERED = "deadline_recovered"


@dataclass(frozen=True, slots=True)
class Deadline:
    """A schedule's deadlines in seconds after each run's scheduled instant."""

    start_within_s: int | None
    finish_within_s: int | None

    def wire(self) -> dict[str, int]:
        found: dict[str, int] = {}
        if self.start_within_s is not None:
            found["start_within_s"] = self.start_within_s
        if self.finish_within_s is not None:
            found["finish_within_s"] = self.finish_within_s
        return found


def deadline_field(value: Any, path: str = "deadline") -> Deadline | None:
    """The ``deadline`` field of a command; null is none. `FieldError` names the part."""
    if value is None:
        return None
    body = obj(value, path, _EXAMPLE)
    check_keys(body, path, _KEYS)
    parts = [
        None
        if body.get(name) is None
        else integer(body[name], f"{path}.{name}", low=1, high=MAX_WITHIN_S, unit="seconds")
        for name in _KEYS
    ]
    start, finish = parts
    if start is None and finish is None:
        raise FieldError(
            f"{path}: give start_within_s, finish_within_s or both; example: {_EXAMPLE}"
        )
    if start is not None and finish is not None and finish < start:
        raise FieldError(
            f"{path}: finish_within_s ({finish}) is before start_within_s ({start}); a run "
            "cannot end before it starts"
        )
    return Deadline(start, finish)


@dataclass(frozen=True, slots=True)
class Alert:
    """One ``{ns}.alerts`` record."""

    type: AlertType
    deadline: DeadlineKind
    run_id: str
    schedule_id: str
    task: str | None
    scheduled_ms: int
    due_ms: int
    attempt: int
    late_by_ms: int
    at_ms: int
    """When the shard decided it."""
    seen_ms: int | None
    """The start (or end) it was decided from; None when decided by silence."""


def alert_value(alert: Alert) -> bytes:
    """The ``{ns}.alerts`` value of ``alert``."""
    record: dict[str, Any] = {
        "v": 1,
        "type": alert.type.value,
        "deadline": alert.deadline.value,
        "run_id": alert.run_id,
        "schedule_id": alert.schedule_id,
        "task": alert.task,
        "scheduled_at": format_ms(alert.scheduled_ms),
        "due_at": format_ms(alert.due_ms),
        "attempt": alert.attempt,
        "late_by_ms": alert.late_by_ms,
        "observed_at": None if alert.seen_ms is None else format_ms(alert.seen_ms),
        "at": format_ms(alert.at_ms),
    }
    return orjson.dumps(record)


def parse_alert(value: bytes) -> Alert:
    """The alert in ``value``; ``ValueError`` naming the field if it is not one."""
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError as error:
        raise ValueError(f"alert: not JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError('alert: expected a JSON object with "v": 1')
    version = data.get("v")
    if type(version) is not int or version != 1:
        raise ValueError(f"alert.v: expected 1, got {version!r}")
    try:
        kind = DeadlineKind(data["deadline"])
        seen = data["observed_at"]
        task = data.get("task")
        fields = (data["run_id"], data["schedule_id"], data["attempt"], data["late_by_ms"])
        if not (
            isinstance(fields[0], str)
            and isinstance(fields[1], str)
            and all(type(n) is int for n in fields[2:])
            and (task is None or isinstance(task, str))
        ):
            raise ValueError("run_id, schedule_id, attempt, late_by_ms or task has a wrong type")
        return Alert(
            type=AlertType(data["type"]),
            deadline=kind,
            run_id=fields[0],
            schedule_id=fields[1],
            task=task,
            scheduled_ms=parse_instant(data["scheduled_at"]),
            due_ms=parse_instant(data["due_at"]),
            attempt=fields[2],
            late_by_ms=fields[3],
            at_ms=parse_instant(data["at"]),
            seen_ms=None if seen is None else parse_instant(seen),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"alert: {error}") from None
