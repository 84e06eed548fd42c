"""The history actor: materialise runs, results, dead letters and rejections into SQLite.

One consumer (group ``{ns}-recorder``, ``read_committed``, so aborted transactions of
a fenced shard or worker never show) reads ``{ns}.runs``, ``{ns}.results``,
``{ns}.dlq``, ``{ns}.rejected`` and ``{ns}.alerts``, the changelog ``{ns}.schedules``
for each schedule's definitions over time (`actors.audit.versions`), and
``{ns}.calendars`` for the named calendars' (`actors.audit.calendars`). Each polled batch
becomes rows, and the rows and the consumer's positions are written in one SQLite
transaction (see `actors.history.store`). On assignment the consumer seeks to the positions the
*database* holds, or to the beginning of a partition the database has never seen;
the offsets it also commits to Kafka are only for people watching the group's lag.

Consequences:

- A crash between the SQLite commit and the Kafka commit redelivers nothing (the
  database positions win); a crash before the SQLite commit re-reads the batch, and
  the upserts make that harmless.
- **Rebuild** is "empty database": `run_recorder(..., rebuild=True)` clears it, and
  every partition is read from the earliest record Kafka still retains (the
  ``dlq`` topic keeps records longest; old runs and results age out with the
  topics' retention).
- A record that cannot be decoded is logged with its position and skipped, never
  retried forever: history is a view, and the topics remain the truth.

One recorder per database. Two recorders in the same group would split the
partitions between two databases, each then seeing half of the history.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

from actors.audit.calendars import CalendarRow, calendar_row
from actors.audit.versions import ChangelogTracker, DefinitionRow, VersionRow
from actors.display import carrier_target, target_text
from actors.history.flow_keys import flow_of
from actors.history.store import (
    AttemptFinished,
    AttemptFired,
    AttemptProgress,
    DeadLetterRow,
    HistoryStore,
    RejectionRow,
    Row,
)
from topics import messages
from topics.alerts import parse_alert
from topics.clients import consumer_kwargs
from topics.closing import bounded
from topics.names import Settings, TopicKind
from topics.priority import LANE_SUFFIX
from topics.queues import QUEUE_NAME_PATTERN, QUEUE_TOPIC_INFIX
from topics.timefmt import parse_instant

log = logging.getLogger("kafkron.recorder")

HISTORY_KINDS: tuple[TopicKind, ...] = (
    TopicKind.RUNS,
    TopicKind.RESULTS,
    TopicKind.DLQ,
    TopicKind.REJECTED,
)

# The recorder also reads the changelog, for each schedule's definitions over time
# (`actors.audit.versions`): the audit judges each instant by the rule then in effect;
# the calendars likewise; and the deadline alerts (`actors.history.alerts`), which the
# console, `kafkron alerts` and `kafkron slo` read from the database, not the topic.
RECORDED_KINDS: tuple[TopicKind, ...] = (
    *HISTORY_KINDS,
    TopicKind.SCHEDULES,
    TopicKind.CALENDARS,
    TopicKind.ALERTS,
)

POLL_TIMEOUT_MS = 500
MAX_BATCH_RECORDS = 2000


def _error_fields(error: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    if not error:
        return None, None
    kind = error.get("type")
    message = error.get("message")
    return (str(kind) if kind is not None else None, str(message) if message is not None else None)


def _written_to(target: Mapping[str, Any] | None) -> str | None:
    """``kafka:TOPIC`` of a Kafka target's result: no run record names its target."""
    kafka = (target or {}).get("kafka")
    return f"kafka:{kafka['topic']}" if isinstance(kafka, Mapping) and "topic" in kafka else None


