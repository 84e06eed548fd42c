"""`kafkron history` over a database built by the store (no Kafka needed)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from actors.history.recorder import to_row
from actors.history.store import AttemptFinished, AttemptFired, DeadLetterRow, HistoryStore
from tests.kit.cli import cli
from tests.kit.shard import SECOND, Out, Shard, command
from tests.kit.shard import T0 as SHARD_T0
from topics.messages import run_id_for
from topics.names import TopicKind
from topics.timefmt import format_ms

T0 = 1_790_000_000_000


def fired(schedule_id: str, at_ms: int, attempt: int, fired_ms: int) -> AttemptFired:
    return AttemptFired(
        f"{schedule_id}@{format_ms(at_ms)}",
        attempt,
        schedule_id,
        None,
        "billing.job",
        at_ms,
        fired_ms,
        None,
    )


def done(
    schedule_id: str, at_ms: int, attempt: int, status: str, error: str | None = None
) -> AttemptFinished:
    return AttemptFinished(
        run_id=f"{schedule_id}@{format_ms(at_ms)}",
        attempt=attempt,
        schedule_id=schedule_id,
        task=None,
        status=status,
        scheduled_ms=at_ms,
        started_ms=at_ms + 100,
        finished_ms=at_ms + 1_600,
        worker="worker-7",
        error_type="CardDeclined" if error else None,
        error_message=error,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "history.db"

    async def build() -> None:
        async with await HistoryStore.open(path, namespace="demo") as store:
            await store.write(
                [
                    fired("fx-rates", T0, 1, T0 + 40),
                    done("fx-rates", T0, 1, "succeeded"),
                    fired("fx-rates", T0 + 5_000, 1, T0 + 5_010),
                    done("fx-rates", T0 + 5_000, 1, "succeeded"),
                    fired("charge", T0, 1, T0 + 2),
                    done("charge", T0, 1, "failed", "card declined"),
                    fired("charge", T0, 2, T0 + 1_000),
                    done("charge", T0, 2, "failed", "card declined"),
                    DeadLetterRow(
                        0,
                        0,
                        f"charge@{format_ms(T0)}",
                        "charge",
                        None,
                        "billing.charge",
                        "CardDeclined",
                        "card declined",
                        2,
                        T0 + 2_000,
                    ),
                ],
                {},
            )

    asyncio.run(build())
    return path


def test_without_id_shows_the_latest_run_of_each_schedule_failures_first(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "history", "--db", str(db))
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split()[0] == "schedule"  # title, then the header row
    charge, fx = lines[2], lines[3]
    assert (
        charge.startswith("charge")
        and "dead_lettered" in charge
        and "CardDeclined: card declined" in charge
    )
    assert fx.startswith("fx-rates") and "succeeded" in fx and "1.5 s" in fx and "10 ms" in fx


def test_json_output_has_every_column(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "history", "fx-rates", "--json", "--db", str(db))
    assert code == 0
    runs = json.loads(out)
    assert [r["scheduled_at"] for r in runs] == [format_ms(T0 + 5_000), format_ms(T0)]
    newest = runs[0]
    assert newest["status"] == "succeeded"
    assert newest["duration_ms"] == 1_500 and newest["lateness_ms"] == 10
    assert newest["attempts"] == 1 and newest["worker"] == "worker-7" and newest["error"] is None
    assert newest["started_at"] == format_ms(T0 + 5_100)


def test_filters_and_last(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = cli(capsys, "history", "--status", "dead_lettered", "--json", "--db", str(db))
    assert [r["schedule_id"] for r in json.loads(out)] == ["charge"]
    _, out, _ = cli(capsys, "history", "fx-rates", "--last", "1", "--json", "--db", str(db))
    assert len(json.loads(out)) == 1
    since = format_ms(T0 + 1_000)
    _, out, _ = cli(capsys, "history", "--since", since, "--json", "--db", str(db))
    assert [r["run_id"] for r in json.loads(out)] == [f"fx-rates@{format_ms(T0 + 5_000)}"]
    _, out, _ = cli(capsys, "history", "--since", "1h", "--json", "--db", str(db))
    assert json.loads(out) == []  # everything above is from 2026-09, long before "1h ago"


def test_a_run_id_shows_each_attempt(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = f"charge@{format_ms(T0)}"
    code, out, _ = cli(capsys, "history", run_id, "--json", "--db", str(db))
    assert code == 0
    run = json.loads(out)
    assert run["status"] == "dead_lettered" and run["attempts"] == 2
    assert [(a["attempt"], a["status"]) for a in run["attempt_history"]] == [
        (1, "failed"),
        (2, "failed"),
    ]
    code, out, _ = cli(capsys, "history", run_id, "--db", str(db))
    assert code == 0 and "dead_lettered after 2 attempt(s)" in out


def test_bad_usage_exits_2(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "history", "--since", "yesterday-ish", "--db", str(db))
    assert code == 2 and "--since" in err
    code, _, err = cli(capsys, "history", "--last", "0", "--db", str(db))
    assert code == 2
    code, _, err = cli(capsys, "history", "--status", "exploded", "--db", str(db))
    assert code == 2 and "invalid choice" in err


def test_missing_database_says_how_to_build_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "history", "--db", str(tmp_path / "none.db"))
    assert code == 1 and "kafkron recorder" in err


def test_env_names_the_database(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKRON_HISTORY_DB", str(db))
    code, out, _ = cli(capsys, "history", "charge", "--json")
    assert code == 0 and json.loads(out)[0]["status"] == "dead_lettered"


def test_unknown_run_is_a_failure(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "history", "nope@2026-01-01T00:00:00.000Z", "--db", str(db))
    assert code == 1 and "no run" in err


def test_a_dag_run_shows_its_own_results_with_counts_and_its_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a real shard wrote for a DAG run (a -> b: b failed, was cleared, succeeded)
    # and the worker's results, turned into rows by the recorder's own converter.
    shard = Shard(now_ms=SHARD_T0 - SECOND)
    shard.send(
        {
            "v": 1,
            "type": "dag.upsert",
            "id": "pair",
            "spec": {"cron": "0 0 * * *"},
            "retry": {"max_attempts": 1},
            "tasks": {
                "a": {"job": {"name": "j.a"}},
                "b": {"job": {"name": "j.b"}, "after": ["a"]},
            },
        }
    )
    reported: list[tuple[bytes | None, bytes | None]] = []  # the worker's results
    apply_result = shard.raw_result

    def raw_result(key: bytes | None, value: bytes | None) -> Out:
        reported.append((key, value))
        return apply_result(key, value)

    shard.raw_result = raw_result  # type: ignore[method-assign]
    [a] = shard.run_until(SHARD_T0).runs
    [b] = shard.report(a, "succeeded", at_ms=SHARD_T0 + SECOND).runs
    shard.report(b, "failed", at_ms=SHARD_T0 + 3 * SECOND)
    run_id = run_id_for("pair", SHARD_T0)
    [again] = shard.send(command("dag.clear", "pair", run_id=run_id, task="b")).runs
    shard.report(again, "succeeded", at_ms=SHARD_T0 + 9 * SECOND)
    records = [(r.topic, r.key, r.value) for r in shard.written]
    records += [(TopicKind.RESULTS, key, value) for key, value in reported]
    rows = [
        to_row(topic, 0, offset, key, value, shard.now_ms)
        for offset, (topic, key, value) in enumerate(records)
        if topic in (TopicKind.RUNS, TopicKind.RESULTS)
    ]
    path = tmp_path / "history.db"

    async def build() -> None:
        async with await HistoryStore.open(path, namespace="demo") as store:
            await store.write([row for row in rows if row is not None], {})

    asyncio.run(build())
    code, out, _ = cli(capsys, "history", run_id, "--json", "--db", str(path))
    assert code == 0
    doc = json.loads(out)
    assert (doc["status"], doc["attempts"], doc["task"]) == ("succeeded", 2, None)
    assert [(a["attempt"], a["status"], a["counts"]) for a in doc["attempt_history"]] == [
        (1, "failed", {"succeeded": 1, "failed": 1}),
        (2, "succeeded", {"succeeded": 2}),
    ]
    assert doc["attempt_history"][0]["duration_ms"] == 3 * SECOND  # from its first fire
    assert [(t["task"], t["status"], t["attempts"]) for t in doc["tasks"]] == [
        ("a", "succeeded", 1),
        ("b", "succeeded", 2),
    ]
    code, out, _ = cli(capsys, "history", run_id, "--db", str(path))
    assert code == 0
    assert f"{run_id}: DAG run succeeded after 2 end(s)" in out
    assert "1 succeeded, 1 failed" in out and "tasks of " + run_id in out
    # A task run is an ordinary run: no tasks of its own.
    code, out, _ = cli(capsys, "history", f"{run_id}/b", "--json", "--db", str(path))
    assert code == 0 and "tasks" not in json.loads(out)
    assert [a["counts"] for a in json.loads(out)["attempt_history"]] == [None, None]
