"""DAGs through the shard core: records in, records out, restore mid-run.

The same `ShardCore` the scheduler runs, driven by commands and results alone
(`tests.kit.shard.Shard`); the worker is played by the test, reporting results.
"""

from __future__ import annotations

import random

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.shard import dag_run
from tests.kit.shard import DAY, MINUTE, SECOND, T0, Out, Shard, command
from topics.commands import DagUpsert, Rejection, decode_command
from topics.deadlines import TIMEOUT_MARGIN_MS
from topics.messages import Run, run_id_for
from topics.names import TopicKind
from topics.timefmt import format_ms

DAG_ID = "nightly-billing"
RUN_ID = run_id_for(DAG_ID, T0)
FAST_RETRY = {"max_attempts": 2, "initial_s": 1, "coefficient": 1.0, "jitter": "none"}


def billing_dag(**fields: object) -> dict[str, object]:
    body: dict[str, object] = {
        "v": 1,
        "type": "dag.upsert",
        "id": DAG_ID,
        "spec": {"cron": "0 0 * * *"},
        "retry": FAST_RETRY,
        "tasks": {
            "usage-rollup": {"job": {"name": "billing.usage_rollup", "args": {}}},
            "fx-rates": {"job": {"name": "billing.fx_rates", "args": {}}, "timeout_s": 60},
            "invoice-nightly": {
                "job": {"name": "billing.invoice_nightly", "args": {"customers": 10}},
                "after": ["usage-rollup", "fx-rates"],
                "retry": {"max_attempts": 3, "initial_s": 2, "coefficient": 1.0, "jitter": "none"},
            },
            "send-invoices": {
                "job": {"name": "billing.send_invoices", "args": {}},
                "after": ["invoice-nightly"],
            },
        },
    }
    body.update(fields)
    return body


def by_task(out: Out) -> dict[str, Run]:
    runs = {}
    for run in out.runs:
        assert run.task is not None
        runs[run.task] = run
    return runs


def started_shard() -> tuple[Shard, dict[str, Run]]:
    """A shard whose nightly-billing run of T0 has started its roots."""
    shard = Shard(now_ms=T0 - 10 * SECOND)
    assert shard.send(billing_dag()).rejected == []
    return shard, by_task(shard.run_until(T0))


def dag_doc(shard: Shard) -> dict[str, object]:
    doc = shard.state_doc(DAG_ID)["dag"]
    assert isinstance(doc, dict)
    return doc


def task_states(shard: Shard, run_id: str = RUN_ID) -> dict[str, str]:
    tasks = dag_doc(shard)["runs"][run_id]["tasks"]  # type: ignore[index]
    return {name: entry["state"] for name, entry in tasks.items()}


def test_a_cycle_is_rejected_naming_it() -> None:
    body = billing_dag()
    tasks = body["tasks"]
    assert isinstance(tasks, dict)
    tasks["usage-rollup"]["after"] = ["send-invoices"]
    decoded = decode_command(DAG_ID.encode(), orjson.dumps(body), T0)
    assert isinstance(decoded, Rejection)
    assert "usage-rollup -> invoice-nightly -> send-invoices -> usage-rollup" in decoded.reason
    [rejected] = Shard(now_ms=T0).send(body).rejected
    assert "usage-rollup -> invoice-nightly -> send-invoices -> usage-rollup" in rejected.reason


def test_unknown_dependency_and_empty_graph_are_rejected() -> None:
    body = billing_dag()
    tasks = body["tasks"]
    assert isinstance(tasks, dict)
    tasks["send-invoices"]["after"] = ["invoice-nigthly"]
    [rejected] = Shard(now_ms=T0).send(body).rejected
    assert "'invoice-nigthly' is not a task of this DAG" in rejected.reason
    [rejected] = Shard(now_ms=T0).send(billing_dag(tasks={})).rejected
    assert "at least one task" in rejected.reason


def test_decoded_dag_keeps_per_task_policies_and_inherits_the_rest() -> None:
    decoded = decode_command(DAG_ID.encode(), orjson.dumps(billing_dag()), T0)
    assert isinstance(decoded, DagUpsert)
    assert decoded.topo_order == ("usage-rollup", "fx-rates", "invoice-nightly", "send-invoices")
    assert decoded.tasks["invoice-nightly"].retry.max_attempts == 3
    assert decoded.tasks["send-invoices"].retry.max_attempts == 2  # the DAG's
    assert decoded.tasks["fx-rates"].timeout_s == 60


