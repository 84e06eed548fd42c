"""A job object's optional fields, written only when set, so a job that names none keeps
the bytes it always had: one rule for the builders of schedules and of DAG tasks."""

from __future__ import annotations

from typing import Any

from topics.concurrency import Concurrency
from topics.ratelimits import RateLimit


def optional_job_fields(
    queue: str | None,
    concurrency: Concurrency | None,
    priority: int | None,
    rate_limit: RateLimit | None = None,
) -> dict[str, Any]:
    """``queue`` (`topics.queues`), ``concurrency`` (`topics.concurrency`),
    ``priority`` (`topics.priority`; 0 is the default, left out as `Job.wire` does) and
    ``rate_limit`` (`topics.ratelimits`)."""
    found: dict[str, Any] = {}
    if queue is not None:
        found["queue"] = queue
    if concurrency is not None:
        found["concurrency"] = concurrency.wire()
    if priority:
        found["priority"] = priority
    if rate_limit is not None:
        found["rate_limit"] = rate_limit.wire()
    return found
