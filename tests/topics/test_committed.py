"""`topics.committed`: silence from the group coordinator is an error, -1 is "nothing"."""

from __future__ import annotations

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from aiokafka.structs import OffsetAndMetadata

from topics.committed import CommittedUnknown, committed_from, committed_of
from topics.refusals import denied_in

TP, OTHER = TopicPartition("ns.runs", 0), TopicPartition("ns.runs", 1)


def test_a_committed_offset_is_returned_with_its_metadata() -> None:
    answer = {TP: OffsetAndMetadata(42, "open=44,47")}
    assert committed_from(answer, [TP]) == {TP: OffsetAndMetadata(42, "open=44,47")}


def test_minus_one_for_a_named_partition_is_nothing_committed() -> None:
    answer = {TP: OffsetAndMetadata(42, ""), OTHER: OffsetAndMetadata(-1, "")}
    assert committed_from(answer, [TP, OTHER]) == {TP: OffsetAndMetadata(42, ""), OTHER: None}


def test_an_answer_without_the_partition_is_the_coordinators_silence() -> None:
    # What aiokafka returns for a NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS
    # answer: no partition, the error in a field it never reads.
    with pytest.raises(CommittedUnknown, match=r"without ns\.runs\[0\]"):
        committed_from({}, [TP])
    with pytest.raises(CommittedUnknown, match=r"without ns\.runs\[1\]"):
        committed_from({TP: OffsetAndMetadata(1, "")}, [TP, OTHER])


class _Response:
    """An OffsetFetch v2/v3 response as aiokafka decodes it."""

    def __init__(self, partitions: list[tuple[int, int, str, int]], error_code: int = 0) -> None:
        self.topics = [("ns.runs", partitions)] if partitions else []
        self.error_code = error_code


def test_a_good_answer_names_every_partition_asked() -> None:
    response = _Response([(0, 42, "k1 3", 0), (1, -1, "", 0)])
    assert committed_of(response, "ns-workers", [TP, OTHER]) == {
        TP: OffsetAndMetadata(42, "k1 3"),
        OTHER: None,
    }


def test_a_loading_or_moved_coordinator_is_asked_again() -> None:
    for code in (14, 15, 16):  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
        with pytest.raises(CommittedUnknown, match="asking again"):
            committed_of(_Response([], error_code=code), "ns-workers", [TP])


def test_a_refused_group_is_an_authorization_error_not_silence() -> None:
    # GROUP_AUTHORIZATION_FAILED answers no partition; read as silence it was
    # retried for ever as "loading". Raised as itself, the denial is named.
    with pytest.raises(GroupAuthorizationFailedError) as caught:
        committed_of(_Response([], error_code=30), "ns-workers", [TP])
    assert denied_in(caught.value, "ns") is not None


def test_a_refused_partition_is_raised_as_its_own_error() -> None:
    # aiokafka's admin client raised this under the top-level code's class (NoError).
    with pytest.raises(TopicAuthorizationFailedError):
        committed_of(_Response([(0, -1, "", 29)]), "ns-workers", [TP])
    with pytest.raises(UnknownTopicOrPartitionError):
        committed_of(_Response([(0, -1, "", 3)]), "ns-workers", [TP])
