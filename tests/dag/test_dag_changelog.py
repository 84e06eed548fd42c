"""A DAG's changelog record is a public format: the typed run book writes it byte for byte.

`tests/fixtures/dag_changelog.json` holds every changelog value of two DAGs through a
scripted story (`story`), as the run book of plain dicts wrote them before it
was typed: runs waiting, running, retrying, failing into ``upstream_failed``,
cleared, cancelled before and after a first end (the two places ``cancel`` and
``ends`` take in a run), a re-upsert that removes a task and adds one, and a
small DAG whose ended runs are forgotten past the memory bound. Today's shard
must write exactly those bytes, and each of them must decode and encode back
unchanged (what a restored shard writes is what the old one wrote).

Regenerate (only when the format is meant to change):
``python -m tests.dag.test_dag_changelog`` from the repository's root.
"""

from __future__ import annotations

import json

import orjson
import pytest

from actors.shard import dag_run
from actors.shard.state import decode_schedule, encode_schedule
from tests.kit.paths import FIXTURES
from tests.kit.shard import DAY, SECOND, T0, Out, Shard, command
from topics.messages import Run, run_id_for

FIXTURE = FIXTURES / "dag_changelog.json"
DAG_ID = "nightly-billing"
SMALL_ID = "tiny"
_FIRST_SMALL = run_id_for(SMALL_ID, T0 + 2 * DAY + 3600 * SECOND)  # forgotten by the end
RETRY = {"max_attempts": 2, "initial_s": 1, "coefficient": 1.0, "jitter": "none"}


def _billing(*, with_audit: bool = False) -> dict[str, object]:
    tasks: dict[str, object] = {
        "usage-rollup": {"job": {"name": "billing.usage_rollup", "args": {}}},
        "fx-rates": {"job": {"name": "billing.fx_rates", "args": {}}},
        "invoice-nightly": {
            "job": {"name": "billing.invoice_nightly", "args": {}},
            "after": ["usage-rollup", "fx-rates"],
        },
        "send-invoices": {
            "job": {"name": "billing.send_invoices", "args": {}},
            "after": ["invoice-nightly"],
        },
    }
    if with_audit:  # fx-rates removed, audit added after invoice-nightly
        del tasks["fx-rates"]
        tasks["invoice-nightly"] = {
            "job": {"name": "billing.invoice_nightly", "args": {}},
            "after": ["usage-rollup"],
        }
        tasks["audit"] = {"job": {"name": "billing.audit", "args": {}}, "after": ["usage-rollup"]}
    return {
        "v": 1,
        "type": "dag.upsert",
        "id": DAG_ID,
        "spec": {"cron": "0 0 * * *"},
        "retry": RETRY,
        "tasks": tasks,
    }


def _small() -> dict[str, object]:
    return {
        "v": 1,
        "type": "dag.upsert",
        "id": SMALL_ID,
        "spec": {"every": "1h"},
        "retry": {"max_attempts": 1},
        "tasks": {"only": {"job": {"name": "tiny.only", "args": {}}}},
    }


def _tasks(out: Out) -> dict[str, Run]:
    return {run.task: run for run in out.runs if run.task is not None}


