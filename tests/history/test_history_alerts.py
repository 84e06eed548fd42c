"""The deadline alerts in the history database (`actors.history.alerts`): the recorder's
row of each ``{ns}.alerts`` record, idempotent; the open ones by one query, the same
as the fold of the records (`actors.views.alerts.open_alerts`); `kafkron alerts`; and
`kafkron slo`'s count of them."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from actors.history.audit import AuditSource
from actors.history.recorder import RECORDED_KINDS, to_row
from actors.history.slo import schedule_slos
from actors.history.store import HistoryStore
from actors.views.alerts import open_alerts
from tests.history.test_audit_shard import Recorded, recorded_db
from tests.kit.cli import cli
from tests.kit.shard import MINUTE, T0, upsert
from topics.alerts import Alert, AlertType, DeadlineKind, alert_value
from topics.names import TopicKind


def alert(
    run: str, kind: AlertType, deadline: DeadlineKind, at_ms: int, schedule_id: str = "etl"
) -> Alert:
    return Alert(
        kind, deadline, f"{schedule_id}@{run}", schedule_id, None, T0, T0 + 5_000, 1,
        at_ms - T0 - 5_000, at_ms, None,
    )  # fmt: skip


def rows_of(alerts: list[Alert]) -> list[Alert]:
    """The recorder's rows of these alerts, through their wire bytes."""
    found = []
    for offset, one in enumerate(alerts):
        row = to_row(TopicKind.ALERTS, 0, offset, one.schedule_id.encode(), alert_value(one), 0)
        assert isinstance(row, Alert)
        found.append(row)
    return found


def test_the_recorder_reads_the_alerts_topic() -> None:
    assert TopicKind.ALERTS in RECORDED_KINDS
    one = alert("a", AlertType.MISSED, DeadlineKind.START, T0 + 10_000)
    assert rows_of([one]) == [one]


async def test_the_open_query_is_the_fold_of_the_records_and_rewrites_change_nothing(
    tmp_path: Path,
) -> None:
    rng = random.Random(7)
    alerts: list[Alert] = []
    at_ms = T0 + 10_000
    for i in range(200):
        run, deadline = f"r{i % 60}", rng.choice(list(DeadlineKind))
        at_ms += rng.randrange(1, 5_000)
        missed = alert(run, AlertType.MISSED, deadline, at_ms, rng.choice(["etl", "feed"]))
        if any((a.run_id, a.deadline) == (missed.run_id, deadline) for a in alerts):
            continue  # one deadline_missed per run and deadline, as the shard writes
        alerts.append(missed)
        if rng.random() < 0.5:
            at_ms += rng.randrange(1, 5_000)
            closing = alert(run, AlertType.RECOVERED, deadline, at_ms, missed.schedule_id)
            alerts.append(closing)
    now_ms = at_ms + MINUTE
    path = tmp_path / "h.db"
    async with await HistoryStore.open(path, namespace="ns") as store:
        rows = rows_of(alerts)
        await store.write(rows, {("ns.alerts", 0): len(rows)})
        await store.write(rows, {("ns.alerts", 0): len(rows)})  # redelivered: no change
        recorded = await store.alerts()
        assert sorted(recorded, key=repr) == sorted(alerts, key=repr)
        assert [o.alert for o in open_alerts(alerts, now_ms)] == await store.alerts(open_only=True)
        feed = await store.alerts(open_only=True, ids=["feed"], since_ms=T0 + 100_000)
        assert feed == [
            o.alert
            for o in open_alerts(alerts, now_ms)
            if o.alert.schedule_id == "feed" and o.alert.at_ms >= T0 + 100_000
        ]


async def _recorded(path: Path, alerts: list[Alert]) -> None:
    async with await HistoryStore.open(path, namespace="ns") as store:
        await store.write(rows_of(alerts), {})


def test_kafkron_alerts_lists_them_from_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    alerts = [
        alert("a", AlertType.MISSED, DeadlineKind.START, T0 + 10_000),
        alert("b", AlertType.MISSED, DeadlineKind.FINISH, T0 + 12_000, "feed"),
        alert("a", AlertType.RECOVERED, DeadlineKind.START, T0 + 20_000),
    ]
    path = tmp_path / "h.db"
    asyncio.run(_recorded(path, alerts))  # the command runs its own event loop
    monkeypatch.setattr("time.time", lambda: (T0 + MINUTE) / 1000)
    code, out, err = cli(capsys, "alerts", "--open", "--json", "--db", str(path))
    assert code == 0, err
    [shown] = json.loads(out)
    assert (shown["run_id"], shown["deadline"], shown["late_now_ms"]) == (
        "feed@b",
        "finish",
        MINUTE - 5_000,
    )
    code, out, err = cli(capsys, "alerts", "etl", "--db", str(path))
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[1] for line in lines[2:]] == ["deadline_missed", "deadline_recovered"]
    code, out, _ = cli(capsys, "alerts", "--since", "nonsense", "--db", str(path))
    assert code == 2


async def test_slo_counts_each_schedules_missed_deadlines_in_its_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    r = Recorded()
    r.send(upsert("d", spec={"every": "60s"}, deadline={"start_within_s": 1}), T0)
    r.send(upsert("e", spec={"every": "60s"}), T0)
    r.run_until(T0 + 10 * MINUTE)
    path = await recorded_db(tmp_path, r)
    async with await HistoryStore.open(path, namespace="ns") as store:
        await store.write(
            rows_of(
                [
                    alert("x", AlertType.MISSED, DeadlineKind.START, T0 + MINUTE, "d"),
                    alert("y", AlertType.MISSED, DeadlineKind.FINISH, T0 + 2 * MINUTE, "d"),
                    alert("x", AlertType.RECOVERED, DeadlineKind.START, T0 + 3 * MINUTE, "d"),
                    alert("z", AlertType.MISSED, DeadlineKind.START, T0 + 20 * MINUTE, "d"),
                ]
            ),
            {},
        )
    with AuditSource(path) as source:
        found, _ = schedule_slos(source, None, T0, T0 + 10 * MINUTE - 1, None)
    by = {one.schedule_id: one for one in found}
    assert by["d"].alerts == {"start": 1, "finish": 1}  # z was decided after the window
    assert by["e"].alerts == {"start": 0, "finish": 0}
    assert "deadline_missed: 1 start, 1 finish" in by["d"].text()
    monkeypatch.setattr("time.time", lambda: (T0 + 10 * MINUTE) / 1000)
    code, out, err = cli(capsys, "slo", "d", "--since", "10m", "--settle-s", "0", "--json",
                         "--db", str(path))  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["schedules"]["d"]["deadline_missed"] == {"start": 1, "finish": 1}
