"""Kafka targets on a real broker: the target topic, its progress, and the simulation's checker.

The chaos tests (single node and cluster) judge a target topic with the very checker
of the simulation (`simulation.checkers.target_once`), over evidence read the way
`check_runs` reads the namespace's topics: the target topic is read to its end by a
read_committed consumer, each record with its headers and its timestamp. The topic
is created with ``message.timestamp.type=LogAppendTime``, so "early" is judged by the
broker's clock, as the runs topic's is.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from actors.views.tail import read_to_end
from simulation.checkers import exactly_once, nothing_missed, target_once
from simulation.checkers.evidence import Verdict, of_topics
from simulation.checkers.target_records import REQUIRED_HEADERS, deliveries
from simulation.targets import TargetSeen
from tests.kit.scheduler import Progress, read_topic_evidence
from topics.names import Settings, TopicKind
from topics.targets import SCHEDULE_ID_HEADER, SCHEDULED_AT_HEADER
from topics.timefmt import parse_instant
from topics.vocabulary import RunStatus


def target_upsert(schedule_id: str, topic: str, *, keyed: bool) -> bytes:
    """A ``schedule.upsert`` firing every second to ``topic`` (keyed by the schedule id,
    or keyless: the shard then hashes the run id)."""
    kafka: dict[str, Any] = {"topic": topic, "value": {"order": "{schedule_id}"}}
    if keyed:
        kafka["key"] = "{schedule_id}"
    return orjson.dumps(
        {
            "v": 1,
            "type": "schedule.upsert",
            "id": schedule_id,
            "spec": {"every": "1s"},
            "target": {"kafka": kafka},
            # Every occurrence of the window fires, however late (none reported missed).
            "misfire": {"policy": "run_once", "grace_s": 300},
        }
    )


async def create_target_topic(
    settings: Settings,
    topic: str,
    partitions: int,
    replication_factor: int = 1,
    replicas: list[int] | None = None,
) -> None:
    """``replicas``: one partition on these nodes, the first its preferred leader."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        config = {"message.timestamp.type": "LogAppendTime"}
        if replication_factor >= 3:  # the cluster's contract, as kafkron's own topics have
            config["min.insync.replicas"] = "2"
        if replicas is not None:
            new = NewTopic(topic, -1, -1, {0: replicas}, config)
        else:
            new = NewTopic(topic, partitions, replication_factor, None, config)
        await admin.create_topics([new])
    finally:
        await admin.close()


@contextlib.asynccontextmanager
async def target_progress(settings: Settings, topic: str) -> AsyncIterator[Progress]:
    """The latest scheduled instant seen per schedule on the target topic (read_committed)."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=settings.bootstrap,
        group_id=None,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    progress = Progress()

    async def loop() -> None:
        while True:
            try:
                batch = await consumer.getmany(timeout_ms=500, max_records=5000)
            except asyncio.CancelledError:
                raise
            except Exception:  # a broker restart: read on once it is back
                await asyncio.sleep(1)
                continue
            latest = progress.latest_ms
            for records in batch.values():
                for record in records:
                    headers = dict(record.headers)
                    sid = headers[SCHEDULE_ID_HEADER].decode()
                    scheduled = parse_instant(headers[SCHEDULED_AT_HEADER].decode())
                    progress.runs += 1
                    if scheduled > latest.get(sid, -1):
                        latest[sid] = scheduled

    task = asyncio.create_task(loop())
    try:
        yield progress
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await consumer.stop()


@dataclass
class TargetReport:
    """The verdicts on a target topic, with the figures a test prints."""

    verdicts: list[Verdict] = field(default_factory=list)
    records: int = 0
    without_headers: int = 0
    missed_reported: int = 0

    def violations(self, name: str) -> list[str]:
        return [v for verdict in self.verdicts if verdict.name == name for v in verdict.violations]

    @property
    def checked(self) -> int:
        return sum(v.checked for v in self.verdicts if v.name == "target-once")

    def summary(self) -> str:
        bad = {v.name: v.violations[:5] for v in self.verdicts if not v.ok}
        return (
            f"target records={self.records} occurrences checked={self.checked}"
            f" without_headers={self.without_headers} missed_reported={self.missed_reported}"
            f" violations={bad}"
        )


async def check_targets(
    settings: Settings,
    topic: str,
    partitions: int,
    schedule_ids: Iterable[str],
    *,
    window_end_ms: int,
) -> TargetReport:
    """Read the namespace's topics and the target topic to their ends and judge them."""
    topics = await read_topic_evidence(settings)
    records = await read_to_end(settings, topic, timeout_s=120)
    seen = [
        TargetSeen(topic, r.partition, r.offset, r.timestamp_ms, r.key, r.value, r.headers)
        for r in records
    ]
    topics = dataclasses.replace(topics, targets=deliveries(seen))
    ids = set(schedule_ids)
    for sid in [sid for sid in topics.definitions if sid not in ids]:
        del topics.definitions[sid]
    # The walk starts at each schedule's first changelog record, which the log cleaner
    # may have compacted away by now (small segments, a busy minute): the shard's own
    # rule then says where it started, the first occurrence at or after the upsert's
    # timestamp (`ScheduleCommands.upsert`).
    commands = await read_to_end(settings, settings.topic(TopicKind.COMMANDS), timeout_s=120)
    produced = {r.key.decode(): r.timestamp_ms for r in commands if r.key is not None}
    for sid, command in topics.definitions.items():
        planned = command.compiled.next_after(produced[sid] - 1)
        known = topics.first_next_ms.get(sid)
        if planned is not None and (known is None or planned < known):
            topics.first_next_ms[sid] = planned
    evidence = of_topics(topics, end_ms=window_end_ms, target_partitions={topic: partitions})
    checks = (exactly_once.check, nothing_missed.check, target_once.check)
    report = TargetReport(verdicts=[check(evidence) for check in checks])
    report.records = len(seen)
    names = set(REQUIRED_HEADERS)
    report.without_headers = sum(1 for s in seen if not names <= {n for n, _ in s.headers})
    report.missed_reported = sum(
        1
        for r in topics.results
        if r.schedule_id in ids and r.status in (RunStatus.MISSED, RunStatus.SKIPPED)
    )
    return report