def test_roots_are_emitted_together_then_each_task_after_its_dependencies() -> None:
    shard, roots = started_shard()
    assert sorted(roots) == ["fx-rates", "usage-rollup"]
    assert roots["usage-rollup"].run_id == f"{RUN_ID}/usage-rollup"
    assert {r.attempt for r in roots.values()} == {1}
    assert shard.report(roots["fx-rates"], "succeeded", at_ms=T0 + SECOND).runs == []
    out = shard.report(roots["usage-rollup"], "succeeded", at_ms=T0 + 2 * SECOND)
    invoice = by_task(out)["invoice-nightly"]
    assert invoice.job.args == {"customers": 10}
    assert invoice.fired_ms == T0 + 2 * SECOND
    assert task_states(shard)["send-invoices"] == "waiting"
    send = by_task(shard.report(invoice, "succeeded", at_ms=T0 + 3 * SECOND))["send-invoices"]
    out = shard.report(send, "succeeded", at_ms=T0 + 4 * SECOND)
    assert out.runs == []
    [whole] = out.results  # the DAG run's own result, once
    assert (whole.run_id, whole.task, whole.attempt, whole.status) == (
        RUN_ID,
        None,
        1,
        "succeeded",
    )
    assert whole.counts == {"succeeded": 4} and whole.finished_ms == T0 + 4 * SECOND
    assert set(task_states(shard).values()) == {"succeeded"}
    assert dag_doc(shard)["runs"][RUN_ID]["state"] == "succeeded"  # type: ignore[index]


def test_each_attempt_carries_the_logical_date_and_data_interval_of_its_run() -> None:
    _, roots = started_shard()
    for run in roots.values():
        assert run.logical_date_ms == T0 - DAY  # the day before: the day it processes
        assert run.data_interval == (T0 - DAY, T0)
        assert run.scheduled_ms == T0


def test_data_interval_of_every_at_and_trigger_runs() -> None:
    every = Shard(now_ms=T0 - SECOND)
    every.send(billing_dag(spec={"every": "15m"}))
    [run, _] = every.run_until(T0).runs
    assert run.data_interval == (T0 - 15 * MINUTE, T0)

    once = Shard(now_ms=T0 - SECOND)
    once.send(billing_dag(spec={"at": format_ms(T0)}))
    [run, _] = once.run_until(T0).runs
    assert run.logical_date_ms == T0 and run.data_interval == (T0, T0)  # as Airflow's @once

    # A trigger mid-day covers the last whole interval, as a manual Airflow run does.
    triggered = Shard(now_ms=T0 + 14 * 3600 * SECOND)
    triggered.send(billing_dag())
    [run, _] = triggered.send(command("schedule.trigger", DAG_ID)).runs
    assert run.scheduled_ms == T0 + 14 * 3600 * SECOND
    assert run.data_interval == (T0 - DAY, T0)


def test_a_task_failing_past_its_retries_goes_to_the_dlq_and_fails_everything_downstream() -> None:
    shard, roots = started_shard()
    shard.report(roots["usage-rollup"], "succeeded")
    invoice = by_task(shard.report(roots["fx-rates"], "succeeded"))["invoice-nightly"]
    shard.report(invoice, "failed")
    for attempt in (2, 3):
        [retry] = shard.run_until(shard.now_ms + 2 * SECOND).runs  # its own policy: 2 s
        assert (retry.task, retry.attempt) == ("invoice-nightly", attempt)
        out = shard.report(retry, "failed")
    [dead] = out.dlq
    assert dead.run_id == f"{RUN_ID}/invoice-nightly" and len(dead.attempts) == 3
    [marked, whole] = out.results
    assert (marked.run_id, marked.status, marked.attempt) == (
        f"{RUN_ID}/send-invoices",
        "upstream_failed",
        1,
    )
    # The DAG run's own result names the task at fault.
    assert (whole.run_id, whole.task, whole.status) == (RUN_ID, None, "failed")
    assert whole.counts == {"succeeded": 2, "failed": 1, "upstream_failed": 1}
    assert whole.error is not None and "invoice-nightly" in whole.error["message"]
    assert marked.worker == "shard-0" and marked.error is not None
    assert "invoice-nightly" in marked.error["message"]
    assert task_states(shard)["invoice-nightly"] == "failed"
    assert dag_doc(shard)["runs"][RUN_ID]["state"] == "failed"  # type: ignore[index]
    # The shard reads its own upstream_failed result back: a no-op.
    written = out.of(TopicKind.RESULTS)[0]
    before = shard.state_doc(DAG_ID)
    assert shard.raw_result(written.key, written.value).records == []
    assert shard.state_doc(DAG_ID) == before


