"""What crosses the boundary between a pure actor and the Kafka runtime.

An actor is handed `InRecord`s and returns `OutRecord`s; the runtime writes the
returned records (plus the consumed offsets) in one transaction. Nothing in here
touches a socket, so the simulation uses the same types.
"""

from __future__ import annotations

from dataclasses import dataclass

from topics.names import TopicKind


@dataclass(slots=True)  # not frozen: a frozen __init__ costs ~0.5 us per record consumed
class InRecord:
    """A record consumed from one of our topics (treat it as immutable)."""

    topic: TopicKind
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int = 0


@dataclass(slots=True)  # not frozen: a frozen __init__ costs a herd ~1 us per record
class OutRecord:
    """A record an actor asks the runtime to write (treat it as immutable).

    ``value=None`` is a tombstone (compacted changelog deletes). ``partition=None``
    lets the producer's default partitioner (murmur2 of the key) choose, which is
    what every shard-keyed write wants; forwards and changelog writes set it.
    ``timestamp_ms=None`` lets the producer stamp the record when it is written; a
    forwarded command keeps the timestamp its author gave it, because its look-back
    (how far in the past a new schedule's first occurrence may lie) counts from there.
    """

    topic: TopicKind | str
    """One of kafkron's topics, or (a `TargetRecord`'s) a target topic's own name."""
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    timestamp_ms: int | None = None


@dataclass(slots=True)
class TargetRecord(OutRecord):
    """A Kafka target's record (`topics.targets`): ``topic`` is the target topic's own
    name (a ``str``, never a `TopicKind`), ``partition`` is always chosen, and it
    carries headers."""

    headers: tuple[tuple[str, bytes], ...] = ()
