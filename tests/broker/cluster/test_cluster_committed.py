"""Committed offsets on the three-node cluster: a group-level error is not "nothing committed".

A node that is not the group's coordinator answers OffsetFetch with NOT_COORDINATOR
in the response's top-level error code and no partition at all, as a coordinator
still loading its offsets answers COORDINATOR_LOAD_IN_PROGRESS. aiokafka ignores
that code and returns an empty map (its consumer's ``committed()``: None), which
reads exactly like a group that never committed. A worker believed it during the
lost-disk test and ran a whole runs partition again. `topics.committed` refuses it.
"""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import NewTopic
from aiokafka.protocol.commit import OffsetFetchRequest

from tests.kit.cluster import Cluster
from topics.admin import admin_client
from topics.committed import CommittedUnknown, committed_from, committed_of, fetch_committed

pytestmark = [pytest.mark.broker, pytest.mark.cluster]


async def test_a_node_that_is_not_the_coordinator_answers_nothing_and_that_is_refused(
    cluster: Cluster,
) -> None:
    settings = await cluster.healthy_namespace()
    group, topic = f"{settings.namespace}-group", f"{settings.namespace}.offsets"
    tp, never = TopicPartition(topic, 0), TopicPartition(topic, 1)
    async with admin_client(settings) as admin:
        await admin.create_topics([NewTopic(topic, 2, 3)])
        consumer = AIOKafkaConsumer(
            bootstrap_servers=settings.bootstrap, group_id=group, enable_auto_commit=False
        )
        await consumer.start()
        try:
            consumer.assign([tp, never])
            await consumer.commit({tp: 42})
        finally:
            await consumer.stop()
        coordinator = await admin.find_coordinator(group)
        brokers = [b["node_id"] for b in (await admin.describe_cluster())["brokers"]]
        other = next(b for b in brokers if b != coordinator)

        # The coordinator names both partitions: 42 for one, -1 (nothing) for the other.
        answered = await fetch_committed(admin, group, [tp, never])
        assert answered[never] is None
        found = answered[tp]
        assert found is not None and found.offset == 42
        # Another node: NOT_COORDINATOR at the top level, no partition. aiokafka hands
        # back an empty map, which would have read as "nothing committed".
        silent = await admin.list_consumer_group_offsets(
            group, group_coordinator_id=other, partitions=[tp, never]
        )
        assert silent == {}
        with pytest.raises(CommittedUnknown, match="without"):
            committed_from(silent, [tp, never])
        # Read whole, the answer says why: NOT_COORDINATOR, asked again.
        request = OffsetFetchRequest(group, [(topic, [0, 1])])
        response = await admin._send_request(request, other)
        with pytest.raises(CommittedUnknown, match="NotCoordinator"):
            committed_of(response, group, [tp, never])
        await admin.delete_topics([topic])