def to_row(
    kind: TopicKind,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    timestamp_ms: int,
) -> Row | None:
    """The history row of one record; None for a record history ignores (a tombstone,
    a cancel record).

    Raises ``ValueError`` when the value is not a valid message of its topic.
    """
    if value is None:
        return None
    if kind is TopicKind.RUNS:
        if messages.is_cancel(value):  # a request to stop; the attempt's result tells
            return None
        run = messages.parse_run(value)
        flow_key, flow = flow_of(run.job)
        return AttemptFired(
            run_id=run.run_id,
            attempt=run.attempt,
            schedule_id=run.schedule_id,
            task=run.task,
            job_name=run.job.name,
            scheduled_ms=run.scheduled_ms,
            fired_ms=run.fired_ms,
            deadline_ms=run.deadline_ms,
            job_target=target_text(carrier_target(run.job.name, run.job.args)),
            queue=run.job.queue,
            flow_key=flow_key,
            flow=flow,
        )
    if kind is TopicKind.RESULTS:
        result = messages.parse_result(value)
        if result.status == messages.PROGRESS_STATUS:
            progress = result.progress or {}
            at = progress.get("at")
            return AttemptProgress(
                run_id=result.run_id,
                attempt=result.attempt,
                schedule_id=result.schedule_id,
                task=result.task,
                scheduled_ms=result.scheduled_ms,
                started_ms=result.started_ms,
                worker=result.worker,
                details_json=orjson.dumps(progress.get("details")).decode(),
                at_ms=parse_instant(at) if isinstance(at, str) else result.scheduled_ms,
            )
        error_type, error_message = _error_fields(result.error)
        covers = messages.covers_of(result)  # older results: from their message
        return AttemptFinished(
            run_id=result.run_id,
            attempt=result.attempt,
            schedule_id=result.schedule_id,
            task=result.task,
            status=result.status,
            scheduled_ms=result.scheduled_ms,
            started_ms=result.started_ms,
            finished_ms=result.finished_ms,
            worker=result.worker,
            error_type=error_type,
            error_message=error_message,
            covers_to_ms=None if covers is None else covers.to_ms,
            covers_count=None if covers is None else covers.count,
            counts_json=None if result.counts is None else orjson.dumps(result.counts).decode(),
            target_json=None if result.target is None else orjson.dumps(result.target).decode(),
            job_target=_written_to(result.target),
            fired_ms=result.started_ms if _written_to(result.target) else None,
        )
    if kind is TopicKind.DLQ:
        dead = messages.parse_dlq(value)
        error_type, error_message = _error_fields(dead.last_error)
        return DeadLetterRow(
            partition=partition,
            offset=offset,
            run_id=dead.run_id,
            schedule_id=dead.schedule_id,
            task=dead.task,
            job_name=dead.job.name,
            error_type=error_type,
            error_message=error_message,
            attempts=len(dead.attempts),
            dead_at_ms=dead.dead_at_ms,
            job_target=target_text(carrier_target(dead.job.name, dead.job.args)),
        )
    if kind is TopicKind.REJECTED:
        rejected = messages.parse_rejected(value)
        return RejectionRow(
            partition=partition,
            offset=offset,
            key=key,
            reason=rejected.reason,
            original=rejected.original,
            original_topic=rejected.topic,
            original_partition=rejected.partition,
            original_offset=rejected.offset,
            rejected_ms=timestamp_ms,
        )
    if kind is TopicKind.ALERTS:
        return parse_alert(value)
    raise ValueError(f"history does not read topic kind {kind}")


def describe_bytes(data: bytes | None, limit: int = 80) -> str:
    """A short printable form of a record's bytes, for logs and error messages."""
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data[:limit]).decode("ascii")
    return repr(text if len(text) <= limit else text[:limit] + "...")


class RecorderError(Exception):
    """The recorder cannot start; the message says what to do."""


