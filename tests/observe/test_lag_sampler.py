"""The consumer-lag sampler's reading of the coordinator's answer: no Kafka.

The admin client and the consumer are stand-ins answering what a broker would;
the sampler's own arithmetic and its refusal to guess are what is tested.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.structs import OffsetAndMetadata

from actors.observe.lag import LagSampler
from topics.names import Settings

TOPIC = "t-lag.runs"
TPS = [TopicPartition(TOPIC, p) for p in range(2)]


@dataclass
class _Cluster:
    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0, 1} if topic == TOPIC else set()


@dataclass
class _Client:
    async def fetch_all_metadata(self) -> _Cluster:
        return _Cluster()


@dataclass
class _Consumer:
    _client: _Client = field(default_factory=_Client)

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: 1_000 for tp in tps}

    async def beginning_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: 100 for tp in tps}


@dataclass
class _Response:
    topics: list[tuple[str, list[tuple[int, int, str, int]]]]
    error_code: int = 0


@dataclass
class _Admin:
    """Answers OffsetFetch with ``answer`` (an empty one: the coordinator's silence)."""

    answer: dict[TopicPartition, OffsetAndMetadata]

    async def find_coordinator(self, group_id: str, coordinator_type: int = 0) -> int:
        return 1

    async def _send_request(self, request: Any, node_id: int | None = None) -> _Response:
        parts = [(tp.partition, om.offset, om.metadata, 0) for tp, om in self.answer.items()]
        return _Response([(TOPIC, parts)] if parts else [])


GROUP = "t-lag-workers"


def sampler(answer: dict[TopicPartition, OffsetAndMetadata]) -> LagSampler:
    s = LagSampler(Settings.from_env(namespace="t-lag"), GROUP, [TOPIC])
    s._admin = _Admin(answer)  # type: ignore[assignment]
    s._consumer = _Consumer()  # type: ignore[assignment]
    return s


async def test_lag_counts_from_the_committed_offset_or_the_beginning() -> None:
    s = sampler({TPS[0]: OffsetAndMetadata(990, ""), TPS[1]: OffsetAndMetadata(-1, "")})
    await s.refresh()
    assert s._lag == {(GROUP, TPS[0]): 10, (GROUP, TPS[1]): 900}


async def test_a_coordinator_that_answers_nothing_is_no_sample_not_a_whole_partition_of_lag() -> (
    None
):
    # A coordinator loading its offsets (after a broker died) answers OffsetFetch
    # with a group-level error and no partition. Read as "never committed", every
    # partition would show its whole length as lag: a false alert during failover.
    s = sampler({TPS[0]: OffsetAndMetadata(990, ""), TPS[1]: OffsetAndMetadata(995, "")})
    await s.refresh()
    assert s._lag == {(GROUP, TPS[0]): 10, (GROUP, TPS[1]): 5}
    s._sampled_at = -1e9  # due again
    s._admin = _Admin({})  # type: ignore[assignment]
    await s.refresh()
    assert s._lag == {(GROUP, TPS[0]): 10, (GROUP, TPS[1]): 5}  # the last good sample stands
