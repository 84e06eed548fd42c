"""`kafkron history` of target runs: where each goes and what it did (no Kafka needed).

The database is built from wire records through the recorder's own `to_row`: a Kafka
target has no run record (the shard writes its record and its result in the fire's
transaction), so its result alone must say where it went; an HTTP target's run names
its URL and its result the status; a dead letter names the target it failed to reach.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from actors.history.recorder import to_row
from actors.history.store import HistoryStore, Row
from tests.kit.cli import cli
from topics.command_types import Job
from topics.messages import dlq_value, result_value, run_value
from topics.names import TopicKind
from topics.targets import HTTP_JOB, KAFKA_JOB
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus

T0 = 1_790_000_000_000
KAFKA_RUN = f"order-due@{format_ms(T0)}"
REFUSED_RUN = f"order-due@{format_ms(T0 + 60_000)}"
HTTP_RUN = f"charge-hook@{format_ms(T0)}"
HTTP_ARGS = {"url": "https://billing.example/charge", "method": "POST", "headers": {}}


def _rows() -> list[Row]:
    kafka_job = Job(KAFKA_JOB, {"topic": "orders.due", "key": None, "value": 1, "headers": {}})
    records = [
        (
            TopicKind.RESULTS,
            result_value(
                run_id=KAFKA_RUN, schedule_id="order-due", task=None, attempt=1,
                status=RunStatus.SUCCEEDED, scheduled_ms=T0, started_ms=T0 + 3,
                finished_ms=T0 + 3, worker="shard-2", error=None,
                target={"kafka": {"topic": "orders.due", "partition": 3}},
            ),
        ),
        (
            TopicKind.RESULTS,
            result_value(
                run_id=REFUSED_RUN, schedule_id="order-due", task=None, attempt=1,
                status=RunStatus.FAILED, scheduled_ms=T0 + 60_000, started_ms=None,
                finished_ms=T0 + 60_003, worker="shard-2",
                error={"type": "TargetRefused", "message": "target topic orders.due refused"},
            ),
        ),
        (
            TopicKind.DLQ,
            dlq_value(
                run_id=REFUSED_RUN, schedule_id="order-due", task=None, job=kafka_job,
                last_error={"type": "TargetRefused", "message": "refused"},
                attempts=[{"attempt": 1}], dead_at_ms=T0 + 60_004,
            ),
        ),
        (
            TopicKind.RUNS,
            run_value(
                run_id=HTTP_RUN, schedule_id="charge-hook", task=None, scheduled_ms=T0,
                fired_ms=T0 + 5, attempt=1, job=Job(HTTP_JOB, HTTP_ARGS),
                idempotency_key="k" * 64, deadline_ms=T0 + 3_600_000,
            ),
        ),
        (
            TopicKind.RESULTS,
            result_value(
                run_id=HTTP_RUN, schedule_id="charge-hook", task=None, attempt=1,
                status=RunStatus.SUCCEEDED, scheduled_ms=T0, started_ms=T0 + 10,
                finished_ms=T0 + 51, worker="worker-1", error=None,
                target={"http": {"status": 200, "duration_ms": 41, "body": "ok"}},
            ),
        ),
    ]  # fmt: skip
    rows = [
        to_row(kind, 0, offset, None, value, T0) for offset, (kind, value) in enumerate(records)
    ]
    return [row for row in rows if row is not None]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "history.db"

    async def build() -> None:
        async with await HistoryStore.open(path, namespace="demo") as store:
            await store.write(_rows(), {})

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
