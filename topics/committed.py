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

It sends the OffsetFetch request itself and reads both error fields
(`committed_of`): aiokafka's admin client raises a partition's error under the
class of the response's top-level code, ``NoError`` when that is 0, so a partition
refused (TOPIC_AUTHORIZATION_FAILED after an ACL was revoked, UNKNOWN_TOPIC_OR_PARTITION)
came back as an error nobody could recognise, and a group-level refusal
(GROUP_AUTHORIZATION_FAILED) as silence, retried for ever as if the coordinator were
loading. Now the coordinator's transient answers (loading, moved, not available)
are `CommittedUnknown`, and every other error is raised as its own Kafka error class
(an authorization failure is then named as such by `topics.refusals.denied_in`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from aiokafka import TopicPartition
from aiokafka.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
    for_code,
)
from aiokafka.protocol.commit import OffsetFetchRequest
from aiokafka.structs import OffsetAndMetadata

# The coordinator's answers that say "not now": asked again, never believed.
TRANSIENT = (CoordinatorLoadInProgressError, NotCoordinatorError, CoordinatorNotAvailableError)


class CommittedUnknown(Exception):
    """The group coordinator did not say what is committed (loading, moved): retry."""


class _Admin(Protocol):
    async def find_coordinator(self, group_id: str, coordinator_type: int = ...) -> int: ...

    async def _send_request(self, request: Any, node_id: int | None = ...) -> Any: ...


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


def committed_of(
    response: Any, group: str, asked: Iterable[TopicPartition]
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """Each asked partition's committed offset from an OffsetFetch ``response``
    (v1-v3: ``topics``, and from v2 on a top-level ``error_code``), None where the
    group committed nothing. Raises `CommittedUnknown` for the coordinator's
    transient answers and silence, and the Kafka error of any other error code."""
    top = int(getattr(response, "error_code", 0) or 0)
    if top:
        raise _error(top, f"the group coordinator did not say what {group} committed")
    answer: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic, partitions in response.topics:
        for partition, offset, metadata, code in partitions:
            if code:
                raise _error(code, f"what {group} committed on {topic}[{partition}]")
            answer[TopicPartition(topic, partition)] = OffsetAndMetadata(offset, metadata)
    return committed_from(answer, asked)


def _error(code: int, what: str) -> Exception:
    cls: type[KafkaError] = for_code(code)
    if issubclass(cls, TRANSIENT):
        return CommittedUnknown(
            f"{what}: {cls.__name__} (loading its offsets or moved); asking again"
        )
    error: Exception = cls(what)
    return error


async def fetch_committed(
    admin: _Admin, group: str, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The group's committed offsets of ``partitions`` (see `committed_of`)."""
    asked = list(partitions)
    by_topic: dict[str, list[int]] = {}
    for tp in asked:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    coordinator = await admin.find_coordinator(group)
    request = OffsetFetchRequest(group, sorted(by_topic.items()))
    response = await admin._send_request(request, coordinator)
    return committed_of(response, group, asked)
