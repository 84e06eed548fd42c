"""The history keeps what a target's result says, and a database made before gains the columns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from actors.history.schema import DDL, SCHEMA_VERSION
from actors.history.store import AttemptFinished, DeadLetterRow, HistoryStore

T0 = 1_790_000_000_000
RUN = "order-due@2026-09-21T12:26:40.000Z"
TARGET_COLUMNS = {
    "attempts": ("target", "job_target"),
    "runs": ("target", "job_target"),
    "dead_letters": ("job_target",),
}


def _before_targets(path: Path) -> None:
    """A version-2 database as kafkron wrote it before targets: the same DDL without
    the target columns, with a namespace and a run recorded."""
    db = sqlite3.connect(path)
    for statement in DDL:
        db.execute(_drop_target_columns(statement))
    db.execute("INSERT INTO meta VALUES ('namespace', 'demo')")
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    db.execute(
        "INSERT INTO runs (run_id, schedule_id, status, attempts) VALUES (?, ?, ?, ?)",
        ("old@2026-01-01T00:00:00.000Z", "old", "succeeded", 1),
    )
    db.commit()
    for table, columns in TARGET_COLUMNS.items():
        names = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        assert not names & set(columns), f"{table} should be as before targets"
    db.close()


def _drop_target_columns(statement: str) -> str:
    lines = [
        line
        for line in statement.splitlines()
        if line.strip().split(" ")[0] not in ("target", "job_target")
    ]
    text = "\n".join(lines)
    # The column before a dropped last one loses its trailing comma.
    return text.replace("covers_count    INTEGER,\n    )", "covers_count    INTEGER\n    )")


async def test_an_older_database_gains_the_target_columns_and_keeps_its_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.db"
    _before_targets(path)
    async with await HistoryStore.open(path, namespace="demo") as store:
        assert [r.schedule_id for r in await store.runs()] == ["old"]
        await store.write(
            [
                AttemptFinished(
                    run_id=RUN, attempt=1, schedule_id="order-due", task=None,
                    status="succeeded", scheduled_ms=T0, started_ms=T0, finished_ms=T0 + 2,
                    worker="shard-0", error_type=None, error_message=None,
                    target_json='{"kafka":{"topic":"orders.due","partition":1}}',
                    job_target="kafka:orders.due",
                ),
            ],
            {},
        )  # fmt: skip
        run = await store.run(RUN)
        assert run is not None and run.job_target == "kafka:orders.due"
        assert run.target is not None
        assert orjson.loads(run.target) == {"kafka": {"topic": "orders.due", "partition": 1}}
        [attempt] = await store.attempts(RUN)
        assert attempt.target == run.target
    db = sqlite3.connect(path)
    for table, columns in TARGET_COLUMNS.items():
        names = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        assert set(columns) <= names, table
    db.close()


async def test_a_dead_letter_names_its_target_and_a_later_run_record_keeps_it(
    tmp_path: Path,
) -> None:
    async with await HistoryStore.open(tmp_path / "h.db", namespace="demo") as store:
        await store.write(
            [
                AttemptFinished(
                    run_id=RUN, attempt=1, schedule_id="order-due", task=None,
                    status="failed", scheduled_ms=T0, started_ms=None, finished_ms=T0 + 2,
                    worker="shard-0", error_type="TargetRefused", error_message="refused",
                ),
                DeadLetterRow(
                    0, 7, RUN, "order-due", None, "kafkron.kafka", "TargetRefused", "refused",
                    1, T0 + 3, job_target="kafka:orders.due",
                ),
            ],
            {},
        )  # fmt: skip
        run = await store.run(RUN)
        assert run is not None and run.status == "dead_lettered"
        assert run.job_target == "kafka:orders.due" and run.target is None
        [letter] = await store.dead_letters()
        assert letter.job_target == "kafka:orders.due"
