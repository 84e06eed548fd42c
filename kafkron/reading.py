"""The one consumer of a client, shared by every read it makes.

A client reads three topics: ``{ns}.results`` and ``{ns}.dlq`` while someone waits
for a run or follows results, and ``{ns}.schedules`` (the changelog) whole for a
listing. One ``read_committed`` consumer outside any group serves them all: every
partition of the three is assigned once, paused until needed. A background *pump*
fetches the partitions someone follows and hands each record to every
`Subscription` that wants it; the changelog is read to its end between two of the
pump's fetches. Reads are serialised by one lock, so the consumer is only ever
used by one coroutine at a time; the pump hands records over inside it, so the
handing over must be quick (a subscription only queues or records what it gets).

Subscribers may start at different offsets. The pump seeks a partition back when a
new subscriber starts before where it is, and each subscription keeps its own
cursor per partition, so a record read again is never handed to it twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from actors.history.recorder import partitions_of
from topics.clients import consumer_kwargs
from topics.closing import bounded
from topics.names import Settings, TopicKind

log = logging.getLogger("kafkron.client")

FETCH_WAIT_MS = 200
"""How long one fetch of the pump waits for records (the lock is held meanwhile)."""

Deliver = Callable[[TopicKind, bytes], None]
"""``(topic kind, value)`` of a record a subscription receives."""
Failed = Callable[[BaseException], None]
"""Told once why the pump stopped, so a subscription never waits for nothing."""


class ReadError(Exception):
    """Kafka cannot be read as asked; the message says what to do."""


class Subscription:
    """One reader's share of the pump: its partitions, where it starts, its cursors."""

    __slots__ = ("_cursor", "_deliver", "_kinds", "on_failure")

    def __init__(
        self, starts: dict[TopicPartition, int], deliver: Deliver, kinds: dict[str, TopicKind]
    ) -> None:
        self._cursor = dict(starts)
        self._deliver = deliver
        self._kinds = kinds
        self.on_failure: Failed | None = None

    def offer(self, tp: TopicPartition, offset: int, value: bytes | None) -> None:
        """Hand the record over unless this subscription had it already or never asked."""
        cursor = self._cursor.get(tp)
        if cursor is None or offset < cursor:
            return
        self._cursor[tp] = offset + 1
        if value is not None:
            self._deliver(self._kinds[tp.topic], value)