def story() -> list[str]:
    """Every changelog value of the two DAGs, in the order the shard wrote them."""
    shard = Shard(now_ms=T0 - 10 * SECOND)
    written: list[str] = []
    kept = {DAG_ID.encode()}

    def keep(out: Out) -> Out:
        written.extend(r.value.decode() for r in out.changelog if r.value and r.key in kept)
        return out

    def report(run: Run, status: str) -> dict[str, Run]:
        return _tasks(keep(shard.report(run, status, at_ms=shard.now_ms + SECOND)))

    keep(shard.send(_billing()))
    roots = _tasks(keep(shard.run_until(T0)))  # day 1: waiting and running tasks
    report(roots["fx-rates"], "succeeded")
    invoice = report(roots["usage-rollup"], "succeeded")["invoice-nightly"]
    report(invoice, "failed")
    [retry] = keep(shard.run_until(shard.now_ms + 2 * SECOND)).runs
    report(retry, "failed")  # past its retries: send-invoices upstream_failed, the run failed
    run_1 = run_id_for(DAG_ID, T0)
    cleared = _tasks(
        keep(shard.send(command("dag.clear", DAG_ID, run_id=run_1, task="invoice-nightly")))
    )
    # Cancelled after its first end: "ends" comes before "cancel" in the run.
    keep(shard.send(command("run.cancel", DAG_ID, run_id=run_1, reason="after a clear")))
    report(cleared["invoice-nightly"], "cancelled")

    roots = _tasks(keep(shard.run_until(T0 + DAY)))  # day 2: cancelled before any end
    run_2 = run_id_for(DAG_ID, T0 + DAY)
    keep(shard.send(command("run.cancel", DAG_ID, run_id=run_2, reason="wrong prices")))
    report(roots["usage-rollup"], "succeeded")
    report(roots["fx-rates"], "cancelled")

    roots = _tasks(keep(shard.run_until(T0 + 2 * DAY)))  # day 3: the graph changes mid-run
    keep(shard.send(_billing(with_audit=True)))
    after = report(roots["usage-rollup"], "succeeded")
    follow = report(after["invoice-nightly"], "succeeded")
    report(after["audit"], "succeeded")
    report(follow["send-invoices"], "succeeded")
    report(roots["fx-rates"], "cancelled")  # the removed task's worker confirms
    keep(shard.send(command("schedule.pause", DAG_ID)))

    keep(shard.send(_small()))  # past the memory bound: the oldest ended runs are forgotten
    for hour in range(1, dag_run.ENDED_MEMORY + 3):
        if hour == dag_run.ENDED_MEMORY:  # the records before only grow the list of runs
            kept.add(SMALL_ID.encode())
        [only] = keep(shard.run_until(T0 + 2 * DAY + hour * 3600 * SECOND)).runs
        report(only, "succeeded" if hour % 5 else "failed")
    return written


def _fixture() -> list[str]:
    values: list[str] = json.loads(FIXTURE.read_text(encoding="utf-8"))["values"]
    return values


def test_the_shard_writes_the_dag_records_the_untyped_run_book_wrote() -> None:
    expected = _fixture()
    assert story() == expected
    # The story reaches every shape, or the comparison proves little.
    text = "\n".join(expected)
    for shape in ('"in_degree"', '"upstream_failed"', '"removed"', '"cancel"', '"ends":2'):
        assert shape in text, shape
    assert any(v.index('"cancel"') < v.index('"ends"') for v in expected if '"cancel"' in v)
    assert any(v.index('"ends"') < v.index('"cancel"') for v in expected if '"cancel"' in v)
    small = [orjson.loads(v)["dag"]["runs"] for v in expected if f'"id":"{SMALL_ID}"' in v]
    assert len(small[-1]) == dag_run.ENDED_MEMORY and _FIRST_SMALL not in small[-1]


def test_every_dag_record_decodes_and_encodes_back_unchanged() -> None:
    for value in _fixture():
        state = decode_schedule(value.encode())
        assert state.dag is not None
        assert encode_schedule(state).decode() == value


if __name__ == "__main__":
    FIXTURE.write_text(
        json.dumps(
            {
                "about": "Every changelog value of the DAGs of test_dag_changelog.story, "
                "as the untyped DAG run book wrote them.",
                "values": story(),
            },
            indent=0,
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )


def test_a_dag_value_this_version_did_not_write_is_refused_with_what_is_wrong() -> None:
    value = _fixture()[3]
    for bad, words in (
        (value.replace('"state":"running"', '"state":"paused"', 1), r"dag.runs\['nightly.*paused"),
        (value.replace('"logical_date"', '"logical"', 1), "no 'logical_date'"),
        (value.replace('"dag":{"runs":', '"dag":{"ruins":', 1), "runs"),
        (value.replace('"dag":{"runs":{', '"dag":{"runs":[],"old":{', 1), "expected an object"),
    ):
        assert bad != value
        with pytest.raises((ValueError, KeyError, TypeError), match=words):
            decode_schedule(bad.encode())
