"""`kafkron dag`: the view of a run (table, JSON, DOT) and the checks made before sending.

The view is built from a changelog record written by a real `ShardCore`, decoded
with the shard's decoder, exactly as `kafkron dag show` reads it from Kafka.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.examples.billing.dag import DAG_ID, nightly_billing
from actors.shard.state import ScheduleState, decode_schedule
from actors.views.dag_view import (
    RESULT_LOOKAHEAD_MS,
    RESULT_LOOKBACK_MS,
    ViewError,
    dag_view,
    dot,
    header_lines,
    result_query,
    table_rows,
    view_json,
)
from tests.kit.cli import cli
from tests.kit.shard import SECOND, T0, Shard, command
from topics.messages import Result, parse_result, result_value, run_id_for
from topics.names import TopicKind

RUN_ID = run_id_for(DAG_ID, T0)


def billing_state() -> tuple[Shard, ScheduleState]:
    """nightly-billing mid-run: fx-rates failed past its retries, usage-rollup retrying."""
    shard = Shard(now_ms=T0 - SECOND)
    body = nightly_billing(customers=10)
    body["tasks"]["fx-rates"]["retry"] = {"max_attempts": 2, "initial_s": 1, "jitter": "none"}
    body["tasks"]["usage-rollup"]["retry"] = {"max_attempts": 3, "initial_s": 60, "jitter": "none"}
    shard.send(body)
    roots = {r.task: r for r in shard.run_until(T0).runs}
    shard.report(roots["usage-rollup"], "failed", at_ms=T0 + SECOND)  # retried at T0 + 61 s
    shard.report(roots["fx-rates"], "failed")
    [retry] = shard.run_until(T0 + 2 * SECOND).runs
    assert retry.task == "fx-rates"
    assert [d.task for d in shard.report(retry, "failed").dlq] == ["fx-rates"]
    value = shard.changelog[DAG_ID.encode()]
    assert value is not None
    return shard, decode_schedule(value)


def test_the_view_shows_each_task_state_in_stages() -> None:
    _, state = billing_state()
    view = dag_view(state)
    assert view.run_id == RUN_ID and view.run_state == "running"
    assert view.logical_date == "2026-10-09T00:00:00.000Z"
    rows = {row[1]: row for row in table_rows(view)}
    assert rows["fx-rates"][:3] == ("1", "fx-rates", "failed")
    assert rows["fx-rates"][3] == "attempt 2"
    assert rows["usage-rollup"][2] == "retrying"
    assert rows["usage-rollup"][3] == "attempt 2 at 2026-10-10T00:01:01.000Z"
    assert rows["invoice-nightly"][:3] == ("2", "invoice-nightly", "upstream_failed")
    assert rows["invoice-nightly"][4] == "usage-rollup, fx-rates"
    assert rows["send-invoices"][:3] == ("3", "send-invoices", "upstream_failed")
    lines = header_lines(view)
    assert lines[1] == f"run {RUN_ID}: running"
    assert "data interval [2026-10-09T00:00:00.000Z, 2026-10-10T00:00:00.000Z)" in lines[2]
    as_json = view_json(view)
    assert [t["task"] for t in as_json["tasks"]] == [
        "usage-rollup",
        "fx-rates",
        "invoice-nightly",
        "send-invoices",
    ]


def test_dot_has_a_node_per_task_coloured_by_state_and_an_edge_per_dependency() -> None:
    _, state = billing_state()
    text = dot(dag_view(state))
    assert text.startswith('digraph "nightly-billing" {')
    assert '"fx-rates" [label="fx-rates\\nfailed\\nattempt 2", fillcolor="#f08080"];' in text
    assert '"send-invoices" [label="send-invoices\\nupstream_failed"' in text
    edges = sorted(line.strip() for line in text.splitlines() if "->" in line)
    assert edges == [
        '"fx-rates" -> "invoice-nightly";',
        '"invoice-nightly" -> "send-invoices";',
        '"usage-rollup" -> "invoice-nightly";',
    ]
    assert text.rstrip().endswith("}")


def test_a_dag_before_its_first_run_and_a_run_the_shard_does_not_know() -> None:
    shard = Shard(now_ms=T0 - SECOND)
    shard.send(nightly_billing())
    value = shard.changelog[DAG_ID.encode()]
    assert value is not None
    view = dag_view(decode_schedule(value))
    assert view.run_id is None and {t.state for t in view.tasks} == {"no run"}
    assert header_lines(view)[1] == "no run yet"
    old_run = "nightly-billing@2020-01-01T00:00:00.000Z"
    with pytest.raises(ViewError, match="not among the runs") as raised:
        dag_view(decode_schedule(value), old_run)
    assert f"`kafkron history '{old_run}'`" in str(raised.value)  # where an old run still is
    plain = Shard(now_ms=T0)
    plain.send(command("schedule.upsert", "s", spec={"every": "1m"}, job={"name": "x"}))
    plain_value = plain.changelog[b"s"]
    assert plain_value is not None
    with pytest.raises(ViewError, match="is a schedule, not a DAG"):
        dag_view(decode_schedule(plain_value))


def test_dag_upsert_and_clear_refuse_bad_input_before_sending(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cyclic = nightly_billing()
    cyclic["tasks"]["fx-rates"]["after"] = ["send-invoices"]
    path = tmp_path / "cyclic.json"
    path.write_text(json.dumps(cyclic, indent=2))
    code, _, err = cli(capsys, "dag", "upsert", str(path))
    assert code == 2
    assert "fx-rates -> invoice-nightly -> send-invoices -> fx-rates" in err
    path.write_text('{"v": 1, "type": "schedule.delete", "id": "x"}')
    code, _, err = cli(capsys, "dag", "upsert", str(path))
    assert code == 2 and "dag.upsert" in err
    code, _, err = cli(capsys, "dag", "clear", DAG_ID, "not-a-run", "fx-rates")
    assert code == 2 and "run_id" in err
    code, _, _ = cli(capsys, "dag")
    assert code == 2


def test_the_example_command_file_is_a_valid_dag_upsert() -> None:
    from topics.codec import dumps
    from topics.commands import DagUpsert, decode_command

    decoded = decode_command(DAG_ID.encode(), dumps(nightly_billing()), T0)
    assert isinstance(decoded, DagUpsert)
    assert decoded.topo_order == ("usage-rollup", "fx-rates", "invoice-nightly", "send-invoices")
    assert decoded.tasks["invoice-nightly"].after == ("usage-rollup", "fx-rates")
    assert decoded.tasks["send-invoices"].after == ("invoice-nightly",)


def _ended_billing() -> tuple[Shard, ScheduleState, Result, bytes]:
    """billing_state's run after the rest has ended: its changelog state, its run-level
    result and that result's record value."""
    shard, _ = billing_state()
    [retry] = shard.run_until(T0 + 62 * SECOND).runs  # its retry, due at T0 + 61 s
    out = shard.report(retry, "succeeded", at_ms=T0 + 65 * SECOND)
    [record] = [r for r in out.of(TopicKind.RESULTS) if b'"counts"' in (r.value or b"")]
    assert record.value is not None
    value = shard.changelog[DAG_ID.encode()]
    assert value is not None
    return shard, decode_schedule(value), parse_result(record.value), record.value


