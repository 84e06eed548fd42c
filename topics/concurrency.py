"""Concurrency keys: at most N runs of a key at once, across every schedule that names
it in a namespace (docs/DESIGN.md §8.2).

A job names its key, ``"job": {"name": ..., "concurrency": {"key": "customer-42",
"limit": 1, "strategy": "queue"}}``. The shard writes every run of a key to one
partition of its queue's topic (murmur2 of the key, `key_partition`), so one worker,
the partition's owner, sees all of them and decides alone, in its pure machine
(`actors/worker/keys.py`); the next owner of the partition inherits the key's slots
with the partition (the open runs of the committed offset's metadata).

Strategies, when a run of the key is delivered while ``limit`` of them run:

- ``queue``: it waits (on the worker, in offset order) for a run of the key to end;
- ``cancel_newest``: it ends ``cancelled`` at once, never started;
- ``cancel_in_progress``: the oldest running runs of the key are asked to stop (as by
  a cancel record), and it starts once they have exited.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topics.command_fields import FieldError, check_keys, choice, integer, obj, string
from topics.vocabulary import ConcurrencyStrategy

MAX_KEY_CHARS = 200
MAX_LIMIT = 1000
STRATEGIES = tuple(ConcurrencyStrategy)
DEFAULT_STRATEGY = ConcurrencyStrategy.QUEUE
CONCURRENCY_ERROR = "ConcurrencyLimit"
"""The ``error.type`` of a run ended by ``cancel_newest`` or ``cancel_in_progress``."""

_EXAMPLE = '{"key": "customer-42", "limit": 1, "strategy": "queue"}'


@dataclass(frozen=True, slots=True)
class Concurrency:
    """A job's concurrency key: at most ``limit`` of its runs at once."""

    key: str
    limit: int
    strategy: ConcurrencyStrategy = DEFAULT_STRATEGY

    def wire(self) -> dict[str, Any]:
        """As a command and a run record spell it (a strategy given as text is written
        as given, so the shard's decoder names a wrong one)."""
        return {"key": self.key, "limit": self.limit, "strategy": str(self.strategy)}


def check_concurrency(value: Any, path: str = "concurrency") -> Concurrency:
    """A valid concurrency object; `FieldError` naming the field otherwise."""
    found = obj(value, path, _EXAMPLE)
    check_keys(found, path, ("key", "limit", "strategy"))
    key = string(found.get("key"), f"{path}.key", max_chars=MAX_KEY_CHARS)
    if not key.isprintable():
        raise FieldError(f"{path}.key: control characters are not allowed")
    limit = integer(found.get("limit"), f"{path}.limit", low=1, high=MAX_LIMIT)
    strategy = found.get("strategy")
    return Concurrency(
        key,
        limit,
        DEFAULT_STRATEGY
        if strategy is None
        else choice(strategy, f"{path}.strategy", ConcurrencyStrategy),
    )


def concurrency_of(job: Any) -> Concurrency | None:
    """The concurrency of a job as `Job.wire` wrote it (a changelog's definition)."""
    found = job.get("concurrency")
    if found is None:
        return None
    return Concurrency(found["key"], found["limit"], ConcurrencyStrategy(found["strategy"]))


def parse_concurrency(value: Any, path: str) -> Concurrency | None:
    """The concurrency of a run record's job (None without one); ValueError if bad."""
    if value is None:
        return None
    try:
        return check_concurrency(value, path)
    except FieldError as error:
        raise ValueError(str(error)) from None
