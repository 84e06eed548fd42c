"""Worker queues: which pool of workers a run goes to (docs/DESIGN.md §8.1).

A job names its queue (``"job": {"name": ..., "queue": "gpu"}``); without one it is
in `DEFAULT_QUEUE`. The default queue's runs go to ``{ns}.runs`` as they always
did, so nothing changes for a namespace that names no queue. Queue Q's runs go to
``{ns}.runs.Q``, which an operator creates (``kafkron topics create --queue Q``)
and which only the workers started with ``--queue Q`` read, as consumer group
``{ns}-workers.Q``, committing with transactional ids ``{ns}.worker.Q.{p}``.

A queue name is 1-`MAX_QUEUE_CHARS` letters, digits, ``_`` or ``-``: no ``.``, so
the transactional ids of queue Q (``{ns}.worker.Q.{p}``, two parts after
``worker.``) can never be those of the default queue (``{ns}.worker.{p}``, one
part) nor of another queue, and ``{ns}.runs.Q`` is a Kafka topic name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from topics.command_fields import FieldError, describe, string
from topics.priority import LANE_SUFFIX

DEFAULT_QUEUE = "default"
MAX_QUEUE_CHARS = 100
QUEUE_NAME_PATTERN = r"[A-Za-z0-9_-]{1,100}"
_QUEUE = re.compile(f"^{QUEUE_NAME_PATTERN}$")
QUEUE_TOPIC_INFIX = "runs."
"""Queue Q's topic is ``{ns}.runs.Q``: ``{ns}.`` + this + Q."""


def check_queue(value: object, path: str = "queue") -> str:
    """A valid queue name; `FieldError` naming ``path`` otherwise."""
    name = string(value, path, max_chars=MAX_QUEUE_CHARS)
    if not _QUEUE.fullmatch(name):
        raise FieldError(
            f"{path}: {describe(name)} is not a queue name (1-{MAX_QUEUE_CHARS} letters,"
            " digits, '_' or '-'; no '.')"
        )
    return name


def queue_topic(namespace: str, queue: str) -> str:
    """The topic of ``queue``'s runs: ``{ns}.runs`` for the default queue; also the topic
    of a high lane's placement ``Q.hi`` (``{ns}.runs.Q.hi``, `topics.priority`)."""
    if queue == DEFAULT_QUEUE:
        return f"{namespace}.runs"
    return f"{namespace}.{QUEUE_TOPIC_INFIX}{queue}"


def queue_of_topic(namespace: str, topic: str) -> str | None:
    """The queue whose runs ``topic`` carries, or None if it is no runs topic of ours."""
    if topic == f"{namespace}.runs":
        return DEFAULT_QUEUE
    prefix = f"{namespace}.{QUEUE_TOPIC_INFIX}"
    if topic.startswith(prefix) and _QUEUE.fullmatch(topic[len(prefix) :]):
        name = topic[len(prefix) :]
        return None if name == DEFAULT_QUEUE else name
    return None


def queue_topics_in(namespace: str, topics: Iterable[str]) -> list[str]:
    """The (non-default) queue topics of ``namespace`` among ``topics``."""
    return [t for t in topics if queue_of_topic(namespace, t) not in (None, DEFAULT_QUEUE)]


def placement_of_topic(namespace: str, topic: str) -> str | None:
    """Where runs go that ``topic`` carries: a queue (`queue_of_topic`) or a queue's high
    lane (``Q.hi``, `topics.priority`); None if it is no runs topic of ours."""
    queue = queue_of_topic(namespace, topic)
    if queue is not None:
        return queue
    prefix = f"{namespace}.{QUEUE_TOPIC_INFIX}"
    if topic.startswith(prefix) and topic.endswith(LANE_SUFFIX):
        name = topic[len(prefix) : -len(LANE_SUFFIX)]
        if _QUEUE.fullmatch(name):
            return f"{name}{LANE_SUFFIX}"
    return None


def placed_topics_in(namespace: str, topics: Iterable[str]) -> list[str]:
    """The queue topics and high lane topics of ``namespace`` among ``topics`` (every
    runs topic but ``{ns}.runs``): the topics a shard writes by partition."""
    return [t for t in topics if placement_of_topic(namespace, t) not in (None, DEFAULT_QUEUE)]


def with_lanes(queues: list[str], lanes: bool) -> list[str]:
    """``queues``, and with ``lanes`` the default queue (when none is named) and the high
    lane placements (``Q.hi``, `topics.priority`) of each: what ``--lanes`` adds to a
    command's ``--queue`` list (docs/DESIGN.md §8.4)."""
    if not lanes:
        return queues
    named = list(dict.fromkeys(queues or [DEFAULT_QUEUE]))
    return [*named, *(f"{q}{LANE_SUFFIX}" for q in named)]
