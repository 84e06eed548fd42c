"""Targets from `kafkron.Client`: the README's examples, and a Kafka target end to end.

The README's two target examples ("From Python") run as written against a client that
builds what it is given, so each is a command the shard accepts. Then, on the real
broker, a scheduler allows ``{ns}-due.*``: a schedule created with a `KafkaTarget`
fires once, `wait_for` says it succeeded and its record is on the topic; `update`
keeps a target schedule's target (the changelog holds it as its carrier job), and
replaces it with a job when given one.
"""

from __future__ import annotations

import ast
import asyncio
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

import kafkron
from actors.views.tail import read_to_end
from kafkron import At, Client, Every, InvalidCommand, KafkaTarget, RunStatus, schedule_upsert
from tests.kit.paths import REPO
from tests.kit.scheduler import SchedulerProcesses
from topics.command_builders import CommandRecord
from topics.command_types import ScheduleUpsert
from topics.messages import run_id_for
from topics.names import Settings
from topics.targets import HTTP_JOB, KAFKA_JOB, RUN_ID_HEADER


class _Building:
    """A stand-in client: builds each schedule it is asked to create, sends nothing."""

    def __init__(self) -> None:
        self.built: list[CommandRecord] = []

    async def __aenter__(self) -> _Building:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def create_schedule(
        self, schedule_id: str, spec: Any, job: str | None = None, **fields: Any
    ) -> str:
        self.built.append(schedule_upsert(schedule_id, spec, job, **fields))
        return schedule_id


def _target_blocks() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## From Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return [b for b in blocks if "KafkaTarget(" in b or "HttpTarget(" in b]


async def test_the_readmes_target_examples_build_commands_the_shard_accepts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blocks = _target_blocks()
    assert len(blocks) == 2, "one KafkaTarget and one HttpTarget example"
    client = _Building()
    monkeypatch.setattr(kafkron, "Client", lambda *args, **kwargs: client)
    for block in blocks:
        code = compile(block, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        await eval(code, {"client": client})  # the README's own text
    decoded = [record.decoded for record in client.built]
    assert all(isinstance(d, ScheduleUpsert) for d in decoded)
    jobs = [d.job for d in decoded if isinstance(d, ScheduleUpsert)]
    assert [job.name for job in jobs] == [KAFKA_JOB, HTTP_JOB]
    assert jobs[0].args["topic"] == "orders.due"
    assert jobs[1].args["headers"] == {"Authorization": {"secret": "billing-api"}}


async def _create_topic(settings: Settings, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        await admin.close()


async def _delete_topic(settings: Settings, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
    finally:
        await admin.close()


async def test_a_kafka_target_is_written_waited_for_and_kept_by_update(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    due = f"{kafka_settings.namespace}-due.orders"
    await _create_topic(kafka_settings, due)
    schedulers = SchedulerProcesses(
        kafka_settings, tmp_path, extra_args=("--target-topic", f"{kafka_settings.namespace}-due.*")
    )
    schedulers.start()
    try:
        async with Client(kafka_settings) as client:
            now = datetime.now(UTC) + timedelta(seconds=3)
            at = now.replace(microsecond=now.microsecond // 1000 * 1000)
            target = KafkaTarget(due, key="{schedule_id}", value={"due": "{scheduled_at}"})
            await client.create_schedule("once", At(at), target=target)
            run_id = run_id_for("once", round(at.timestamp() * 1000))
            outcome = await client.wait_for(run_id, timeout=120)
            assert outcome.status == RunStatus.SUCCEEDED, schedulers.logs()

            await client.create_schedule("hourly", Every("1h"), target=target)
            first = await _schedule(client, "hourly", lambda d: d["job"]["name"] == KAFKA_JOB)
            await client.update("hourly", spec=Every("2h"))
            kept = await _schedule(client, "hourly", lambda d: d["spec"] == {"every": "2h"})
            assert kept["job"] == first["job"]
            with pytest.raises(InvalidCommand) as raised:
                await client.update("hourly", args={"n": 1})
            assert raised.value.field == "args"
            await client.update("hourly", job="test.noop")
            job = await _schedule(client, "hourly", lambda d: d["job"]["name"] == "test.noop")
            assert job["job"] == {"name": "test.noop", "args": {}}
    finally:
        schedulers.stop_all()
    records = await read_to_end(kafka_settings, due)
    await _delete_topic(kafka_settings, due)
    assert len(records) == 1
    assert records[0].key == b"once"
    assert dict(records[0].headers)[RUN_ID_HEADER] == run_id.encode()
    assert orjson.loads(records[0].value or b"") == {"due": run_id.split("@", 1)[1]}


async def _schedule(client: Client, schedule_id: str, holds: Any) -> dict[str, Any]:
    """The definition of ``schedule_id`` once ``holds`` it (30 s at most)."""
    for _ in range(100):
        found = await client.get_schedule(schedule_id)
        if found is not None and holds(found.definition):
            return dict(found.definition)
        await asyncio.sleep(0.3)
    raise AssertionError(f"{schedule_id} never reached the state asked: {found}")