def test_dag_clear_reruns_the_failed_task_and_the_run_completes() -> None:
    shard, roots = started_shard()
    shard.report(roots["usage-rollup"], "succeeded")
    shard.report(roots["fx-rates"], "failed")
    [retry] = shard.run_until(shard.now_ms + SECOND).runs
    out = shard.report(retry, "failed")
    assert [d.task for d in out.dlq] == ["fx-rates"]
    assert sorted(r.task or "" for r in out.results) == ["", "invoice-nightly", "send-invoices"]

    clear = command("dag.clear", DAG_ID, run_id=RUN_ID, task="fx-rates")
    [rerun] = shard.send(clear, at_ms=shard.now_ms + MINUTE).runs
    assert (rerun.task, rerun.attempt) == ("fx-rates", 3)  # after attempts 1 and 2
    assert rerun.data_interval == (T0 - DAY, T0)
    assert task_states(shard)["invoice-nightly"] == "waiting"
    invoice = by_task(shard.report(rerun, "succeeded"))["invoice-nightly"]
    assert invoice.attempt == 2  # attempt 1 was its upstream_failed result
    send = by_task(shard.report(invoice, "succeeded"))["send-invoices"]
    ended = shard.report(send, "succeeded")
    assert dag_doc(shard)["runs"][RUN_ID]["state"] == "succeeded"  # type: ignore[index]
    # It ends again: its own result takes the next attempt number.
    [(whole_attempt, whole_status)] = [(r.attempt, r.status) for r in ended.results]
    assert (whole_attempt, whole_status) == (2, "succeeded")
    # A clear of a task that is not finished is refused, with a reason.
    [refused] = shard.send(command("dag.clear", DAG_ID, run_id=RUN_ID, task="nope")).rejected
    assert "not a task of this DAG" in refused.reason


def test_dlq_replay_of_a_task_run_means_clearing_that_task() -> None:
    shard, roots = started_shard()
    shard.report(roots["fx-rates"], "succeeded")
    shard.report(roots["usage-rollup"], "failed")
    [retry] = shard.run_until(shard.now_ms + SECOND).runs
    [dead] = shard.report(retry, "failed").dlq
    [again] = shard.send(command("dlq.replay", DAG_ID, run_id=dead.run_id)).runs
    assert (again.task, again.attempt) == ("usage-rollup", 3)
    [refused] = shard.send(command("dlq.replay", DAG_ID, run_id=dead.run_id)).rejected
    assert "is running" in refused.reason


def test_a_restored_shard_continues_a_dag_run_where_the_old_one_stopped() -> None:
    shard, roots = started_shard()
    shard.report(roots["usage-rollup"], "succeeded", at_ms=T0 + SECOND)
    invoice_and_more = shard.report(roots["fx-rates"], "succeeded", at_ms=T0 + 2 * SECOND)
    invoice = by_task(invoice_and_more)["invoice-nightly"]

    restored, at_restore = shard.restored(now_ms=T0 + 30 * SECOND)
    assert at_restore.runs == [] and at_restore.results == []  # nothing repeated
    assert restored.run_until(T0 + 40 * SECOND).runs == []
    send = by_task(restored.report(invoice, "succeeded"))["send-invoices"]
    assert send.run_id == f"{RUN_ID}/send-invoices" and send.attempt == 1
    assert send.logical_date_ms == T0 - DAY
    restored.report(send, "succeeded")
    states = task_states(restored)
    assert set(states.values()) == {"succeeded"}


def test_a_restored_shard_retries_and_times_out_task_runs_like_the_old_one() -> None:
    shard, _ = started_shard()
    # fx-rates has a 60 s timeout of its own; nothing reports it.
    restored, _ = shard.restored(now_ms=T0 + 10 * SECOND)
    out = restored.run_until(T0 + 60 * SECOND + 30 * SECOND)  # deadline + margin
    [timed_out] = out.results
    assert (timed_out.task, timed_out.status) == ("fx-rates", "timed_out")
    [retry] = restored.run_until(restored.now_ms + SECOND).runs
    assert (retry.task, retry.attempt) == ("fx-rates", 2)


