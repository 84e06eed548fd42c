"""Kafka targets on the real broker: delivered in the fire's transaction, refused visibly.

One scheduler allows the prefix ``{ns}-out.*``. Three schedules fire every second:
``ok`` into a plain topic, ``keyless`` into a compacted topic (the broker refuses a
keyless record there, inside the transaction), and ``gone`` into an allowed topic
that does not exist. A fourth names a topic that is not allowed. What must hold:

- ``ok``'s records arrive with their headers, one per occurrence, and keep arriving
  while the compacted topic refuses: one bad topic does not stall its shard;
- ``keyless`` and ``gone`` occurrences end ``failed`` with a dead letter naming the
  target and the reason, and no record of them is ever visible (nothing partial);
- the schedule naming a topic that is not allowed is rejected with the reason.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from actors.views.tail import read_to_end
from tests.kit.scheduler import SchedulerProcesses, produce
from topics.messages import parse_dlq, parse_rejected, parse_result
from topics.names import Settings, TopicKind
from topics.targets import RUN_ID_HEADER, SCHEDULED_AT_HEADER


def _upsert(schedule_id: str, topic: str, key: str | None) -> tuple[bytes, bytes]:
    command = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": {"every": "1s"},
        "target": {"kafka": {"topic": topic, "key": key, "value": {"at": "{scheduled_at}"}}},
    }
    return schedule_id.encode(), orjson.dumps(command)


async def test_targets_are_delivered_once_and_refusals_fail_only_their_own(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    ns = kafka_settings.namespace
    plain, compacted, missing = f"{ns}-out.due", f"{ns}-out.compacted", f"{ns}-out.missing"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_settings.bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(plain, 2, 1),
                NewTopic(compacted, 1, 1, topic_configs={"cleanup.policy": "compact"}),
            ]
        )
    finally:
        await admin.close()
    schedulers = SchedulerProcesses(
        kafka_settings, tmp_path, extra_args=("--target-topic", f"{ns}-out.*")
    )
    schedulers.start()
    try:
        await produce(
            kafka_settings,
            [
                _upsert("ok", plain, "{schedule_id}"),
                _upsert("keyless", compacted, None),
                _upsert("gone", missing, None),
                _upsert("stray", "payments", None),
            ],
        )
        await asyncio.sleep(8)
    finally:
        schedulers.stop_all()
    records = await read_to_end(kafka_settings, plain)
    instants = [dict(r.headers)[SCHEDULED_AT_HEADER] for r in records]
    assert len(records) >= 4, schedulers.logs()
    assert len(set(instants)) == len(instants)  # each occurrence once
    for record in records:
        headers = dict(record.headers)
        assert headers[RUN_ID_HEADER] == b"ok@" + headers[SCHEDULED_AT_HEADER]
        assert orjson.loads(record.value or b"") == {"at": headers[SCHEDULED_AT_HEADER].decode()}
    assert await read_to_end(kafka_settings, compacted) == []
    results = [
        parse_result(r.value)
        for r in await read_to_end(kafka_settings, kafka_settings.topic(TopicKind.RESULTS))
        if r.value is not None
    ]
    ok = [r for r in results if r.schedule_id == "ok"]
    assert {r.status for r in ok} == {"succeeded"} and len(ok) == len(records)
    assert all(r.target and r.target["kafka"]["topic"] == plain for r in ok)
    for refused, why in (("keyless", "refused the last record"), ("gone", "does not exist")):
        failed = [r for r in results if r.schedule_id == refused]
        assert failed and {r.status for r in failed} == {"failed"}, schedulers.logs()
        assert all(r.error and why in r.error["message"] for r in failed)
    dead = [
        parse_dlq(r.value)
        for r in await read_to_end(kafka_settings, kafka_settings.topic(TopicKind.DLQ))
        if r.value is not None
    ]
    assert {d.job.args["topic"] for d in dead} == {compacted, missing}
    rejected = [
        parse_rejected(r.value)
        for r in await read_to_end(kafka_settings, kafka_settings.topic(TopicKind.REJECTED))
        if r.value is not None
    ]
    assert [r.reason.split(";")[0] for r in rejected] == [
        "target.kafka.topic: target topic payments is not allowed"
    ]
