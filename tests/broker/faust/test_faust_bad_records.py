"""Bad records on the namespace's topics are skipped; the agents on them never restart.

Faust's default throws a record that fails to decode into every agent on its topic:
the agent crashes, Faust restarts it about 5 s later and its in-memory state is
gone. Here every kind of bad record (not JSON, a JSON array, a field missing, a
wrong ``"v"``, a key that is not UTF-8) sits between good ones on each decoded topic
`declare_topics` returns. Checked: each agent's function ran once (no restart), it
saw every good record in order, the group's offsets moved past the end, and each bad
record was logged once with its topic, partition, offset and reason and counted once
(`undecodable_records` and the Prometheus counter), with two agents on one topic too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faust
import orjson
import pytest
from aiokafka import AIOKafkaProducer

from actors.faust import declare_topics, kafkron_app, undecodable_records
from actors.observe import metrics
from topics import messages
from topics.admin import admin_client
from topics.command_types import Job
from topics.names import Settings, TopicKind
from topics.vocabulary import RunStatus

T0 = 1_790_000_000_000
GOOD_PER_TOPIC = 6
JOB = Job("billing.charge", {})


def _run(label: str) -> bytes:
    run_id = messages.run_id_for(label, T0)
    return messages.run_value(
        run_id=run_id,
        schedule_id=label,
        task=None,
        scheduled_ms=T0,
        fired_ms=T0 + 5,
        attempt=1,
        job=JOB,
        idempotency_key=messages.idempotency_key(run_id),
        deadline_ms=T0 + 60_000,
    )


def _result(label: str) -> bytes:
    return messages.result_value(
        run_id=messages.run_id_for(label, T0),
        schedule_id=label,
        task=None,
        attempt=1,
        status=RunStatus.SUCCEEDED,
        scheduled_ms=T0,
        started_ms=T0 + 10,
        finished_ms=T0 + 20,
        worker="w1",
        error=None,
    )


def _dead_letter(label: str) -> bytes:
    return messages.dlq_value(
        run_id=messages.run_id_for(label, T0),
        schedule_id=label,
        task=None,
        job=JOB,
        last_error={"type": "E", "message": "m"},
        attempts=[{"attempt": 1, "status": "failed"}],
        dead_at_ms=T0 + 99,
    )


def _rejected(label: str) -> bytes:
    return messages.rejected_value(
        reason=label, original=b"{}", topic="ns.commands", partition=0, offset=1
    )


# Per decoded topic: a good value labelled with a name, the label back from the
# decoded record, and a field the parser requires.
GOOD: dict[TopicKind, tuple[Callable[[str], bytes], Callable[[Any], str], str]] = {
    TopicKind.RUNS: (_run, lambda run: run.schedule_id, "job"),
    TopicKind.RESULTS: (_result, lambda result: result.schedule_id, "worker"),
    TopicKind.DLQ: (_dead_letter, lambda letter: letter.schedule_id, "dead_at"),
    TopicKind.REJECTED: (_rejected, lambda rejection: rejection.reason, "topic"),
}


def _bad_records(kind: TopicKind) -> list[tuple[bytes, bytes, str]]:
    """(key, value, what the log must say) of each kind of bad record of ``kind``'s
    topic: not JSON, an array, a field missing, a ``"v"`` this kafkron does not read,
    and (on the topics whose keys are schedule ids) a key that is not UTF-8."""
    make, _, required = GOOD[kind]
    missing = orjson.loads(make("bad"))
    del missing[required]
    newer = orjson.loads(make("bad"))
    newer["v"] = 2
    bad = [
        (b"bad", b"\x00not json", "not valid JSON"),
        (b"bad", b"[1, 2]", "expected a JSON object"),
        (b"bad", orjson.dumps(missing), f"{required}: missing"),
        (b"bad", orjson.dumps(newer), ".v: expected 1, got 2"),
    ]
    if kind is not TopicKind.REJECTED:  # its keys are the refused records' own bytes
        bad.append((b"\xff\xfe", make("bad-key"), "(key): 'utf-8' codec can't decode"))
    return bad


def _interleaved(kind: TopicKind) -> tuple[list[tuple[bytes, bytes, str | None]], list[str]]:
    """A good record, a bad one, ... a good one (bad ones with what the log must
    say, good ones with None); and the good records' labels, in order."""
    make = GOOD[kind][0]
    bad = _bad_records(kind)
    labels = [f"{kind.value}-{i}" for i in range(len(bad) + 1)]
    records: list[tuple[bytes, bytes, str | None]] = []
    for i, label in enumerate(labels):
        records.append((label.encode(), make(label), None))
        if i < len(bad):
            records.append(bad[i])
    return records, labels


