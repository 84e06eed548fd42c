"""Which topics a namespace's schedulers may write as Kafka targets: the allow-list.

A submitter must not make the scheduler write to any topic it can reach (a confused
deputy, docs/DESIGN.md §5): the schedulers' ``--target-topic`` patterns (a name, or a
prefix ending in ``*``) are the only topics a target may name, kafkron's own
``{ns}.`` topics and Kafka's internal ``__`` ones never.
"""

from __future__ import annotations

import re

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def allowed(topic: str, patterns: tuple[str, ...], own_prefix: str) -> bool:
    if topic.startswith("__") or (own_prefix and topic.startswith(own_prefix)):
        return False
    for pattern in patterns:
        if pattern.endswith("*"):
            if topic.startswith(pattern[:-1]):
                return True
        elif topic == pattern:
            return True
    return False


def refusal_of(topic: str, patterns: tuple[str, ...], own_prefix: str) -> str:
    if topic.startswith("__") or (own_prefix and topic.startswith(own_prefix)):
        return (
            f"target topic {topic}: kafkron's own topics and Kafka's internal ones are never"
            " a target"
        )
    if not patterns:
        return (
            f"target topic {topic} is not allowed: this namespace allows no target topics;"
            " start the schedulers with --target-topic NAME (or PREFIX*), and grant them"
            " Write on it (kafkron acl plan --target-topic)"
        )
    return (
        f"target topic {topic} is not allowed; this namespace allows"
        f" {', '.join(patterns)} (the schedulers' --target-topic)"
    )


def check_pattern(pattern: str) -> str:
    """A ``--target-topic`` pattern if valid, else ValueError saying why."""
    name = pattern[:-1] if pattern.endswith("*") else pattern
    if not name or not _TOPIC.fullmatch(name) or "*" in name:
        raise ValueError(
            f"target topic pattern {pattern!r}: a topic name, or a prefix ending in '*'"
            " (orders.due, orders.*)"
        )
    return pattern
