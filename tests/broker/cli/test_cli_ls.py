"""`kafkron ls` reads the changelog a real shard core writes, from the real broker."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiokafka import AIOKafkaProducer

from actors.shard import ShardCore
from tests.kit.cli import cli
from topics import codec, messages
from topics.names import Settings, TopicKind
from topics.partitioner import murmur2_partition
from topics.records import InRecord, OutRecord
from topics.timefmt import format_ms, parse_instant

T0 = parse_instant("2026-10-10T00:00:00Z")
PARTITIONS = 3


class Shards:
    """One shard core per partition, fed commands; collects their changelog writes."""

    def __init__(self) -> None:
        self.cores = [ShardCore(partition=p, partitions=PARTITIONS, now_ms=T0) for p in range(3)]
        self.changelog: list[OutRecord] = []
        self.offset = 0

    def _keep(self, records: list[OutRecord]) -> list[OutRecord]:
        self.changelog.extend(r for r in records if r.topic is TopicKind.SCHEDULES)
        return records

    def feed(self, kind: TopicKind, key: str, value: bytes, now_ms: int) -> list[OutRecord]:
        p = murmur2_partition(key.encode(), PARTITIONS)
        self.offset += 1
        record = InRecord(kind, p, self.offset, key.encode(), value)
        return self._keep(self.cores[p].apply(record, now_ms))

    def command(self, body: dict[str, object], now_ms: int = T0) -> list[OutRecord]:
        return self.feed(TopicKind.COMMANDS, str(body["id"]), codec.dumps(body), now_ms)

    def advance(self, now_ms: int) -> list[OutRecord]:
        out: list[OutRecord] = []
        for core in self.cores:
            out.extend(self._keep(core.advance(now_ms)))
        return out


def upsert(schedule_id: str, spec: dict[str, str], **more: object) -> dict[str, object]:
    return {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": spec,
        "job": {"name": f"billing.{schedule_id}", "args": {}},
        **more,
    }


async def produce(settings: Settings, records: list[OutRecord]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        for r in records:
            await producer.send_and_wait(
                settings.topic(r.topic), key=r.key, value=r.value, partition=r.partition
            )
    finally:
        await producer.stop()


def test_ls_shows_what_the_changelog_holds(
    kafka_settings: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shards = Shards()
    shards.command(upsert("fx-rates", {"every": "5s"}))
    shards.command(upsert("invoice-nightly", {"cron": "0 0 * * *", "tz": "Europe/London"}))
    shards.command({"v": 1, "type": "schedule.pause", "id": "invoice-nightly"})
    shards.command(upsert("gone", {"every": "1m"}))
    shards.command({"v": 1, "type": "schedule.delete", "id": "gone"})
    shards.command(upsert("charge", {"every": "1h"}, retry={"max_attempts": 3}))
    # charge fires at T0 + 1h; its first attempt fails, so a retry waits.
    fired = [r for r in shards.advance(T0 + 3_600_000) if r.topic is TopicKind.RUNS]
    run = next(messages.parse_run(r.value or b"") for r in fired if r.key == b"charge")
    failed = messages.result_value(
        run_id=run.run_id,
        schedule_id="charge",
        task=None,
        attempt=1,
        status="failed",
        scheduled_ms=run.scheduled_ms,
        started_ms=T0 + 3_600_001,
        finished_ms=T0 + 3_600_002,
        worker="w",
        error={"type": "CardDeclined", "message": "no"},
    )
    shards.feed(TopicKind.RESULTS, "charge", failed, T0 + 3_600_003)
    asyncio.run(produce(kafka_settings, shards.changelog))

    monkeypatch.setenv("KAFKRON_NAMESPACE", kafka_settings.namespace)
    code, out, _ = cli(capsys, "ls", "--json")
    assert code == 0
    rows = {row["id"]: row for row in json.loads(out)}
    assert sorted(rows) == ["charge", "fx-rates", "invoice-nightly"]
    invoice = rows["invoice-nightly"]
    assert invoice["paused"] is True and invoice["zone"] == "Europe/London"
    assert invoice["spec"] == {"cron": "0 0 * * *", "tz": "Europe/London"}
    assert invoice["job"] == "billing.invoice-nightly" and invoice["last_outcome"] == "-"
    fx = rows["fx-rates"]
    assert fx["paused"] is False and fx["zone"] is None and fx["next_fire"] is not None
    assert fx["last_fired"] is not None  # the advance to T0 + 1h fired it (misfire run_once)
    charge = rows["charge"]
    assert charge["last_fired"] == format_ms(T0 + 3_600_000)
    assert charge["last_outcome"].startswith("retrying (attempt 2 at ")
    assert charge["in_flight"] == [
        {
            "run_id": run.run_id,
            "attempt": 1,
            "waiting_retry": True,
            "queue": "default",
            "fired_at": format_ms(T0 + 3_600_000),
        }
    ]
    assert charge["queue"] == "default"

    code, out, _ = cli(capsys, "ls")
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split()[:2] == ["id", "spec"]
    assert lines[1].split()[6] == "state"  # after "next fire"
    assert any(line.startswith("invoice-nightly") and " paused " in line for line in lines)
    assert any(line.startswith("fx-rates") and " active " in line for line in lines)
    assert any(line.startswith("fx-rates") and "every 5s" in line for line in lines)


def test_ls_on_an_empty_namespace_says_how_to_add(
    kafka_settings: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKRON_NAMESPACE", kafka_settings.namespace)
    code, out, _ = cli(capsys, "ls")
    assert code == 0 and "kafkron schedule add" in out
    code, out, _ = cli(capsys, "ls", "--json")
    assert code == 0 and json.loads(out) == []


@pytest.mark.broker
def test_ls_bad_usage_and_missing_topics(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = cli(capsys, "ls", "--colour")
    assert code == 2 and "unrecognized" in err
    monkeypatch.setenv("KAFKRON_NAMESPACE", "t-never-created")
    code, _, err = cli(capsys, "ls")
    assert code == 1 and "kafkron topics create" in err
