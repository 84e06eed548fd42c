"""The recorder keeps ``{ns}.alerts`` on the real broker: committed alerts only, once
each through a redelivery and a rebuild, and the open ones as `kafkron alerts` and the
console read them (docs/DESIGN.md §9.3)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from actors.history.store import HistoryStore
from tests.broker.history.test_history_recorder import T0, produce, record_until_caught_up
from topics.alerts import Alert, AlertType, DeadlineKind, alert_value
from topics.names import Settings, TopicKind


def alert(run: str, kind: AlertType, at_ms: int) -> Alert:
    return Alert(
        kind, DeadlineKind.START, f"etl@{run}", "etl", None, T0, T0 + 5_000, 1,
        at_ms - T0 - 5_000, at_ms, None,
    )  # fmt: skip


async def recorded(db: Path) -> tuple[list[Alert], list[Alert]]:
    async with await HistoryStore.open(db, readonly=True) as store:
        return await store.alerts(), await store.alerts(open_only=True)


async def test_the_recorder_keeps_the_committed_alerts_once(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    topic = kafka_settings.topic(TopicKind.ALERTS)
    written = [
        alert("a", AlertType.MISSED, T0 + 10_000),
        alert("b", AlertType.MISSED, T0 + 11_000),
        alert("a", AlertType.RECOVERED, T0 + 20_000),
    ]
    records = [(topic, b"etl", alert_value(one)) for one in written]
    # `produce` also writes an aborted run record: read_committed never shows it.
    await produce(kafka_settings, records, f"{kafka_settings.namespace}-alerts-a")
    db = tmp_path / "history.db"
    await record_until_caught_up(kafka_settings, db)
    every, still_open = await recorded(db)
    assert sorted(every, key=repr) == sorted(written, key=repr)
    assert [a.run_id for a in still_open] == ["etl@b"]
    # Redelivered (a producer's retry, a recorder that lost its positions): no change.
    await produce(kafka_settings, records, f"{kafka_settings.namespace}-alerts-b")
    with sqlite3.connect(db) as raw:
        raw.execute("DELETE FROM offsets")
    await record_until_caught_up(kafka_settings, db)
    assert await recorded(db) == (every, still_open)
    await record_until_caught_up(kafka_settings, db, rebuild=True)
    assert await recorded(db) == (every, still_open)
