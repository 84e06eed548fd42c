"""Consumer lag of a consumer group, sampled from the broker at scrape time.

Lag of a partition = its read_committed end offset (the last stable offset) minus
the offset the group committed there (its beginning offset when the group never
committed): the records the group still has to handle. It is measured the way
Kafka's own ``kafka-consumer-groups --describe`` does, from the broker, not from
the process's fetch position, so a partition nobody owns still shows its lag
growing (what an alert wants), and every member of a group reports the same
figure (aggregate with ``max by (group, topic, partition)``).

One wart: a transactional writer's commit marker takes an offset of its own
after the last record, and the group's committed offset never covers it, so a
caught-up partition of ``runs`` or ``results`` shows a lag of 1 or so.

A sample is two requests (the group's offsets, the topics' ends) and is kept
`MIN_INTERVAL_S`, so frequent scrapes do not load the broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from actors.observe import metrics as m
from topics.clients import admin_kwargs, consumer_kwargs
from topics.closing import bounded, within
from topics.committed import fetch_committed
from topics.names import Settings

log = logging.getLogger("kafkron.metrics")

MIN_INTERVAL_S = 5.0
SAMPLE_TIMEOUT_S = 5.0


class Sampler(Protocol):
    """What `actors.observe.exposition.serve_metrics` asks of a sampler: fresh figures
    before a scrape, its families at the scrape, its clients closed at the end."""

    async def refresh(self) -> None: ...
    def collect(self) -> Iterable[Metric]: ...
    async def close(self) -> None: ...


class LagSampler(Collector):
    """``kafkron_consumer_lag_records{group, topic, partition}`` of one group's topics."""

    def __init__(
        self,
        settings: Settings,
        group: str,
        topics: Sequence[str],
        more: Sequence[tuple[str, Sequence[str]]] = (),
    ) -> None:
        """``more``: further (group, topics) sampled the same way (a worker serving
        several queues has one group per queue; one family must list them all)."""
        self._settings = settings
        self._group = group
        self._groups = ((group, tuple(topics)), *((g, tuple(t)) for g, t in more))
        self._admin: AIOKafkaAdminClient | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._lag: dict[tuple[str, TopicPartition], int] = {}
        self._sampled_at = -MIN_INTERVAL_S
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        """Sample again if the last sample is older than `MIN_INTERVAL_S`."""
        async with self._lock:
            if time.monotonic() - self._sampled_at < MIN_INTERVAL_S:
                return
            try:
                self._lag = await within(self._sample(), SAMPLE_TIMEOUT_S)  # a scrape never hangs
            except Exception as exc:  # a scrape still answers, without fresh lag
                m.CONSUMER_LAG_SAMPLE_ERRORS.inc()
                log.debug("consumer lag of %s not sampled: %s", self._group, exc)
                return
            self._sampled_at = time.monotonic()

    async def _sample(self) -> dict[tuple[str, TopicPartition], int]:
        if self._admin is None or self._consumer is None:
            admin = AIOKafkaAdminClient(**admin_kwargs(self._settings, f"{self._group}-lag"))
            consumer = AIOKafkaConsumer(**consumer_kwargs(self._settings, f"{self._group}-lag"))
            await admin.start()
            try:
                await consumer.start()
            except BaseException:
                await bounded(admin.close(), "closing the lag sampler's admin client")
                raise
            self._admin, self._consumer = admin, consumer
        cluster = await self._consumer._client.fetch_all_metadata()
        lag: dict[tuple[str, TopicPartition], int] = {}
        for group, topics in self._groups:
            tps = [
                TopicPartition(topic, p)
                for topic in topics
                for p in sorted(cluster.partitions_for_topic(topic) or ())
            ]
            if not tps:
                continue
            # Named partitions, so a coordinator that answers nothing (loading its
            # offsets, moved) raises rather than reading as "never committed": that
            # would report each partition's whole length as lag, a false alert.
            committed = await fetch_committed(self._admin, group, tps)
            ends = await self._consumer.end_offsets(tps)
            begins = await self._consumer.beginning_offsets(tps)
            for tp in tps:
                done = committed[tp]
                position = begins[tp] if done is None else done.offset
                lag[group, tp] = max(0, ends[tp] - position)
        return lag

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            m.CONSUMER_LAG,
            "Records of a partition the consumer group has not committed yet"
            " (read_committed end offset minus committed offset).",
            labels=["group", "topic", "partition"],
        )
        for (group, tp), lag in sorted(self._lag.items()):
            family.add_metric([group, tp.topic, str(tp.partition)], lag)
        yield family

    async def close(self) -> None:
        admin, consumer, self._admin, self._consumer = self._admin, self._consumer, None, None
        if consumer is not None:
            await bounded(consumer.stop(), "stopping the lag sampler's consumer")
        if admin is not None:
            await bounded(admin.close(), "closing the lag sampler's admin client")
