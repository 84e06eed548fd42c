"""`kafkron history` of target runs: where each goes and what it did (no Kafka needed).

The database is built from wire records through the recorder's own `to_row`
(`tests.kit.history.target_rows`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from actors.history.recorder import to_row
from actors.history.store import HistoryStore
from tests.kit.cli import cli
from tests.kit.history import HTTP_RUN, KAFKA_RUN, REFUSED_RUN, T0, target_rows
from topics.command_types import Job
from topics.messages import run_value
from topics.names import TopicKind
from topics.timefmt import format_ms


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "history.db"

    async def build() -> None:
        async with await HistoryStore.open(path, namespace="demo") as store:
            await store.write(target_rows(), {})

    asyncio.run(build())
    return path


def test_runs_show_where_their_target_goes_and_what_it_did(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "history", "--last", "10", "--db", str(db))
    assert code == 0, err
    assert "target" in out.splitlines()[1].split()
    assert len(out.splitlines()) == 2 + 3  # title, header, one line per run
    assert any("→ kafka:orders.due[3]" in line for line in out.splitlines())
    assert any(
        "→ POST https://billing.example/charge · HTTP 200 in 41 ms" in line
        for line in out.splitlines()
    )
    refused = next(line for line in out.splitlines() if "dead_lettered" in line)
    assert "→ kafka:orders.due" in refused and "TargetRefused" in refused


def test_json_names_the_target_and_the_delivery(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "history", "--last", "10", "--json", "--db", str(db))
    assert code == 0
    runs = {r["run_id"]: r for r in json.loads(out)}
    assert runs[KAFKA_RUN]["target"] == "kafka:orders.due"
    assert runs[KAFKA_RUN]["delivered"] == {"kafka": {"topic": "orders.due", "partition": 3}}
    assert runs[KAFKA_RUN]["lateness_ms"] == 3  # fired as written: its result's start
    assert runs[HTTP_RUN]["target"] == "POST https://billing.example/charge"
    assert runs[HTTP_RUN]["delivered"]["http"]["status"] == 200
    assert runs[REFUSED_RUN]["target"] == "kafka:orders.due"
    assert runs[REFUSED_RUN]["status"] == "dead_lettered"
    assert runs[REFUSED_RUN]["delivered"] is None


def test_a_target_run_shows_each_attempt_with_what_it_did(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "history", HTTP_RUN, "--db", str(db))
    assert code == 0
    assert "(→ POST https://billing.example/charge)" in out.splitlines()[0]
    assert "target" in out.splitlines()[1].split()
    assert "HTTP 200 in 41 ms" in out.splitlines()[2]
    code, out, _ = cli(capsys, "history", HTTP_RUN, "--json", "--db", str(db))
    attempts = json.loads(out)["attempt_history"]
    assert attempts[0]["delivered"] == {"http": {"status": 200, "duration_ms": 41, "body": "ok"}}


def test_a_job_run_has_no_target_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "jobs.db"
    run = run_value(
        run_id=f"fx@{format_ms(T0)}", schedule_id="fx", task=None, scheduled_ms=T0,
        fired_ms=T0, attempt=1, job=Job("billing.fx", {}), idempotency_key="k" * 64,
        deadline_ms=T0 + 1000,
    )  # fmt: skip

    async def build() -> None:
        async with await HistoryStore.open(path, namespace="demo") as store:
            row = to_row(TopicKind.RUNS, 0, 0, None, run, T0)
            assert row is not None
            await store.write([row], {})

    asyncio.run(build())
    code, out, _ = cli(capsys, "history", "--db", str(path))
    assert code == 0 and "target" not in out.splitlines()[1].split()
