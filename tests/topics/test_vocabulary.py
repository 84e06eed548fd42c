"""The vocabulary enums are the wire contract: their values are exactly the documented
strings, and a member travels (orjson, SQLite, equality, hashing) as its string."""

from __future__ import annotations

import sqlite3

import orjson

from topics.messages import STATUSES, parse_result, result_value
from topics.vocabulary import (
    SHARD_DECIDED,
    DagRunState,
    DstFold,
    DstGap,
    JitterMode,
    MisfireMode,
    OverlapPolicy,
    RunStatus,
    TaskState,
)


def test_wire_values_are_the_documented_strings() -> None:
    # docs/DESIGN.md §2.2 and §2.4 and the README's schema spell these; changing one
    # is a change of the public contract, not a refactoring.
    assert [s.value for s in RunStatus] == [
        "succeeded",
        "failed",
        "timed_out",
        "cancelled",
        "skipped",
        "missed",
        "upstream_failed",
        "running",
    ]
    assert [p.value for p in OverlapPolicy] == [
        "allow",
        "skip",
        "buffer_one",
        "buffer_all",
        "cancel_other",
    ]
    assert [m.value for m in MisfireMode] == ["run_once", "catch_up", "skip"]
    assert [j.value for j in JitterMode] == ["full", "none"]
    assert [g.value for g in DstGap] == ["shift", "skip"]
    assert [f.value for f in DstFold] == ["once", "twice"]
    assert [t.value for t in TaskState] == [
        "waiting",
        "running",
        "succeeded",
        "failed",
        "cancelled",
        "upstream_failed",
        "removed",
    ]
    assert [r.value for r in DagRunState] == ["running", "succeeded", "failed", "cancelled"]
    assert {"missed", "skipped", "upstream_failed"} == SHARD_DECIDED
    assert tuple(RunStatus) == STATUSES


def test_a_member_is_its_string_on_the_wire_and_in_the_store() -> None:
    assert RunStatus.SUCCEEDED == "succeeded"
    assert hash(RunStatus.SUCCEEDED) == hash("succeeded")
    assert f"{RunStatus.TIMED_OUT}" == "timed_out"
    assert orjson.dumps({"status": RunStatus.MISSED}) == b'{"status":"missed"}'
    db = sqlite3.connect(":memory:")
    db.execute("create table t (status text)")
    db.execute("insert into t values (?)", (RunStatus.CANCELLED,))
    assert db.execute("select status from t").fetchone() == ("cancelled",)


def test_a_parsed_result_carries_the_member() -> None:
    value = result_value(
        run_id="a@2026-10-10T00:00:00.000Z",
        schedule_id="a",
        task=None,
        attempt=1,
        status=RunStatus.SKIPPED,
        scheduled_ms=0,
        started_ms=None,
        finished_ms=None,
        worker="shard-0",
        error=None,
    )
    assert orjson.loads(value)["status"] == "skipped"
    status = parse_result(value).status
    assert status is RunStatus.SKIPPED