def test_max_active_runs_skips_occurrences_while_runs_are_running() -> None:
    shard = Shard(now_ms=T0 - SECOND)
    shard.send(billing_dag(spec={"every": "1m"}))
    first = shard.run_until(T0).runs
    assert len(first) == 2
    out = shard.run_until(T0 + MINUTE)
    assert out.runs == []
    [skipped] = out.results
    assert skipped.status == "skipped" and skipped.error is not None
    assert skipped.error["type"] == "MaxActiveRuns"
    assert skipped.run_id == run_id_for(DAG_ID, T0 + MINUTE)

    two = Shard(now_ms=T0 - SECOND)
    two.send(billing_dag(spec={"every": "1m"}, max_active_runs=2))
    two.run_until(T0)
    second = two.run_until(T0 + MINUTE)
    assert {r.run_id for r in second.runs} == {
        run_id_for(DAG_ID, T0 + MINUTE, "usage-rollup"),
        run_id_for(DAG_ID, T0 + MINUTE, "fx-rates"),
    }
    third = two.run_until(T0 + 2 * MINUTE)  # (fx-rates also times out meanwhile: 60 s)
    [skipped] = [r for r in third.results if r.status == "skipped"]
    assert skipped.error == {
        "type": "MaxActiveRuns",
        "message": "2 runs of this DAG were still running (max_active_runs 2)",
    }


def test_a_failed_run_does_not_count_against_max_active_runs() -> None:
    shard = Shard(now_ms=T0 - SECOND)
    shard.send(billing_dag(spec={"every": "1m"}, retry={"max_attempts": 1}))
    roots = by_task(shard.run_until(T0))
    shard.report(roots["fx-rates"], "failed")
    shard.report(roots["usage-rollup"], "succeeded")
    state = shard.core.schedule(DAG_ID)
    assert state is not None and state.dag is not None
    assert dag_run.active_count(state.dag) == 0
    assert len(shard.run_until(T0 + MINUTE).runs) == 2


def test_a_schedule_and_a_dag_never_share_an_id() -> None:
    shard = Shard(now_ms=T0)
    shard.send(billing_dag())
    [rejected] = shard.send(
        {
            "v": 1,
            "type": "schedule.upsert",
            "id": DAG_ID,
            "spec": {"every": "1m"},
            "job": {"name": "x", "args": {}},
        }
    ).rejected
    assert "is a DAG" in rejected.reason
    plain = Shard(now_ms=T0)
    plain.send(
        {
            "v": 1,
            "type": "schedule.upsert",
            "id": "s",
            "spec": {"every": "1m"},
            "job": {"name": "x"},
        }
    )
    [rejected] = plain.send(billing_dag(id="s")).rejected
    assert "is a schedule" in rejected.reason
    [rejected] = plain.send(
        command("dag.clear", "s", run_id=run_id_for("s", T0), task="a")
    ).rejected
    assert "not a DAG" in rejected.reason


def _without_fx_rates() -> dict[str, object]:
    body = billing_dag()
    tasks = body["tasks"]
    assert isinstance(tasks, dict)
    del tasks["fx-rates"]
    tasks["invoice-nightly"]["after"] = ["usage-rollup"]
    return body


def test_a_re_upsert_that_removes_a_running_task_cancels_it_through_its_worker() -> None:
    # The removed task's attempt is out on {ns}.runs: the shard asks its worker to
    # stop it (a cancel record, docs/DESIGN.md §6.6) and writes no result of its own,
    # so the worker's result is the attempt's one result.
    shard, roots = started_shard()
    out = shard.send(_without_fx_rates())
    assert out.results == []
    [cancel] = out.cancels
    assert (cancel.run_id, cancel.attempt) == (roots["fx-rates"].run_id, 1)
    assert "dag.upsert removed the task" in cancel.reason
    restored, _ = shard.restored()  # the request survives a failover
    for s in (shard, restored):
        invoice = by_task(s.report(roots["usage-rollup"], "succeeded"))["invoice-nightly"]
        done = s.report(roots["fx-rates"], "succeeded")  # it finished as it was stopped
        assert done.results == [] and done.runs == []  # applied; nothing of the shard's
        state = s.core.schedule(DAG_ID)
        assert state is not None and roots["fx-rates"].run_id not in state.runs
        ended = s.report(by_task(s.report(invoice, "succeeded"))["send-invoices"], "succeeded")
        [run_result] = [r for r in ended.results if r.task is None]
        assert run_result.status == "succeeded"
        assert dag_doc(s)["runs"][RUN_ID]["tasks"]["fx-rates"]["state"] == "removed"  # type: ignore[index]


