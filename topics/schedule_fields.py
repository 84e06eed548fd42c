"""The keyword fields of a schedule, typed once for every Python surface that takes them.

`topics.command_builders.schedule_upsert`, `kafkron.updates.updated`,
`kafkron.Client.create_schedule` / `update` and their `SyncClient` twins all take
these as keyword arguments (``**fields: Unpack[ScheduleFields]``), so a field added
to the command is added here and in the builder's body, not in five signatures, and a
type checker still checks every keyword a caller writes. None (or leaving a field
out) keeps the shard's default, or, in an update, the schedule's current value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from topics.alerts import Deadline
from topics.command_parts import (
    Dst,
    HttpTarget,
    Instant,
    KafkaTarget,
    Misfire,
    OverlapName,
    Retry,
)
from topics.concurrency import Concurrency
from topics.ratelimits import RateLimit


class ScheduleFields(TypedDict, total=False):
    """A schedule's fields besides its id, spec and job name (all optional).

    - ``args``: the job's keyword arguments (a JSON object).
    - ``target``: instead of a job, a `KafkaTarget` the shard writes or an
      `HttpTarget` a worker calls.
    - ``misfire``, ``overlap``, ``dst``: the policies (`Misfire`, an overlap name,
      `Dst`).
    - ``spread_s``: the spread window in seconds (a herd is smeared across it).
    - ``retry``: the `Retry` policy; ``timeout_s``: an attempt's limit in seconds.
    - ``start``, ``end``: no occurrence before or after (an aware `datetime` or
      RFC 3339 text).
    - ``max_runs``: at most that many runs ever start, triggers included; then the
      schedule is completed.
    - ``queue``: the worker queue of the job's runs (`topics.queues`; the default
      queue when None): only workers started with ``--queue NAME`` take them.
    - ``concurrency``: the job's concurrency key (`Concurrency`: key, limit,
      strategy): at most ``limit`` runs of the key at once, across every schedule
      naming it (docs/DESIGN.md §8.2).
    - ``priority``: 0-9 (0 when None), higher first within the job's queue; 5 and
      above go to the queue's high lane (docs/DESIGN.md §8.4).
    - ``rate_limit``: the job's rate limit (`RateLimit`: key, per_s, burst): at most
      ``per_s`` starts a second of the key's runs, across every schedule naming it and
      every worker (docs/DESIGN.md §8.5).
    - ``deadline``: a `Deadline` (``start_within_s``, ``finish_within_s`` after each
      run's instant); a run that breaks one gets a ``deadline_missed`` alert.
    """

    args: Mapping[str, Any] | None
    target: KafkaTarget | HttpTarget | None
    misfire: Misfire | None
    overlap: OverlapName | None
    dst: Dst | None
    spread_s: int | None
    retry: Retry | None
    timeout_s: int | None
    start: Instant | None
    end: Instant | None
    max_runs: int | None
    queue: str | None
    concurrency: Concurrency | None
    priority: int | None
    rate_limit: RateLimit | None
    deadline: Deadline | None


FIELD_NAMES = frozenset(ScheduleFields.__optional_keys__)


def unknown_fields(given: Mapping[str, Any], where: str) -> None:
    """Raise `TypeError` for a keyword that is not a schedule field, as a plain
    signature would (a typo must not be dropped silently)."""
    unknown = sorted(set(given) - FIELD_NAMES)
    if unknown:
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}")