class _SeekToStore(ConsumerRebalanceListener):  # type: ignore[misc]
    """On assignment, resume each partition where the database says (or at the start)."""

    def __init__(self, consumer: AIOKafkaConsumer, store: HistoryStore) -> None:
        self._consumer = consumer
        self._store = store

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        # aiokafka swallows exceptions of listeners; log them so a failure is visible.
        try:
            known = await self._store.offsets()
            fresh: list[TopicPartition] = []
            for tp in assigned:
                next_offset = known.get((tp.topic, tp.partition))
                if next_offset is None:
                    fresh.append(tp)
                else:
                    self._consumer.seek(tp, next_offset)
            if fresh:
                await self._consumer.seek_to_beginning(*fresh)
            log.info(
                "recorder assigned %d partitions (%d from the start)", len(assigned), len(fresh)
            )
        except Exception:
            log.exception("recorder could not position its partitions")
            raise


class Recorder:
    """Feeds a `HistoryStore` from the four history topics until `stop` is set."""

    def __init__(self, settings: Settings, store: HistoryStore) -> None:
        self.settings = settings
        self.store = store
        self._kinds = {settings.topic(kind): kind for kind in RECORDED_KINDS}
        names = "|".join(re.escape(name) for name in self._kinds)
        # Every queue's topic and every high lane's (``{ns}.runs.Q.hi``, §8.4).
        queues = (
            re.escape(f"{settings.namespace}.{QUEUE_TOPIC_INFIX}")
            + QUEUE_NAME_PATTERN
            + f"(?:{re.escape(LANE_SUFFIX)})?"
        )
        self._pattern = f"^({names}|{queues})$"
        self.records_seen = 0
        self.records_skipped = 0

    def _consumer(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            **consumer_kwargs(
                self.settings, f"{self.settings.namespace}-recorder", self.settings.recorder_group
            )
        )

    async def run(self, stop: asyncio.Event) -> None:
        consumer = self._consumer()
        try:
            await consumer.start()
        except KafkaError as exc:
            raise RecorderError(
                f"cannot reach Kafka at {self.settings.bootstrap} ({exc}); start it with "
                "`kafkron broker start` or set KAFKRON_BOOTSTRAP"
            ) from None
        try:
            missing = sorted(set(self._kinds) - await consumer.topics())
            if missing:
                raise RecorderError(
                    f"topics {', '.join(missing)} do not exist; create them with "
                    f"`KAFKRON_NAMESPACE={self.settings.namespace} kafkron topics create`"
                )
            tracker = ChangelogTracker(await self.store.version_heads())
            # A pattern, so a worker queue's runs topic ({ns}.runs.Q) is followed too,
            # also one created while the recorder runs (found at a metadata refresh).
            consumer.subscribe(pattern=self._pattern, listener=_SeekToStore(consumer, self.store))
            written: dict[tuple[str, int], int] = {}
            while not stop.is_set():
                batches = await consumer.getmany(
                    timeout_ms=POLL_TIMEOUT_MS, max_records=MAX_BATCH_RECORDS
                )
                rows: list[Row] = []
                for tp, records in batches.items():
                    kind = self._kinds.get(tp.topic, TopicKind.RUNS)  # else a queue's
                    for record in records:
                        self.records_seen += 1
                        if kind is TopicKind.SCHEDULES:
                            rows.extend(self._versions(tracker, tp, record))
                            continue
                        if kind is TopicKind.CALENDARS:
                            rows.extend(self._calendar(tp, record))
                            continue
                        try:
                            row = to_row(
                                kind,
                                tp.partition,
                                record.offset,
                                record.key,
                                record.value,
                                record.timestamp,
                            )
                        except (ValueError, KeyError, TypeError) as exc:
                            self.records_skipped += 1
                            log.warning(
                                "skipping undecodable record %s[%d]@%d (%s): %s",
                                tp.topic,
                                tp.partition,
                                record.offset,
                                exc,
                                describe_bytes(record.value),
                            )
                            continue
                        if row is not None:
                            rows.append(row)
                # Positions, not last offset + 1: a position also steps over the
                # transaction markers, so "caught up" can compare it with the end.
                positions: dict[tuple[str, int], int] = {}
                for tp in consumer.assignment():
                    position = await consumer.position(tp)
                    if written.get((tp.topic, tp.partition)) != position:
                        positions[(tp.topic, tp.partition)] = position
                if rows or positions:
                    await self.store.write(rows, positions)
                    written.update(positions)
                    await self._commit(consumer, positions)
        finally:
            await bounded(consumer.stop(), "stopping the recorder's consumer")

    def _versions(
        self, tracker: ChangelogTracker, tp: TopicPartition, record: Any
    ) -> list[DefinitionRow | VersionRow]:
        try:
            return tracker.feed(
                tp.partition, record.offset, record.key, record.value, record.timestamp
            )
        except (ValueError, KeyError, TypeError) as exc:
            self.records_skipped += 1
            log.warning(
                "skipping undecodable changelog record %s[%d]@%d (%s): %s",
                tp.topic,
                tp.partition,
                record.offset,
                exc,
                describe_bytes(record.value),
            )
            return []

    def _calendar(self, tp: TopicPartition, record: Any) -> list[CalendarRow]:
        try:
            row = calendar_row(record.offset, record.key, record.value, record.timestamp)
        except (ValueError, KeyError, TypeError) as exc:  # SpecError is a ValueError
            self.records_skipped += 1
            log.warning(
                "skipping undecodable calendar record %s[%d]@%d (%s): %s",
                tp.topic,
                tp.partition,
                record.offset,
                exc,
                describe_bytes(record.value),
            )
            return []
        return [] if row is None else [row]

    async def _commit(
        self, consumer: AIOKafkaConsumer, positions: Mapping[tuple[str, int], int]
    ) -> None:
        if not positions:
            return
        offsets = {TopicPartition(t, p): o for (t, p), o in positions.items()}
        try:
            await consumer.commit(offsets)
        except KafkaError as exc:
            # The database holds the truth; a lost commit only misstates the lag.
            log.info("recorder offset commit skipped (%s)", exc)


