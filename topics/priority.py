"""Priorities within a worker queue (docs/DESIGN.md §8.4).

A job names its priority, ``"job": {"name": ..., "priority": 7}``: an integer from
`MIN_PRIORITY` (0, the default, left out on the wire) to `MAX_PRIORITY` (9), higher
first. A worker starts the highest waiting run first among those it holds.

Runs are consumed in offset order with a bound on open runs per partition
(docs/DESIGN.md §3.3), so a run written behind a herd of 20,000 cannot be seen by
reading ahead. Runs of priority `LANE_MIN_PRIORITY` (5) or more are therefore written
to the queue's *high lane*, a topic of its own, ``{ns}.runs.Q.hi`` (the default
queue's is ``{ns}.runs.default.hi``: ``{ns}.runs.hi`` would be queue ``hi``'s topic),
which a worker started with ``--lanes`` reads beside the queue's topic and starts
first, sharing its slots (`actors.worker.lanes`). Runs of priority 1-4 stay on the
queue's topic and are ordered among what the worker holds.

A shard writes to a lane as to a queue's topic (`lane_placement` names it as a
placement: ``Q.hi``, never a queue name since queue names have no ``.``), so a missing
or refused lane topic takes the queue-refused path, and a cancel follows the attempt
to the lane topic and partition it went to (`Placed`).

A priority and a concurrency key are refused together: a key's runs must all reach
one partition's owner (§8.2), which a run moved to the high lane would not.
"""

from __future__ import annotations

from typing import Any

from topics.command_fields import FieldError, integer

MIN_PRIORITY = 0
MAX_PRIORITY = 9
DEFAULT_PRIORITY = 0
LANE_MIN_PRIORITY = 5
"""Runs of this priority or more go to the queue's high lane."""
LANE_SUFFIX = ".hi"
"""The high lane of queue Q is placement ``Q.hi``, topic ``{ns}.runs.Q.hi``."""

PRIORITY_WITH_TARGET = "priority: a priority is a job's (job.priority); a target's runs have 0"
PRIORITY_WITH_KEY = (
    "priority: a job with a concurrency key keeps priority 0 (its runs must all reach"
    " the one partition that counts the key; a priority would move some to the high"
    " lane); drop one of the two"
)


def check_priority(value: Any, path: str = "priority") -> int:
    """A valid priority; `FieldError` naming ``path`` otherwise."""
    return integer(value, path, low=MIN_PRIORITY, high=MAX_PRIORITY)


def parse_priority(value: Any, path: str) -> int:
    """The priority of a run record's job (0 without one); ValueError if bad."""
    if value is None:
        return DEFAULT_PRIORITY
    try:
        return check_priority(value, path)
    except FieldError as error:
        raise ValueError(str(error)) from None


def in_lane(priority: int) -> bool:
    """Whether a run of ``priority`` goes to its queue's high lane."""
    return priority >= LANE_MIN_PRIORITY


def lane_placement(queue: str) -> str:
    """The placement name of ``queue``'s high lane (`Placed.queue`, `queue_topic`)."""
    return f"{queue}{LANE_SUFFIX}"


def is_lane(placement: str) -> bool:
    return placement.endswith(LANE_SUFFIX)


def queue_of_lane(placement: str) -> str:
    """The queue whose high lane ``placement`` is."""
    return placement[: -len(LANE_SUFFIX)]


def placement_of(queue: str, priority: int) -> str:
    """Where a run of ``queue`` at ``priority`` is written: the queue, or its high lane."""
    return lane_placement(queue) if in_lane(priority) else queue
