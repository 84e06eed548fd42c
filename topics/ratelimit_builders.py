"""Builders of ``ratelimit.pause`` and ``ratelimit.resume`` (docs/DESIGN.md §8.5),
checked by the shard's own decoder as every builder of `topics.command_builders` is."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from topics.command_builders import CommandRecord, InvalidCommand, validated
from topics.command_fields import FieldError
from topics.command_parts import Instant, instant_text
from topics.ratelimits import RATE_PAUSE_TYPE, RATE_RESUME_TYPE


def ratelimit_pause(
    key: str,
    *,
    until: Instant | timedelta | None = None,
    note: str | None = None,
    by: str | None = None,
    now_ms: int | None = None,
) -> CommandRecord:
    """``ratelimit.pause``: no run of the rate-limit key ``key`` starts, on any worker,
    until ``until`` (an instant, or a `timedelta` from now) or `ratelimit_resume`. The
    runs wait on their workers, visibly; their deadlines still apply. ``note`` says why
    (``kafkron ratelimit ls``, ``ls`` and the console show it, with ``by``).

    Example: ``ratelimit_pause("payments", until=timedelta(minutes=30), note="provider
    maintenance")``.
    """
    base_ms = int(time.time() * 1000) if now_ms is None else now_ms
    if isinstance(until, timedelta):
        until = datetime.fromtimestamp(base_ms / 1000, UTC) + until
    body: dict[str, object] = {"v": 1, "type": RATE_PAUSE_TYPE, "id": key}
    try:
        if until is not None:
            body["until"] = instant_text(until, "until")
    except FieldError as error:
        raise InvalidCommand(str(error)) from None
    if note is not None:
        body["note"] = note
    if by is not None:
        body["by"] = by
    return validated(body, now_ms=base_ms)


def ratelimit_resume(key: str) -> CommandRecord:
    """``ratelimit.resume``: the runs of ``key`` start again, at its rate.

    Example: ``ratelimit_resume("payments")``.
    """
    return validated({"v": 1, "type": RATE_RESUME_TYPE, "id": key})