async def partitions_of(consumer: AIOKafkaConsumer, topic: str) -> list[int]:
    """The partitions of ``topic`` (empty if it does not exist), fresh from the brokers.

    ``consumer.partitions_for_topic`` only knows topics the consumer already follows,
    so ask for the cluster's metadata the way ``consumer.topics()`` itself does.
    """
    cluster = await consumer._client.fetch_all_metadata()
    return sorted(cluster.partitions_for_topic(topic) or ())


async def end_offsets(settings: Settings) -> dict[tuple[str, int], int]:
    """The read_committed end (last stable offset) of every recorded topic partition."""
    consumer = AIOKafkaConsumer(**consumer_kwargs(settings, f"{settings.namespace}-recorder-ends"))
    await consumer.start()
    try:
        tps = [
            TopicPartition(settings.topic(kind), p)
            for kind in RECORDED_KINDS
            for p in await partitions_of(consumer, settings.topic(kind))
        ]
        ends = await consumer.end_offsets(tps)
        return {(tp.topic, tp.partition): int(offset) for tp, offset in ends.items()}
    finally:
        await bounded(consumer.stop(), "stopping the end-offsets consumer")


async def caught_up(settings: Settings, store: HistoryStore) -> bool:
    """Whether the database has read every history topic to its current end."""
    ends = await end_offsets(settings)
    known = await store.offsets()
    return all(known.get(tp, 0) >= end for tp, end in ends.items() if end > 0)


async def run_recorder(
    settings: Settings, db_path: Path, stop: asyncio.Event, *, rebuild: bool = False
) -> Recorder:
    """Open the database at ``db_path`` and record until ``stop`` is set."""
    store = await HistoryStore.open(db_path, namespace=settings.namespace, reset=rebuild)
    async with store:
        if rebuild:
            log.info("rebuilding %s from the earliest retained records", db_path)
        recorder = Recorder(settings, store)
        await recorder.run(stop)
        return recorder