def test_a_removed_task_no_worker_confirms_ends_cancelled_by_the_shard_at_its_deadline() -> None:
    shard, roots = started_shard()
    shard.send(_without_fx_rates())
    fx = roots["fx-rates"]
    out = shard.run_until(fx.deadline_ms + TIMEOUT_MARGIN_MS)
    [result] = [r for r in out.results if r.run_id == fx.run_id]
    assert (result.status, result.attempt, result.worker) == ("cancelled", 1, "shard-0")
    assert [r for r in out.runs if r.run_id == fx.run_id] == []  # never retried


def test_a_removed_task_waiting_to_retry_is_cancelled_without_running_again() -> None:
    shard, roots = started_shard()
    fx = roots["fx-rates"]
    shard.report(fx, "failed")  # waits 1 s for attempt 2
    out = shard.send(_without_fx_rates())
    [result] = out.results
    assert (result.run_id, result.attempt, result.status) == (fx.run_id, 2, "cancelled")
    assert out.cancels == []  # no attempt is out: nothing to stop
    assert [r for r in shard.run_until(T0 + MINUTE).runs if r.run_id == fx.run_id] == []


def test_the_demo_includes_the_dag_now_that_the_shard_accepts_it() -> None:
    from actors.demo import catalog
    from actors.demo.run import shard_accepts

    assert shard_accepts(catalog.dag())


# --- restore at any point -------------------------------------------------------------


@st.composite
def dag_bodies(draw: st.DrawFn) -> dict[str, object]:
    """A dag.upsert of a random graph (task i may wait on any earlier task)."""
    size = draw(st.integers(min_value=1, max_value=7))
    names = [f"t{i}" for i in range(size)]
    tasks: dict[str, object] = {}
    for i, name in enumerate(names):
        after = draw(st.lists(st.sampled_from(names[:i]), unique=True)) if i else []
        tasks[name] = {"job": {"name": "test.job"}, "after": after}
    return {
        "v": 1,
        "type": "dag.upsert",
        "id": DAG_ID,
        "spec": {"every": "1h"},
        "retry": {"max_attempts": 2, "initial_s": 1, "coefficient": 1.0, "jitter": "none"},
        "timeout_s": 20,
        "tasks": tasks,
    }


Event = tuple[str, int, Run | None, str]  # (kind, at_ms, run, status)


def _drive(shard: Shard, event: Event) -> list[tuple[object, ...]]:
    kind, at_ms, run, status = event
    if kind == "report":
        assert run is not None
        out = shard.report(run, status, at_ms=at_ms)
    elif kind == "clear":
        out = shard.send(command("dag.clear", DAG_ID, run_id=RUN_ID, task=status), at_ms=at_ms)
    else:
        out = shard.run_until(at_ms)
    return sorted((r.topic.value, r.key, r.value, r.partition) for r in out.records)


@settings(max_examples=40, deadline=None)
@given(body=dag_bodies(), seed=st.integers(0, 2**32 - 1), cut=st.integers(0, 10_000))
def test_a_shard_restored_at_any_point_of_a_dag_run_writes_what_the_old_one_would(
    body: dict[str, object], seed: int, cut: int
) -> None:
    """Reference shard vs. one restored from its changelog after ``cut`` events:
    every later batch is the same (runs, results, DLQ, changelog), so a failover
    mid-run loses and repeats nothing."""
    rng = random.Random(seed)
    reference = Shard(now_ms=T0 - SECOND)
    reference.send(body)
    events: list[Event] = [("advance", T0, None, "")]
    outputs = [_drive(reference, events[0])]
    now = T0
    for _ in range(60):
        in_flight = [r for r in reference.in_flight(DAG_ID) if r.scheduled_ms == T0]
        waiting = reference.core.schedule(DAG_ID)
        assert waiting is not None
        running = [r for r in in_flight if waiting.runs[r.run_id].retry_ms is None]
        now += rng.choice((0, 300, SECOND))
        if running and rng.random() < 0.8:
            run = rng.choice(running)
            status = rng.choice(("succeeded", "succeeded", "failed", "timed_out"))
            event: Event = ("report", now, run, status)
        elif not in_flight and rng.random() < 0.5:
            run_doc = dag_doc(reference)["runs"][RUN_ID]  # type: ignore[index]
            failed = [t for t, e in run_doc["tasks"].items() if e["state"] == "failed"]
            if not failed:
                break
            event = ("clear", now, None, rng.choice(failed))
        else:
            now += rng.choice((SECOND, 25 * SECOND))
            event = ("advance", now, None, "")
        events.append(event)
        outputs.append(_drive(reference, event))
    cut %= len(events) + 1

    before = Shard(now_ms=T0 - SECOND)
    before.send(body)
    for event in events[:cut]:
        _drive(before, event)
    restored, at_restore = before.restored()
    assert at_restore.records == []
    for event, expected in zip(events[cut:], outputs[cut:], strict=True):
        assert _drive(restored, event) == expected, event


