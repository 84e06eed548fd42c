"""Who leads what: the active KRaft controller and the partition leaders of a cluster.

A metadata response names a "controller", but under KRaft that is any live broker
(clients only need someone to forward admin requests to), not the active
controller. The active controller is the leader of the ``__cluster_metadata``
quorum, which only the DescribeQuorum request (API key 55, KIP-595) reports;
brokers forward it to the quorum. aiokafka has no class for it, so the version-0
request and response are declared here from Kafka's message schema (every field
of version 0, tagged-field sections included, since the API is flexible from
version 0).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass
from typing import Any, TypeAlias

from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.protocol.types import (
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

from actors.broker.probe import quiet_aiokafka
from topics.closing import bounded

METADATA_TOPIC = "__cluster_metadata"
_REPLICA_STATE = (
    ("replica_id", Int32),
    ("log_end_offset", Int64),
    ("tags", TaggedFields),
)


# aiokafka ships no type information: its protocol base classes are Any to mypy.
class DescribeQuorumResponse_v0(Response):  # type: ignore[misc]
    API_KEY = 55
    API_VERSION = 0
    SCHEMA = Schema(
        ("error_code", Int16),
        (
            "topics",
            CompactArray(
                ("topic_name", CompactString("utf-8")),
                (
                    "partitions",
                    CompactArray(
                        ("partition_index", Int32),
                        ("error_code", Int16),
                        ("leader_id", Int32),
                        ("leader_epoch", Int32),
                        ("high_watermark", Int64),
                        ("current_voters", CompactArray(*_REPLICA_STATE)),
                        ("observers", CompactArray(*_REPLICA_STATE)),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class DescribeQuorumRequest_v0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 55
    API_VERSION = 0
    RESPONSE_TYPE = DescribeQuorumResponse_v0
    SCHEMA = Schema(
        (
            "topics",
            CompactArray(
                ("topic_name", CompactString("utf-8")),
                ("partitions", CompactArray(("partition_index", Int32), ("tags", TaggedFields))),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


DescribeQuorumRequestStruct: TypeAlias = DescribeQuorumRequest_v0


class DescribeQuorumRequest(Request[DescribeQuorumRequestStruct]):  # type: ignore[misc]
    API_KEY = 55

    def build(
        self, request_struct_class: type[DescribeQuorumRequestStruct]
    ) -> DescribeQuorumRequestStruct:
        return request_struct_class([(METADATA_TOPIC, [(0, {})], {})], {})


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What one answering broker says about the cluster."""

    brokers: tuple[int, ...]  # node ids registered and not fenced
    active_controller: int | None  # leader of the metadata quorum, None if unknown
    # topic -> partition -> leader node id (-1: no leader right now)
    partition_leaders: dict[str, dict[int, int]]

    def leaders(self, topic: str | None = None) -> Counter[int]:
        """Partitions led per node id, of `topic` or of every topic."""
        counts: Counter[int] = Counter()
        for name, partitions in self.partition_leaders.items():
            if topic is None or name == topic:
                counts.update(leader for leader in partitions.values() if leader >= 0)
        return counts

    @property
    def leaderless(self) -> int:
        """Partitions (every topic) without a leader right now."""
        return sum(
            1
            for partitions in self.partition_leaders.values()
            for x in partitions.values()
            if x < 0
        )


async def describe(bootstrap: str, timeout_s: float = 5.0, **security: Any) -> ClusterView | None:
    """The cluster as `bootstrap` sees it, None if nothing answers within `timeout_s`.

    `security`: aiokafka's keyword arguments for a secure cluster (the admin's).
    """
    client = AIOKafkaClient(
        bootstrap_servers=bootstrap,
        request_timeout_ms=int(timeout_s * 1000),
        client_id="kafkron-status",
        **security,
    )
    with quiet_aiokafka():
        try:
            await asyncio.wait_for(client.bootstrap(), timeout_s)
            known = [b.nodeId for b in client.cluster.brokers()]
            if not known:
                return None
            node = known[0]
            request = MetadataRequest(None, allow_auto_topic_creation=False)
            metadata = (await asyncio.wait_for(client.send(node, request), timeout_s)).to_object()
            controller: int | None = None
            with contextlib.suppress(Exception):
                quorum = await asyncio.wait_for(
                    client.send(node, DescribeQuorumRequest()), timeout_s
                )
                controller = _quorum_leader(quorum)
            brokers = tuple(sorted(int(b["node_id"]) for b in metadata["brokers"]))
            return ClusterView(brokers, controller, _partition_leaders(metadata))
        except Exception:
            return None
        finally:
            # Bounded like every client close (`topics.closing`): a broker that died
            # mid-request must not hang a probe.
            await bounded(client.close(), "the status client", timeout_s)


def _partition_leaders(metadata: dict[str, Any]) -> dict[str, dict[int, int]]:
    return {
        str(topic["topic"]): {int(p["partition"]): int(p["leader"]) for p in topic["partitions"]}
        for topic in metadata["topics"]
    }


def _quorum_leader(response: Any) -> int | None:
    body = response.to_object()
    if body["error_code"] != 0:
        return None
    for topic in body["topics"]:
        for partition in topic["partitions"]:
            if partition["error_code"] == 0 and partition["leader_id"] >= 0:
                return int(partition["leader_id"])
    return None
