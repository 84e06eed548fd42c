"""A DAG's deadline on the front ends: `kafkron dag upsert --start-within-s
--finish-within-s`, `kafkron next` of a ``dag.upsert``, `kafkron dag show`'s header and
JSON, and the Python client's builder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.examples.billing.dag import DAG_ID, nightly_billing
from actors.shard.state import decode_schedule
from actors.views.dag_view import dag_view, header_lines, view_json
from kafkron import Cron, Deadline, Task, dag_upsert
from tests.kit.cli import cli
from tests.kit.shard import SECOND, T0, Shard
from topics.commands import DagUpsert, decode_command


def test_the_flags_reach_the_dag_upsert_and_a_bad_one_names_itself(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "dag.json"
    path.write_text(json.dumps(nightly_billing()))
    code, out, err = cli(capsys, "dag", "upsert", str(path),
                         "--start-within-s", "60", "--finish-within-s", "900",
                         "--print")  # fmt: skip
    assert code == 0, err
    decoded = decode_command(DAG_ID.encode(), out.encode(), 0)
    assert isinstance(decoded, DagUpsert)
    assert decoded.deadline == Deadline(60, 900)
    code, out, err = cli(capsys, "dag", "upsert", str(path), "--finish-within-s", "0", "--print")
    assert code == 2 and out == ""
    assert "--finish-within-s: deadline.finish_within_s: must be between 1" in err


def test_next_of_a_dag_upsert_gives_its_roots_deadlines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = nightly_billing()
    body["spec"] = {"cron": "0 2 * * *"}
    body["deadline"] = {"start_within_s": 60}
    code, out, err = cli(capsys, "next", json.dumps(body), "--from", "2026-10-10T00:00:00Z",
                         "-n", "1")  # fmt: skip
    assert code == 0, err
    assert out.splitlines() == ["2026-10-10T02:00:00.000Z  roots start by 2026-10-10T02:01:00.000Z"]


def test_dag_show_states_the_deadline() -> None:
    shard = Shard(now_ms=T0 - SECOND)
    body = nightly_billing()
    body["deadline"] = {"start_within_s": 60, "finish_within_s": 900}
    assert not shard.send(body).rejected
    shard.run_until(T0)
    value = shard.changelog[DAG_ID.encode()]
    assert value is not None
    view = dag_view(decode_schedule(value))
    assert (
        "deadline: each task starts within 60 s and ends within 900 s of becoming ready"
        in header_lines(view)
    )
    assert view_json(view)["deadline"] == {"start_within_s": 60, "finish_within_s": 900}


def test_the_client_builder_writes_the_deadline() -> None:
    record = dag_upsert(
        "etl",
        Cron("0 2 * * *"),
        {"extract": Task("etl.extract"), "load": Task("etl.load", after=["extract"])},
        deadline=Deadline(start_within_s=30, finish_within_s=None),
    )
    assert json.loads(record.value)["deadline"] == {"start_within_s": 30}
    assert isinstance(record.decoded, DagUpsert)
    assert record.decoded.deadline == Deadline(30, None)