def test_an_ended_run_shows_its_own_result_status_counts_and_duration() -> None:
    _, state, whole, value = _ended_billing()
    query = result_query(state)
    assert query is not None
    ended_ms = T0 + 65 * SECOND
    assert (query.run_id, query.attempt) == (RUN_ID, 1)
    assert (query.since_ms, query.until_ms) == (
        ended_ms - RESULT_LOOKBACK_MS,
        ended_ms + RESULT_LOOKAHEAD_MS,
    )
    assert query.result(value) == whole and query.done(value, ended_ms)
    task_value = result_value(
        run_id=f"{RUN_ID}/fx-rates",
        schedule_id=DAG_ID,
        task="fx-rates",
        attempt=1,
        status="failed",
        scheduled_ms=T0,
        started_ms=T0,
        finished_ms=T0,
        worker="w-1",
        error={"type": "E", "message": "m"},
    )
    for other in (task_value, value.replace(b'"attempt":1', b'"attempt":2'), b"not json", None):
        assert query.result(other) is None
        assert not query.done(other, ended_ms)
    assert query.done(task_value, query.until_ms + 1)  # past the window: give up

    view = dag_view(state, result=whole, looked_for_result=True)
    assert view.run_state == "failed" and view.result is not None
    assert view.result.counts == {"succeeded": 1, "failed": 1, "upstream_failed": 2}
    assert view.result.duration_ms == 65 * SECOND  # from the run's first fire
    lines = header_lines(view)
    assert lines[3] == "result: failed in 1 m 05 s (attempt 1), tasks 1 succeeded, 1 failed, " + (
        "2 upstream_failed"
    )
    assert "task(s) at fault: fx-rates" in lines[4]
    as_json = view_json(view)["result"]
    assert (as_json["status"], as_json["duration_ms"], as_json["counts"]) == (
        "failed",
        65 * SECOND,
        {"succeeded": 1, "failed": 1, "upstream_failed": 2},
    )
    assert as_json["finished_at"] == "2026-10-10T00:01:05.000Z"
    assert 'label="nightly-billing@2026-10-10T00:00:00.000Z (failed in 1 m 05 s: ' in dot(view)


def test_a_result_not_found_or_not_the_latest_is_said_so() -> None:
    shard, state, whole, _ = _ended_billing()
    missing = dag_view(state, looked_for_result=True)
    assert missing.result is None and missing.result_missing
    assert f"see `kafkron history '{RUN_ID}'`" in header_lines(missing)[3]
    assert view_json(missing)["result"] is None
    # Not looked for (the console): nothing said about it.
    assert not dag_view(state).result_missing and len(header_lines(dag_view(state))) == 3
    # Cleared and running again: no result is the run's; ended again, attempt 2 is.
    out = shard.send(command("dag.clear", DAG_ID, run_id=RUN_ID, task="fx-rates"))
    assert out.rejected == []
    value = shard.changelog[DAG_ID.encode()]
    assert value is not None
    running = decode_schedule(value)
    assert result_query(running) is None
    view = dag_view(running, result=whole, looked_for_result=True)
    assert (view.run_state, view.result, view.result_missing) == ("running", None, False)
    roots = [r for r in out.runs if r.task == "fx-rates"]
    assert shard.send(command("run.cancel", DAG_ID, run_id=RUN_ID)).rejected == []
    shard.report(roots[0], "cancelled", at_ms=T0 + 70 * SECOND)
    value = shard.changelog[DAG_ID.encode()]
    assert value is not None
    again = decode_schedule(value)
    query = result_query(again)
    assert query is not None and query.attempt == 2 and query.since_ms < T0 + 70 * SECOND
    assert dag_view(again, result=whole, looked_for_result=True).result is None  # attempt 1
