"""`topics.committed`: silence from the group coordinator is an error, -1 is "nothing"."""

from __future__ import annotations

import pytest
from aiokafka import TopicPartition
from aiokafka.structs import OffsetAndMetadata

from topics.committed import CommittedUnknown, committed_from

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
