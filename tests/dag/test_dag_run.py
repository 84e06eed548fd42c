"""The DAG run state alone: Kahn's order, failure propagation, clear, reconcile, memory.

Driven by events only (`start_run`, `task_ended`, `clear`, `reconcile`), as the
shard drives it; the state goes through JSON between steps wherever a changelog
write would happen, so everything checked here also survives a restore.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.shard import dag_run
from actors.shard.dag_book import DagBook, book_json, book_of
from actors.shard.dag_run import Graph, Step
from topics.dag_graph import topological_order

T0 = 1_791_590_400_000  # 2026-10-10T00:00:00Z
DAY_MS = 86_400_000
RUN = "nb@2026-10-10T00:00:00.000Z"

BILLING = {
    "usage-rollup": (),
    "fx-rates": (),
    "invoice-nightly": ("usage-rollup", "fx-rates"),
    "send-invoices": ("invoice-nightly",),
}


def graph_of(after: Mapping[str, Sequence[str]]) -> Graph:
    return Graph.build(after, topological_order(after))


def started(dag: DagBook, graph: Graph, run_id: str = RUN) -> Step:
    return dag_run.start_run(dag, graph, run_id, T0, (T0 - DAY_MS, T0))


def through_json(dag: DagBook) -> DagBook:
    """What a restored shard would read back from the changelog."""
    copy = book_of(orjson.loads(orjson.dumps(book_json(dag))))
    assert copy == dag
    return copy


def task_states(dag: DagBook, run_id: str = RUN) -> dict[str, str]:
    return {name: t.state for name, t in dag.runs[run_id].tasks.items()}


def test_billing_runs_roots_together_then_each_stage_when_its_inputs_are_done() -> None:
    graph = graph_of(BILLING)
    dag = dag_run.new_state()
    step = started(dag, graph)
    assert step.start == [("usage-rollup", 1), ("fx-rates", 1)]  # parallel roots, one step
    dag = through_json(dag)
    step = dag_run.task_ended(dag, graph, RUN, "fx-rates", "succeeded", 1, T0 + 1)
    assert step.start == []  # invoice-nightly still waits for usage-rollup
    assert dag.runs[RUN].tasks["invoice-nightly"].in_degree == 1
    step = dag_run.task_ended(dag, graph, RUN, "usage-rollup", "succeeded", 1, T0 + 2)
    assert step.start == [("invoice-nightly", 1)]
    step = dag_run.task_ended(dag, graph, RUN, "invoice-nightly", "succeeded", 1, T0 + 3)
    assert step.start == [("send-invoices", 1)]
    assert step.ended is None
    step = dag_run.task_ended(dag, graph, RUN, "send-invoices", "succeeded", 1, T0 + 4)
    assert step.ended == "succeeded"
    run = dag.runs[RUN]
    assert run.state == "succeeded" and run.ended_ms == T0 + 4
    assert set(task_states(dag).values()) == {"succeeded"}
    assert run.logical_date_ms == T0 - DAY_MS and run.data_interval == (T0 - DAY_MS, T0)
    doc = book_json(dag)["runs"][RUN]
    assert doc["ended"] == "2026-10-10T00:00:00.004Z"
    assert doc["data_interval"] == ["2026-10-09T00:00:00.000Z", "2026-10-10T00:00:00.000Z"]
    assert dag_run.dates_of(dag, RUN) == (T0 - DAY_MS, (T0 - DAY_MS, T0))


def test_a_failed_task_fails_everything_downstream_and_other_branches_go_on() -> None:
    #   a -> b -> c -> d      a -> e      (x is an independent root)
    graph = graph_of({"a": (), "b": ("a",), "c": ("b",), "d": ("c",), "e": ("a",), "x": ()})
    dag = dag_run.new_state()
    assert started(dag, graph).start == [("a", 1), ("x", 1)]
    assert dag_run.task_ended(dag, graph, RUN, "a", "succeeded", 1, T0).start == [
        ("b", 1),
        ("e", 1),
    ]
    step = dag_run.task_ended(dag, graph, RUN, "b", "failed", 5, T0 + 1)
    assert [(t, a, origin) for t, a, origin in step.upstream_failed] == [
        ("c", 1, "b"),
        ("d", 1, "b"),
    ]
    assert step.ended is None  # e and x still running
    assert dag_run.active_count(dag) == 1
    assert dag_run.task_ended(dag, graph, RUN, "e", "succeeded", 1, T0 + 2).ended is None
    step = dag_run.task_ended(dag, graph, RUN, "x", "succeeded", 1, T0 + 3)
    assert step.ended == "failed"
    assert dag_run.active_count(dag) == 0
    assert task_states(dag) == {
        "a": "succeeded",
        "b": "failed",
        "c": "upstream_failed",
        "d": "upstream_failed",
        "e": "succeeded",
        "x": "succeeded",
    }
    assert dag.runs[RUN].tasks["b"].attempt == 5


def test_a_cancelled_task_blocks_its_followers_like_a_failure() -> None:
    graph = graph_of(BILLING)
    dag = dag_run.new_state()
    started(dag, graph)
    step = dag_run.task_ended(dag, graph, RUN, "fx-rates", "cancelled", 1, T0)
    assert [t for t, _, _ in step.upstream_failed] == ["invoice-nightly", "send-invoices"]
    assert task_states(dag)["fx-rates"] == "cancelled"


def test_clear_reruns_the_failed_task_at_its_next_attempt_and_the_run_completes() -> None:
    graph = graph_of(BILLING)
    dag = dag_run.new_state()
    started(dag, graph)
    dag_run.task_ended(dag, graph, RUN, "usage-rollup", "succeeded", 1, T0)
    dag_run.task_ended(dag, graph, RUN, "fx-rates", "succeeded", 1, T0)
    step = dag_run.task_ended(dag, graph, RUN, "invoice-nightly", "failed", 3, T0 + 1)
    assert step.upstream_failed == [("send-invoices", 1, "invoice-nightly")]
    assert step.ended == "failed"
    dag = through_json(dag)

    cleared = dag_run.clear(dag, graph, RUN, "invoice-nightly", T0 + 10)
    assert isinstance(cleared, Step)
    assert cleared.start == [("invoice-nightly", 4)]  # attempts continue after 3
    assert dag.runs[RUN].state == "running"
    assert task_states(dag)["send-invoices"] == "waiting"
    assert dag_run.active_count(dag) == 1
    step = dag_run.task_ended(dag, graph, RUN, "invoice-nightly", "succeeded", 4, T0 + 11)
    assert step.start == [("send-invoices", 2)]  # after its upstream_failed "attempt" 1
    step = dag_run.task_ended(dag, graph, RUN, "send-invoices", "succeeded", 2, T0 + 12)
    assert step.ended == "succeeded"


def test_clear_is_refused_with_a_reason_a_person_can_act_on() -> None:
    graph = graph_of(BILLING)
    dag = dag_run.new_state()
    started(dag, graph)
    reason = dag_run.clear(dag, graph, RUN, "usage-rollup", T0)
    assert isinstance(reason, str) and "is running" in reason
    reason = dag_run.clear(dag, graph, RUN, "invoice-nightly", T0)
    assert isinstance(reason, str) and "is waiting" in reason
    reason = dag_run.clear(dag, graph, "nb@2026-10-11T00:00:00.000Z", "fx-rates", T0)
    assert isinstance(reason, str) and "not a DAG run the shard remembers" in reason
    reason = dag_run.clear(dag, graph, RUN, "fx_rates", T0)
    assert isinstance(reason, str) and "not a task of this DAG" in reason and "fx-rates" in reason

    dag_run.task_ended(dag, graph, RUN, "fx-rates", "failed", 5, T0)
    reason = dag_run.clear(dag, graph, RUN, "send-invoices", T0)
    assert isinstance(reason, str)
    assert "never ran" in reason and "(fx-rates)" in reason  # names the task to clear


def test_clear_of_a_succeeded_task_is_refused_while_a_task_downstream_runs() -> None:
    graph = graph_of(BILLING)
    dag = dag_run.new_state()
    started(dag, graph)
    dag_run.task_ended(dag, graph, RUN, "usage-rollup", "succeeded", 1, T0)
    dag_run.task_ended(dag, graph, RUN, "fx-rates", "succeeded", 1, T0)
    reason = dag_run.clear(dag, graph, RUN, "fx-rates", T0)
    assert isinstance(reason, str) and "invoice-nightly" in reason


def test_clear_of_a_succeeded_task_after_the_run_reruns_it_and_everything_downstream() -> None:
    graph = graph_of(BILLING)
    dag = dag_run.new_state()
    started(dag, graph)
    for task in ("usage-rollup", "fx-rates", "invoice-nightly", "send-invoices"):
        dag_run.task_ended(dag, graph, RUN, task, "succeeded", 1, T0)
    assert dag.runs[RUN].state == "succeeded"
    step = dag_run.clear(dag, graph, RUN, "usage-rollup", T0 + 5)
    assert isinstance(step, Step) and step.start == [("usage-rollup", 2)]
    assert task_states(dag) == {
        "usage-rollup": "running",
        "fx-rates": "succeeded",  # not downstream: kept
        "invoice-nightly": "waiting",
        "send-invoices": "waiting",
    }
    assert dag_run.task_ended(dag, graph, RUN, "usage-rollup", "succeeded", 2, T0).start == [
        ("invoice-nightly", 2)
    ]


def test_a_task_downstream_of_two_failures_stays_upstream_failed_until_both_are_cleared() -> None:
    graph = graph_of({"a": (), "b": (), "c": ("a", "b")})
    dag = dag_run.new_state()
    started(dag, graph)
    dag_run.task_ended(dag, graph, RUN, "a", "failed", 1, T0)
    dag_run.task_ended(dag, graph, RUN, "b", "failed", 1, T0)
    step = dag_run.clear(dag, graph, RUN, "a", T0)
    assert isinstance(step, Step)
    assert step.start == [("a", 2)]
    assert step.upstream_failed == [("c", 2, "b")]  # b still failed: c cannot run
    dag_run.task_ended(dag, graph, RUN, "a", "succeeded", 2, T0)
    step = dag_run.clear(dag, graph, RUN, "b", T0)
    assert isinstance(step, Step) and step.start == [("b", 2)]
    assert dag_run.task_ended(dag, graph, RUN, "b", "succeeded", 2, T0).start == [("c", 3)]


def test_an_event_for_an_unknown_run_or_a_task_not_running_changes_nothing() -> None:
    graph = graph_of(BILLING)
    dag = dag_run.new_state()
    started(dag, graph)
    before = orjson.dumps(book_json(dag))
    assert dag_run.task_ended(dag, graph, "nb@x", "fx-rates", "succeeded", 1, T0) == Step()
    assert dag_run.task_ended(dag, graph, RUN, "send-invoices", "succeeded", 1, T0) == Step()
    assert orjson.dumps(book_json(dag)) == before


def test_reconcile_adds_new_tasks_and_cancels_removed_running_ones() -> None:
    graph = graph_of(BILLING)
    dag = dag_run.new_state()
    started(dag, graph)
    dag_run.task_ended(dag, graph, RUN, "usage-rollup", "succeeded", 1, T0)
    # fx-rates is removed (while running); "audit" is a new root; invoice no longer waits.
    changed = graph_of(
        {
            "usage-rollup": (),
            "audit": (),
            "invoice-nightly": ("usage-rollup",),
            "send-invoices": ("invoice-nightly", "audit"),
        }
    )
    steps = dag_run.reconcile(dag, changed, T0 + 1)
    step = steps[RUN]
    assert step.cancel == ["fx-rates"]
    assert step.start == [("audit", 1), ("invoice-nightly", 1)]
    assert task_states(dag)["fx-rates"] == "removed"
    assert dag.runs[RUN].tasks["send-invoices"].in_degree == 2
    for task in ("audit", "invoice-nightly"):
        step = dag_run.task_ended(dag, changed, RUN, task, "succeeded", 1, T0)
    assert step.start == [("send-invoices", 1)]
    assert dag_run.task_ended(dag, changed, RUN, "send-invoices", "succeeded", 1, T0).ended == (
        "succeeded"
    )


def test_ended_runs_are_forgotten_oldest_first_running_ones_never() -> None:
    graph = graph_of({"only": ()})
    dag = dag_run.new_state()
    ids = [f"d@2026-10-{10 + i // 24:02d}T{i % 24:02d}:00:00.000Z" for i in range(30)]
    for run_id in ids:
        dag_run.start_run(dag, graph, run_id, T0, (T0, T0))
    for run_id in ids[:25]:
        dag_run.task_ended(dag, graph, run_id, "only", "succeeded", 1, T0)
    dropped = dag_run.forget_ended(dag)
    assert dropped == ids[: 25 - dag_run.ENDED_MEMORY]
    # Running runs first (in start order), then the ended ones in the order they ended.
    assert list(dag.runs) == ids[25:] + ids[25 - dag_run.ENDED_MEMORY : 25]
    assert dag_run.active_count(dag) == 5


def test_a_big_dag_keeps_fewer_ended_runs() -> None:
    after = {f"t{i}": () for i in range(1000)}
    graph = graph_of(after)
    dag = dag_run.new_state()
    ids = [f"d@2026-10-1{day}T00:00:00.000Z" for day in range(5)]
    for run_id in ids:
        dag_run.start_run(dag, graph, run_id, T0, (T0, T0))
        for task in reversed(graph.topo_order):
            dag_run.task_ended(dag, graph, run_id, task, "failed", 1, T0)
    # 5 runs of 1,000 tasks are over ENDED_TASKS_MEMORY (4,000 entries): one goes.
    assert dag_run.forget_ended(dag) == ids[:1]
    assert list(dag.runs) == ids[1:]


@st.composite
def dags(draw: st.DrawFn) -> dict[str, tuple[str, ...]]:
    """Random DAGs: task i may depend on any earlier task (so never a cycle)."""
    size = draw(st.integers(min_value=1, max_value=12))
    names = [f"t{i}" for i in range(size)]
    after: dict[str, tuple[str, ...]] = {}
    for i, name in enumerate(names):
        deps = draw(st.lists(st.sampled_from(names[:i]), unique=True)) if i else []
        after[name] = tuple(deps)
    order = draw(st.permutations(names))  # declaration order does not matter
    return {name: after[name] for name in order}


@settings(max_examples=60, deadline=None)
@given(after=dags(), seed=st.integers(0, 2**32 - 1), fail_rate=st.sampled_from([0, 0.2]))
def test_kahn_starts_each_task_once_only_after_its_dependencies_succeeded(
    after: dict[str, tuple[str, ...]], seed: int, fail_rate: float
) -> None:
    """Any completion order, with or without failures, restored at every step."""
    rng = random.Random(seed)
    graph = graph_of(after)
    dag = dag_run.new_state()
    step = started(dag, graph)
    running = [task for task, _ in step.start]
    starts = list(running)
    outcome: dict[str, str] = {}
    ended = None
    while running:
        task = running.pop(rng.randrange(len(running)))
        status = "failed" if rng.random() < fail_rate else "succeeded"
        outcome[task] = status
        dag = through_json(dag)  # as if the shard failed over between any two results
        step = dag_run.task_ended(dag, graph, RUN, task, status, 1, T0)
        for name, attempt in step.start:
            assert attempt == 1
            assert all(outcome.get(dep) == "succeeded" for dep in after[name])
            running.append(name)
            starts.append(name)
        for name, _, _ in step.upstream_failed:
            outcome[name] = "upstream_failed"
        ended = step.ended or ended
    assert len(starts) == len(set(starts))  # no task twice
    assert set(outcome) == set(after)  # every task decided
    for name, status in outcome.items():
        if status == "upstream_failed":
            assert any(outcome[dep] != "succeeded" for dep in after[name])
        else:
            assert all(outcome[dep] == "succeeded" for dep in after[name])
    assert ended == ("succeeded" if set(outcome.values()) == {"succeeded"} else "failed")


def test_a_cleared_backfill_run_counts_against_max_active_runs() -> None:
    """A backfill's run that ended and is cleared runs again as an ordinary run: its
    backfill's ``max_parallel`` no longer bounds it (the backfill forgot it when it
    ended), so ``max_active_runs`` must."""
    graph = graph_of({"a": []})
    dag = dag_run.new_state()
    dag_run.start_run(dag, graph, RUN, T0, (T0, T0 + 1), T0, backfill=True)
    dag_run.task_ended(dag, graph, RUN, "a", "succeeded", 1, T0 + 1)
    assert dag_run.active_count(dag) == 0
    step = dag_run.clear(dag, graph, RUN, "a", T0 + 2)
    assert not isinstance(step, str) and step.start == [("a", 2)]
    assert dag_run.active_count(dag) == 1
    assert "backfill" not in book_json(dag)["runs"][RUN]