class Reader:
    """The client's consumer, its pump and its changelog reads."""

    def __init__(self, settings: Settings, client_id: str) -> None:
        self._settings = settings
        self._client_id = client_id
        self._consumer: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()
        self._kinds: dict[str, TopicKind] = {}
        self._partitions: dict[TopicKind, list[int]] = {}
        self._position: dict[TopicPartition, int] = {}  # next offset of a followed partition
        self._subscriptions: list[Subscription] = []
        self._pump: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._failure: BaseException | None = None

    async def start(self) -> None:
        """Connect and assign every partition of results, dlq and schedules, paused."""
        if self._consumer is not None:
            return
        consumer = AIOKafkaConsumer(**consumer_kwargs(self._settings, self._client_id))
        try:
            await consumer.start()
        except KafkaError as exc:
            await bounded(consumer.stop(), "stopping the client's consumer")
            raise ReadError(
                f"cannot reach Kafka at {self._settings.bootstrap} ({exc}); start it with "
                "`kafkron broker start` or set KAFKRON_BOOTSTRAP"
            ) from None
        try:
            tps: list[TopicPartition] = []
            for kind in (TopicKind.RESULTS, TopicKind.DLQ, TopicKind.SCHEDULES):
                topic = self._settings.topic(kind)
                partitions = await partitions_of(consumer, topic)
                if not partitions:
                    raise ReadError(
                        f"topic {topic} does not exist or cannot be read; create the "
                        f"namespace's topics with `KAFKRON_NAMESPACE={self._settings.namespace}"
                        " kafkron topics create`, or check the principal's ACLs"
                    )
                self._kinds[topic] = kind
                self._partitions[kind] = partitions
                tps.extend(TopicPartition(topic, p) for p in partitions)
            consumer.assign(tps)
            consumer.pause(*tps)
        except BaseException:
            await bounded(consumer.stop(), "stopping the client's consumer")
            raise
        self._consumer = consumer

    async def close(self) -> None:
        """Stop the pump and the consumer (bounded: a dead broker never hangs a close)."""
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._pump
            self._pump = None
        if self._consumer is not None:
            await bounded(self._consumer.stop(), "stopping the client's consumer")
            self._consumer = None

    def partition_count(self, kind: TopicKind) -> int:
        """How many partitions the topic of ``kind`` has (after `start`)."""
        return len(self._partitions[kind])

    def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("the client is not started; use `async with Client() as client`")
        if self._failure is not None:
            raise ReadError(f"the client's reader stopped: {self._failure}")
        return self._consumer

    def topic_partition(self, kind: TopicKind, partition: int) -> TopicPartition:
        """The `TopicPartition` of ``kind``'s ``partition``."""
        return TopicPartition(self._settings.topic(kind), partition)

    async def offsets_at(
        self, tps: list[TopicPartition], since_ms: int | None
    ) -> dict[TopicPartition, int]:
        """Per partition, the first offset stamped at or after ``since_ms`` (the end if
        none is, or if ``since_ms`` is None: only what comes next)."""
        consumer = self._started()
        ends: dict[TopicPartition, int] = await consumer.end_offsets(tps)
        if since_ms is None:
            return dict(ends)
        found = await consumer.offsets_for_times(dict.fromkeys(tps, since_ms))
        return {tp: ends[tp] if found[tp] is None else found[tp].offset for tp in tps}

    async def subscribe(
        self, starts: dict[TopicPartition, int], deliver: Deliver, *, on_failure: Failed
    ) -> Subscription:
        """Follow ``starts``' partitions from their offsets; ``deliver`` gets each record,
        ``on_failure`` why the pump stopped if it does."""
        consumer = self._started()
        subscription = Subscription(starts, deliver, self._kinds)
        subscription.on_failure = on_failure
        async with self._lock:
            for tp, start in starts.items():
                position = self._position.get(tp)
                if position is None or start < position:
                    consumer.seek(tp, start)
                    self._position[tp] = start
                if position is None:
                    consumer.resume(tp)
            self._subscriptions.append(subscription)
        if self._pump is None:
            self._pump = asyncio.get_running_loop().create_task(self._run_pump())
        self._wake.set()
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """Stop handing records to ``subscription`` (its partitions stay followed)."""
        with contextlib.suppress(ValueError):
            self._subscriptions.remove(subscription)

    async def _run_pump(self) -> None:
        consumer = self._started()
        try:
            while True:
                if not self._subscriptions:
                    self._wake.clear()
                    await self._wake.wait()
                async with self._lock:
                    followed = list(self._position)
                    batches = await consumer.getmany(*followed, timeout_ms=FETCH_WAIT_MS)
                    # Handed over under the lock: a subscription seeking a partition back
                    # comes between two fetches, never between a fetch and its delivery.
                    for tp, records in batches.items():
                        for record in records:
                            self._position[tp] = record.offset + 1
                            for subscription in list(self._subscriptions):
                                subscription.offer(tp, record.offset, record.value)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # reported to every later read, never lost
            self._failure = exc
            log.warning("the client's reader stopped: %s", exc)
            for subscription in self._subscriptions:
                if subscription.on_failure is not None:
                    subscription.on_failure(exc)
            raise

    async def read_changelog(
        self, partition: int | None = None, timeout_s: float = 60
    ) -> list[tuple[int, int, bytes | None, bytes | None]]:
        """Every committed record of ``{ns}.schedules`` (of one ``partition``, or all) up
        to its end now, as ``(partition, offset, key, value)``, read between two of
        the pump's fetches."""
        consumer = self._started()
        topic = self._settings.topic(TopicKind.SCHEDULES)
        everyone = self._partitions[TopicKind.SCHEDULES]
        tps = [TopicPartition(topic, p) for p in (everyone if partition is None else [partition])]
        out: list[tuple[int, int, bytes | None, bytes | None]] = []
        async with self._lock:
            ends = await consumer.end_offsets(tps)
            begins = await consumer.beginning_offsets(tps)
            remaining = {tp for tp in tps if begins[tp] < ends[tp]}
            for tp in tps:
                consumer.seek(tp, begins[tp])
            consumer.resume(*remaining)
            try:
                async with asyncio.timeout(timeout_s):
                    while remaining:
                        batches = await consumer.getmany(*remaining, timeout_ms=FETCH_WAIT_MS)
                        for tp, records in batches.items():
                            out.extend(
                                (tp.partition, r.offset, r.key, r.value)
                                for r in records
                                if r.offset < ends[tp]
                            )
                        for tp in list(remaining):
                            # A position steps over transaction markers, so it reaches the end.
                            if await consumer.position(tp) >= ends[tp]:
                                remaining.discard(tp)
                                consumer.pause(tp)
            except TimeoutError:
                raise ReadError(
                    f"reading {topic} took longer than {timeout_s:.0f} s; retry"
                ) from None
            finally:
                consumer.pause(*tps)
        return out
