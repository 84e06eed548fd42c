"""kafkron's clients never make a broker create a topic by asking about it.

A broker with ``auto.create.topics.enable=true`` (Kafka's default; `kafkron broker
start` turns it off) creates any topic a metadata request names, with its default
partition count and configs, unless the request says not to. aiokafka's client
asks about every topic its producer writes to, at each send to an unknown one and
at each refresh, and its requests say yes. So a Kafka target's topic deleted by its
owner would come back, made by the scheduler, at the next metadata refresh: empty,
with the broker's defaults, and written to as if nothing had happened.

Every client kafkron makes is built from `topics.clients`, which imports this
module: from then on the metadata requests of aiokafka's client in this process say
``allow_auto_topic_creation=false`` (request version 4 and up; every broker kafkron
supports speaks it). A topic asked about that does not exist is answered
UNKNOWN_TOPIC_OR_PARTITION: a target's write to it is not acknowledged, its
occurrences fail (`actors.scheduler.target_acks`), and the schedulers' next look
finds it absent. kafkron creates its own topics explicitly (`topics.admin`).
Tested on a broker that allows auto-creation
(`tests/broker/scheduler/test_kafka_target_auto_create.py`).
"""

from __future__ import annotations

from typing import Any

import aiokafka.client
from aiokafka.protocol.metadata import MetadataRequest


class MetadataRequestNoAutoCreate(MetadataRequest):  # type: ignore[misc]
    """aiokafka's metadata request, never asking the broker to create what it names."""

    def __init__(self, topics: list[str] | None = None, allow_auto_topic_creation: Any = None):
        super().__init__(topics, allow_auto_topic_creation=bool(allow_auto_topic_creation))


def install() -> None:
    """Make aiokafka's client (the module global it builds its requests with) use it."""
    aiokafka.client.MetadataRequest = MetadataRequestNoAutoCreate


install()
