"""What a consumer group committed for some partitions: an answer or an error, never a guess.

A new owner starts a partition from its group's committed offset, so "nothing was
committed" must be said by the group coordinator, not inferred from silence.
aiokafka reads committed offsets with OffsetFetch v1-v3 and never looks at the
response's top-level error code, which from v2 on is where the coordinator reports
a group-level error (COORDINATOR_LOAD_IN_PROGRESS while it loads its offsets after
a broker died, NOT_COORDINATOR after the group moved), answering no partition at
all. Its consumer's ``committed()`` then returns None, exactly as for a group that
never committed, and the admin client an empty map. Believed, that sends a
scheduler's shard back to offset 0 of its commands, and made a worker that took a
runs partition over while a broker's disk was being rebuilt run every run of the
partition again, writing a second result for each.

`fetch_committed` asks for named partitions only: the coordinator names each of
them in a good answer (-1 where nothing is committed), so a partition missing from
the answer is the coordinator's silence, raised as `CommittedUnknown` for the caller
to retry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from aiokafka import TopicPartition
from aiokafka.structs import OffsetAndMetadata


class CommittedUnknown(Exception):
    """The group coordinator did not say what is committed (loading, moved): retry."""


class _Admin(Protocol):
    async def list_consumer_group_offsets(
        self, group_id: str, group_coordinator_id: int | None = ..., partitions: Any = ...
    ) -> dict[TopicPartition, OffsetAndMetadata]: ...


def committed_from(
    answer: Mapping[TopicPartition, OffsetAndMetadata], asked: Iterable[TopicPartition]
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """Each asked partition's committed offset, None where the group committed nothing.

    Raises `CommittedUnknown` if the answer leaves an asked partition out.
    """
    asked = list(asked)
    missing = [tp for tp in asked if tp not in answer]
    if missing:
        named = ", ".join(f"{tp.topic}[{tp.partition}]" for tp in missing)
        raise CommittedUnknown(
            f"the group coordinator answered without {named} (a group-level error:"
            " loading its offsets or moved); asking again"
        )
    return {tp: (answer[tp] if answer[tp].offset >= 0 else None) for tp in asked}


async def fetch_committed(
    admin: _Admin, group: str, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The group's committed offsets of ``partitions`` (see `committed_from`)."""
    asked = list(partitions)
    answer = await admin.list_consumer_group_offsets(group, partitions=asked)
    return committed_from(answer, asked)
