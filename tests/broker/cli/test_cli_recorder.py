"""`kafkron recorder` as a process, `kafkron rejected`, against the real broker."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from tests.kit.cli import cli
from topics import messages
from topics.names import Settings, TopicKind

T0 = 1_790_000_000_000


async def produce(settings: Settings, records: list[tuple[TopicKind, bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        for kind, key, value in records:
            await producer.send_and_wait(settings.topic(kind), key=key, value=value)
    finally:
        await producer.stop()


def kafkron(settings: Settings, *argv: str) -> subprocess.Popen[str]:
    env = {**os.environ, "KAFKRON_NAMESPACE": settings.namespace}
    return subprocess.Popen(
        [sys.executable, "-m", "actors.cli", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_recorder_process_records_and_stops_cleanly_on_sigterm(
    kafka_settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = messages.run_id_for("fx-rates", T0)
    asyncio.run(
        produce(
            kafka_settings,
            [
                (
                    TopicKind.RESULTS,
                    b"fx-rates",
                    messages.result_value(
                        run_id=run_id,
                        schedule_id="fx-rates",
                        task=None,
                        attempt=1,
                        status="succeeded",
                        scheduled_ms=T0,
                        started_ms=T0 + 5,
                        finished_ms=T0 + 65,
                        worker="w",
                        error=None,
                    ),
                ),
                (TopicKind.RUNS, b"junk", b"\xff not a run"),  # logged and skipped
            ],
        )
    )
    db = tmp_path / "h.db"
    recorder = kafkron(kafka_settings, "recorder", "--db", str(db))
    try:
        found: list[dict[str, object]] = []
        for _ in range(300):
            time.sleep(0.2)
            assert recorder.poll() is None, recorder.communicate()[1]
            if db.exists():
                code, out, _ = cli(capsys, "history", "--json", "--db", str(db))
                found = json.loads(out) if code == 0 else []
                if found:
                    break
        assert [(r["run_id"], r["status"], r["duration_ms"]) for r in found] == [
            (run_id, "succeeded", 60)
        ]
    finally:
        recorder.send_signal(signal.SIGTERM)
        _, err = recorder.communicate(timeout=60)
    assert recorder.returncode == 0, err
    assert "skipping undecodable record" in err


@pytest.mark.broker
def test_recorder_refuses_a_namespace_without_topics(tmp_path: Path) -> None:
    settings = Settings.from_env(namespace="t-no-such-namespace")
    recorder = kafkron(settings, "recorder", "--db", str(tmp_path / "h.db"))
    _, err = recorder.communicate(timeout=120)
    assert recorder.returncode == 1
    assert "kafkron topics create" in err


def test_rejected_shows_reasons(
    kafka_settings: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKRON_NAMESPACE", kafka_settings.namespace)
    code, out, _ = cli(capsys, "rejected")
    assert code == 0 and "no rejected commands" in out
    asyncio.run(
        produce(
            kafka_settings,
            [
                (
                    TopicKind.REJECTED,
                    b"\xfe\xff",
                    messages.rejected_value(
                        reason="key: not UTF-8; key each command by its schedule id",
                        original=b'{"v":1,"type":"schedule.pause","id":"x"}',
                        topic=kafka_settings.topic(TopicKind.COMMANDS),
                        partition=1,
                        offset=3,
                    ),
                )
            ],
        )
    )
    code, out, _ = cli(capsys, "rejected", "--json")
    assert code == 0
    assert json.loads(out)[0] | {"rejected_at": None} == {
        "rejected_at": None,
        "key": "base64:/v8=",
        "reason": "key: not UTF-8; key each command by its schedule id",
        "original": '{"v":1,"type":"schedule.pause","id":"x"}',
        "topic": kafka_settings.topic(TopicKind.COMMANDS),
        "partition": 1,
        "offset": 3,
    }
    code, out, _ = cli(capsys, "rejected")
    assert code == 0 and "key: not UTF-8" in out and "[1]@3" in out


def test_rejected_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "rejected", "--last", "0")
    assert code == 2 and "--last" in err
