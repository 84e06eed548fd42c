"""A deleted target topic stays deleted, even on a broker that creates topics on demand.

The broker here is started for the test with ``auto.create.topics.enable=true``
(Kafka's default; `kafkron broker start` turns it off). The test first shows that
this broker creates a topic a metadata request asks about. Then one scheduler
writes an every-second target into ``due``, and ``due`` is deleted. What must hold:

- ``due`` is not created again (aiokafka's producer asks about every topic it
  writes to, and would have made the broker re-create it, empty, with the broker's
  defaults: `topics.no_auto_create`);
- the occurrences after the deletion end ``failed`` with a dead letter naming the
  topic, and nothing stalls: the scheduler keeps writing results.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import UnknownTopicOrPartitionError
from aiokafka.protocol.metadata import MetadataRequest

from actors.broker import config, process
from actors.broker.layout import BrokerLayout
from actors.views.tail import TailError, read_to_end
from tests.kit.own_broker import free_port_pair
from tests.kit.scheduler import SchedulerProcesses, produce
from topics.admin import create_topics
from topics.clients import transactional_producer_kwargs
from topics.closing import stop_producer
from topics.messages import parse_dlq, parse_result
from topics.names import Settings, TopicKind

pytestmark = [pytest.mark.broker, pytest.mark.slow]


@pytest.fixture(scope="module")
def auto_creating_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bootstrap of a broker of the tests' own that creates topics when asked."""
    data_dir = tmp_path_factory.mktemp("auto-create") / "broker"
    layout = BrokerLayout(port=free_port_pair(), data_dir=data_dir)
    off = "auto.create.topics.enable=false"
    properties = config.server_properties(layout)
    assert off in properties
    pid = process.launch(
        layout, properties.replace(off, "auto.create.topics.enable=true"), process.new_cluster_id()
    )
    try:
        process.wait_until_answering(layout, pid)
        yield layout.bootstrap
    finally:
        process.stop(layout)


async def _records_of(settings: Settings, topic: str) -> list[object]:
    """The topic's records, or none while a fresh client's metadata does not list the
    topic yet (a topic just created is not known to every broker answer at once: on a
    busy machine `read_to_end` then said it did not exist)."""
    try:
        return list(await read_to_end(settings, topic))
    except TailError:
        return []


async def _topics(bootstrap: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def _ask_creating(bootstrap: str, topic: str) -> None:
    """A metadata request that asks the broker to create ``topic`` (aiokafka's own
    request class, as every client without kafkron's rule sends it)."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        node = client.get_random_node()
        await client.send(node, MetadataRequest([topic], allow_auto_topic_creation=True))
    finally:
        await client.close()


@pytest.mark.timeout(300)
async def test_kafkrons_producer_does_not_create_a_topic_by_writing_to_it(
    auto_creating_broker: str,
) -> None:
    # What the shard's producer does when it first writes to a target topic that was
    # deleted since the schedulers last looked (a rebuilt shard, a new owner): its
    # metadata request names the topic. aiokafka's own request would have the broker
    # create it, empty, with the broker's defaults.
    bootstrap = auto_creating_broker
    settings = Settings(namespace=f"t-{uuid.uuid4().hex[:8]}", bootstrap=bootstrap)
    gone = f"{settings.namespace}-out.gone"
    producer = AIOKafkaProducer(
        **transactional_producer_kwargs(settings, "probe", f"{settings.namespace}.probe")
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        with pytest.raises(UnknownTopicOrPartitionError):  # answered "no such topic" at once
            await asyncio.wait_for(producer.send(gone, b"x"), 60)
    finally:
        await stop_producer(producer, "stopping the probe producer")
    assert gone not in await _topics(bootstrap)
    await _ask_creating(bootstrap, gone)  # the same name, asked the other way, is made
    for _ in range(50):
        if gone in await _topics(bootstrap):
            break
        await asyncio.sleep(0.2)
    assert gone in await _topics(bootstrap)


@pytest.mark.timeout(300)
async def test_a_deleted_target_topic_is_not_created_again(
    auto_creating_broker: str, tmp_path: Path
) -> None:
    bootstrap = auto_creating_broker
    settings = Settings(namespace=f"t-{uuid.uuid4().hex[:8]}", bootstrap=bootstrap)
    ns = settings.namespace
    probe, due = f"{ns}-probe", f"{ns}-out.due"
    await _ask_creating(bootstrap, probe)
    for _ in range(50):
        if probe in await _topics(bootstrap):
            break
        await asyncio.sleep(0.2)
    assert probe in await _topics(bootstrap)  # this broker does create on demand
    await create_topics(settings, partitions=1)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(due, 1, 1)])
    finally:
        await admin.close()
    schedulers = SchedulerProcesses(
        settings,
        tmp_path,
        extra_args=("--target-topic", f"{ns}-out.*", "--target-ack-timeout-s", "3"),
    )
    schedulers.start()
    try:
        command = {
            "v": 1,
            "type": "schedule.upsert",
            "id": "ok",
            "spec": {"every": "1s"},
            "target": {"kafka": {"topic": due, "key": "{schedule_id}", "value": {"n": 1}}},
        }
        await produce(settings, [(b"ok", orjson.dumps(command))])
        for _ in range(60):
            if await _records_of(settings, due):
                break
            await asyncio.sleep(1)
        assert await _records_of(settings, due), schedulers.logs()
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.delete_topics([due])
        finally:
            await admin.close()
        await asyncio.sleep(25)
        assert due not in await _topics(bootstrap), schedulers.logs()
    finally:
        schedulers.stop_all()
    assert due not in await _topics(bootstrap)
    results = [
        parse_result(r.value)
        for r in await read_to_end(settings, settings.topic(TopicKind.RESULTS))
        if r.value is not None
    ]
    failed = [r for r in results if r.status == "failed"]
    assert failed, schedulers.logs()
    dead = [
        parse_dlq(r.value)
        for r in await read_to_end(settings, settings.topic(TopicKind.DLQ))
        if r.value is not None
    ]
    assert dead and {d.job.args["topic"] for d in dead} == {due}
    print("after the deletion:", {(r.error or {}).get("message", "")[:100] for r in failed})
