"""`kafkron audit` on a history a real shard core wrote (no Kafka): exit codes, text, JSON."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.history.test_audit_shard import live_an_hour, recorded_db
from tests.kit.cli import cli
from tests.kit.shard import MINUTE, T0
from topics.timefmt import format_ms

WINDOW = ("--from", format_ms(T0), "--to", format_ms(T0 + 60 * MINUTE - 1), "--settle-s", "0")


async def test_a_complete_window_exits_0_and_a_vanished_run_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(await recorded_db(tmp_path, live_an_hour()))
    code, out, _ = cli(capsys, "audit", "--all", *WINDOW, "--db", db)
    assert code == 0 and "audit of 3 schedules" in out and "gaps 0" in out
    code, out, _ = cli(capsys, "audit", "b", *WINDOW, "--json", "--db", db)
    doc = json.loads(out)
    assert code == 0 and [i["status"] for i in doc["instants"]] == ["succeeded"] * 3
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM runs WHERE run_id = ?", (doc["instants"][1]["run_id"],))
    code, out, _ = cli(capsys, "audit", "--all", *WINDOW, "--db", db)
    assert code == 1 and f"GAP  b  {format_ms(T0 + MINUTE)}" in out
    code, out, _ = cli(capsys, "audit", "b", "nobody", *WINDOW, "--db", db)
    assert code == 1 and f"b  {format_ms(T0 + MINUTE)}  GAP" in out
    assert "nobody: no definition recorded; not judged" in out
    code, out, _ = cli(capsys, "audit", "--slo", *WINDOW, "--json", "--db", db)
    slo = json.loads(out)["slo"]
    assert code == 0 and slo["within_ms"] == 5000 and 0 < slo["share"] < 1
    assert slo["outcomes"]["missed"] > 0 and slo["outcomes"]["succeeded"] > 0
    code, out, _ = cli(capsys, "audit", "--slo", "a", "c", *WINDOW, "--within-s", "1", "--db", db)
    assert code == 0 and "  a: slo: " in out and "  c: slo: " in out and "within 1 s" in out


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "audit", "--db", str(tmp_path / "x.db"))[0] == 2
    assert cli(capsys, "audit", "a", "--all", "--db", str(tmp_path / "x.db"))[0] == 2
    code, _, err = cli(capsys, "audit", "--all", "--from", "yesterday")
    assert code == 2 and "--from/--to" in err
    code, _, err = cli(capsys, "audit", "--all", "--db", str(tmp_path / "x.db"))
    assert code == 1 and "no history database" in err
