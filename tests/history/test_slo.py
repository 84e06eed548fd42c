"""`kafkron slo` and the console's per-schedule SLO (`actors.history.slo`): each schedule's
share of runs started within S (its deadline's S by default), lateness, outcomes and
gaps, on the history of a real shard core's hour (`test_audit_shard.live_an_hour`)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from actors.history.audit import AuditSource, slo
from actors.history.slo import DEFAULT_WITHIN_MS, schedule_slos
from actors.history.store import HistoryStore
from tests.history.test_audit_shard import Recorded, live_an_hour, recorded_db
from tests.kit.cli import cli
from tests.kit.shard import MINUTE, SECOND, T0, upsert
from topics.timefmt import format_ms


async def test_each_schedule_is_judged_by_its_own_deadline_and_its_gaps_counted(
    tmp_path: Path,
) -> None:
    r = Recorded()
    # d promises to start within 1 s (the worker starts 40 ms after each fire); e has
    # no deadline: the default S.
    r.send(upsert("d", spec={"every": "60s"}, deadline={"start_within_s": 1}), T0)
    r.send(upsert("e", spec={"every": "60s"}), T0)
    r.run_until(T0 + 10 * MINUTE)
    path = await recorded_db(tmp_path, r)
    with AuditSource(path) as source:
        assert source.start_within_ms("d") == 1_000 and source.start_within_ms("e") is None
        found, overall = schedule_slos(source, None, T0, T0 + 10 * MINUTE - 1, None)
        by = {one.schedule_id: one for one in found}
        assert by["d"].report.within_ms == 1_000
        assert by["e"].report.within_ms == DEFAULT_WITHIN_MS
        assert overall.started == by["d"].report.started + by["e"].report.started
        assert by["d"].gaps == by["e"].gaps == 0
        assert by["d"].succeeded == by["d"].report.started == 10
    with sqlite3.connect(path) as db:
        db.execute(
            "DELETE FROM runs WHERE schedule_id = 'e' AND scheduled_ms = ?", (T0 + 3 * MINUTE,)
        )
    with AuditSource(path) as source:
        found, _ = schedule_slos(source, ["e"], T0, T0 + 10 * MINUTE - 1, 2_000)
        assert found[0].gaps == 1 and found[0].report.within_ms == 2_000


async def test_the_command_prints_and_exits_as_the_audit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    r = live_an_hour()
    path = await recorded_db(tmp_path, r)
    # The window ends an hour after T0: the command counts to now less --settle-s, so
    # the clock is put there.
    monkeypatch.setattr("time.time", lambda: (T0 + 60 * MINUTE) / 1000)
    since = format_ms(T0)
    code, out, err = cli(
        capsys, "slo", "--since", since, "--settle-s", "0", "--json", "--db", str(path)
    )
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc["schedules"]) == {"a", "b", "c"}
    with AuditSource(path) as source:
        expected = slo(source, T0, T0 + 60 * MINUTE, 5 * SECOND, ["a", "b", "c"])
    assert doc["overall"]["started"] == expected.started
    assert doc["overall"]["gaps"] == 0
    assert doc["schedules"]["c"]["missed"] > 100
    with sqlite3.connect(path) as db:
        db.execute(
            "DELETE FROM runs WHERE schedule_id = 'a' AND scheduled_ms = ?", (T0 + 14 * MINUTE,)
        )
    code, out, _ = cli(capsys, "slo", "a", "--since", since, "--settle-s", "0", "--db", str(path))
    assert code == 1
    assert "a: " in out and "1 gaps" in out


async def test_an_empty_history_is_said_not_crashed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "h.db"
    async with await HistoryStore.open(path, namespace="ns"):
        pass
    code, out, _ = cli(capsys, "slo", "--since", "1h", "--settle-s", "0", "--db", str(path))
    assert code == 0 and "overall" in out
