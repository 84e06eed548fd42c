"""`kafkron schedule add --to-topic` against a scheduler started with `--target-topic`.

One scheduler allows ``{ns}-due.*``. ``due`` writes to a topic that exists: its
records arrive, one per occurrence, with the CLI's key, value and header and
kafkron's own headers, and `kafkron ls` shows where it goes. ``later`` writes to an
allowed topic that does not exist yet: its occurrence fails with a dead letter
that `kafkron dlq list` shows with its target; once the topic is created,
`kafkron dlq replay` delivers it, as attempt 2.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from actors.scheduler.target_table import REFRESH_S
from actors.views.tail import Record, read_to_end
from tests.kit.cli import cli
from tests.kit.scheduler import SchedulerProcesses
from topics.names import Settings
from topics.targets import ATTEMPT_HEADER, RUN_ID_HEADER, SCHEDULED_AT_HEADER

pytestmark = pytest.mark.broker


async def _create(settings: Settings, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        await admin.close()


def _records(settings: Settings, topic: str, at_least: int, tries: int = 60) -> list[Record]:
    # The CLI runs event loops of its own, so the test is synchronous, its polling too.
    for _ in range(tries):
        records = asyncio.run(read_to_end(settings, topic))
        if len(records) >= at_least:
            return records
        time.sleep(0.5)
    return asyncio.run(read_to_end(settings, topic))


def _dead(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    for _ in range(60):
        code, out, _ = cli(capsys, "dlq", "list", "--json")
        if code == 0 and json.loads(out):
            rows: list[dict[str, object]] = json.loads(out)
            return rows
        time.sleep(0.5)
    return []


def test_schedule_add_to_topic_is_delivered_listed_dead_lettered_and_replayed(
    kafka_settings: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns = kafka_settings.namespace
    monkeypatch.setenv("KAFKRON_NAMESPACE", ns)
    monkeypatch.setenv("KAFKRON_BOOTSTRAP", kafka_settings.bootstrap)
    due, later = f"{ns}-due.orders", f"{ns}-due.later"
    asyncio.run(_create(kafka_settings, due))
    schedulers = SchedulerProcesses(
        kafka_settings, tmp_path, extra_args=("--target-topic", f"{ns}-due.*")
    )
    schedulers.start()
    try:
        code, _, err = cli(
            capsys,
            "schedule", "add", "due", "--every", "1s", "--to-topic", due,
            "--key", "{schedule_id}", "--value", '{"order": "o-1", "at": "{scheduled_at}"}',
            "--header", "source=cli",
        )  # fmt: skip
        assert code == 0, err
        code, _, err = cli(
            capsys,
            "schedule", "add", "later", "--cron", "0 0 1 1 *", "--to-topic", later,
            "--value", '"once"', "--max-attempts", "1",
        )  # fmt: skip
        assert code == 0, err
        assert cli(capsys, "schedule", "trigger", "later")[0] == 0
        records = _records(kafka_settings, due, 3)
        assert len(records) >= 3, schedulers.logs()
        code, out, _ = cli(capsys, "ls")
        assert code == 0 and f"→ kafka:{due}" in out and f"→ kafka:{later}" in out
        dead = _dead(capsys)
        assert [d["target"] for d in dead] == [
            {"kafka": {"topic": later, "key": None, "value": "once", "headers": {}}}
        ], schedulers.logs()
        code, out, _ = cli(capsys, "dlq", "list")
        assert code == 0 and f"→ kafka:{later}" in out
        asyncio.run(_create(kafka_settings, later))
        # The scheduler learns of a new topic at its next look at the allowed ones.
        time.sleep(REFRESH_S + 2)
        code, _, err = cli(capsys, "dlq", "replay", str(dead[0]["run_id"]))
        assert code == 0, err
        replayed = _records(kafka_settings, later, 1)
    finally:
        schedulers.stop_all()
    instants = [dict(r.headers)[SCHEDULED_AT_HEADER] for r in records]
    assert len(set(instants)) == len(instants)  # one record per occurrence
    for record in records:
        headers = dict(record.headers)
        assert record.key == b"due"
        assert headers["source"] == b"cli"
        assert headers[RUN_ID_HEADER] == b"due@" + headers[SCHEDULED_AT_HEADER]
        assert orjson.loads(record.value or b"") == {
            "order": "o-1",
            "at": headers[SCHEDULED_AT_HEADER].decode(),
        }
    assert replayed, schedulers.logs()
    assert orjson.loads(replayed[0].value or b"") == "once"
    assert dict(replayed[0].headers)[ATTEMPT_HEADER] == b"2"