async def _produce(
    settings: Settings, kind: TopicKind, records: list[tuple[bytes, bytes, str | None]]
) -> dict[int, str]:
    """Produce ``records`` to partition 0 in order; what the log must say, by offset."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    said: dict[int, str] = {}
    try:
        for key, value, says in records:
            sent = await producer.send_and_wait(
                settings.topic(kind), key=key, value=value, partition=0
            )
            if says is not None:
                said[sent.offset] = says
    finally:
        await producer.stop()
    return said


async def _committed(settings: Settings, group: str) -> dict[str, int]:
    async with admin_client(settings) as admin:
        offsets = await admin.list_consumer_group_offsets(group)
    return {tp.topic: meta.offset for tp, meta in offsets.items() if tp.partition == 0}


def _metric(topic: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(
        "kafkron_faust_records_undecodable_total", {"topic": topic}
    )


async def _until(what: Callable[[], Any], check: Callable[[], Any], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"never happened: {what()}"
        await asyncio.sleep(0.1)


@pytest.mark.kafka_partitions(1)
async def test_bad_records_are_logged_counted_and_skipped_and_no_agent_restarts(
    kafka_settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = kafka_settings
    app_id = f"{settings.namespace}-bad-records"
    app = kafkron_app(
        app_id,
        settings,
        partitions=1,
        data_dir=tmp_path / "faust",
        web_enabled=False,
        broker_commit_interval=0.2,
    )
    topics = declare_topics(app, settings)
    entered: Counter[TopicKind] = Counter()
    seen: defaultdict[TopicKind, list[str]] = defaultdict(list)
    expected: dict[TopicKind, list[str]] = {}
    said: dict[str, dict[int, str]] = {}  # topic: offset of a bad record: what the log says
    ends: dict[str, int] = {}

    def watch(kind: TopicKind, name: str) -> None:
        label = GOOD[kind][1]

        async def agent(stream: faust.StreamT[Any]) -> None:
            entered[kind] += 1  # a crashed agent is restarted: its function runs again
            async for record in stream:
                seen[kind].append(label(record))

        app.agent(getattr(topics, kind.value), name=name)(agent)

    for kind in GOOD:
        records, expected[kind] = _interleaved(kind)
        said[settings.topic(kind)] = await _produce(settings, kind, records)
        ends[settings.topic(kind)] = len(records)
        watch(kind, f"watch-{kind.value}")
    # A second agent on results: the record reaches the hooks once per channel and
    # must still be logged and counted once.
    second: list[str] = []

    async def also(stream: faust.StreamT[Any]) -> None:
        async for result in stream:
            second.append(result.schedule_id)

    app.agent(topics.results, name="second-on-results")(also)

    caplog.set_level(logging.WARNING, logger="kafkron.faust")
    await app.start()
    try:

        async def all_seen() -> bool:
            return all(len(seen[kind]) >= len(labels) for kind, labels in expected.items())

        await _until(lambda: dict(seen), all_seen, timeout_s=60)

        async def committed_to_end() -> bool:
            return await _committed(settings, app_id) == ends

        await _until(lambda: ends, committed_to_end, timeout_s=30)
    finally:
        await app.stop()

    assert dict(entered) == dict.fromkeys(GOOD, 1), f"agents restarted: {dict(entered)}"
    assert dict(seen) == expected
    assert second == expected[TopicKind.RESULTS]
    logged: dict[str, dict[int, str]] = defaultdict(dict)
    for record in caplog.records:
        if record.name == "kafkron.faust":
            assert isinstance(record.args, tuple)
            topic, partition, offset = record.args[:3]
            assert isinstance(topic, str) and isinstance(offset, int) and partition == 0
            assert offset not in logged[topic], f"logged twice: {record.getMessage()}"
            logged[topic][offset] = record.getMessage()
    assert logged.keys() == said.keys()
    for topic, bad in said.items():
        assert logged[topic].keys() == bad.keys(), topic
        for offset, says in bad.items():
            message = logged[topic][offset]
            assert message.startswith(f"skipping undecodable record {topic}[0]@{offset} ")
            assert says in message
        assert undecodable_records.count(topic) == len(bad)
        assert _metric(topic) == len(bad)