# --- run.cancel of a whole DAG run ----------------------------------------------------


def test_a_cancelled_dag_run_stops_its_running_tasks_and_never_starts_the_waiting_ones() -> None:
    shard, roots = started_shard()
    out = shard.send(command("run.cancel", DAG_ID, run_id=RUN_ID, reason="wrong prices"))
    assert out.rejected == []
    assert sorted((c.run_id, c.attempt, c.reason) for c in out.cancels) == sorted(
        (roots[t].run_id, 1, "wrong prices") for t in ("usage-rollup", "fx-rates")
    )
    assert sorted((r.task, r.attempt, r.status, r.started_ms) for r in out.results) == [
        ("invoice-nightly", 1, "cancelled", None),
        ("send-invoices", 1, "cancelled", None),
    ]
    # The shard's results for tasks that never ran; the running ones end by their own.
    assert {r.worker for r in out.results} == {"shard-0"}
    again = shard.send(command("run.cancel", DAG_ID, run_id=RUN_ID, reason="again"))
    [rejected] = again.rejected
    assert "being cancelled already" in rejected.reason
    restored, _ = shard.restored()  # the cancel survives a failover mid-way
    for s in (shard, restored):
        first = s.report(roots["usage-rollup"], "succeeded")  # decided before the cancel
        assert first.runs == [] and [r for r in first.results if r.task is None] == []
        last = s.report(roots["fx-rates"], "cancelled")
        assert last.runs == []
        [run_result] = [r for r in last.results if r.task is None]
        assert (run_result.run_id, run_result.attempt, run_result.status) == (
            RUN_ID,
            1,
            "cancelled",
        )
        assert run_result.counts == {"succeeded": 1, "cancelled": 3}
        assert run_result.error is not None and "wrong prices" in run_result.error["message"]
        assert dag_doc(s)["runs"][RUN_ID]["state"] == "cancelled"  # type: ignore[index]


def test_a_cancel_of_a_dag_run_that_ended_says_nothing_to_cancel() -> None:
    shard, roots = started_shard()
    invoice = by_task(shard.report(roots["usage-rollup"], "succeeded"))
    invoice = by_task(shard.report(roots["fx-rates"], "succeeded"))
    send = by_task(shard.report(invoice["invoice-nightly"], "succeeded"))
    shard.report(send["send-invoices"], "succeeded")
    out = shard.send(command("run.cancel", DAG_ID, run_id=RUN_ID))
    [rejected] = out.rejected
    assert "nothing to cancel" in rejected.reason
    assert out.cancels == [] and out.results == []


def test_a_cancelled_dag_run_can_be_cleared_and_runs_again() -> None:
    shard, roots = started_shard()
    shard.send(command("run.cancel", DAG_ID, run_id=RUN_ID, reason="pause it"))
    shard.report(roots["usage-rollup"], "cancelled")
    shard.report(roots["fx-rates"], "cancelled")
    assert dag_doc(shard)["runs"][RUN_ID]["state"] == "cancelled"  # type: ignore[index]
    out = shard.send(command("dag.clear", DAG_ID, run_id=RUN_ID, task="fx-rates"))
    assert out.rejected == [] and [r.task for r in out.runs] == ["fx-rates"]
    assert dag_doc(shard)["runs"][RUN_ID]["state"] == "running"  # type: ignore[index]
