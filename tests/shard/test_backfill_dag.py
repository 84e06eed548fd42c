"""A DAG's backfill through the shard core (actors/shard/backfill.py, dag_shard.py;
docs/DESIGN.md §6.9): each missed occurrence becomes a DAG run with its own logical
date and data interval, its tasks from attempt 1 and its own end result at attempt 2
(the missed result holds 1), at most ``max_parallel`` DAG runs at once, beside the
DAG's live runs, across restores, and cancellable with its runs."""

from __future__ import annotations

import random

from actors.shard.backfill_plan import Action, PastRun, Reprocess, plan_steps
from tests.dag.test_dag_shard import DAG_ID, billing_dag
from tests.kit.shard import DAY, HOUR, SECOND, T0, Out, Shard, command
from topics.messages import Result, Run, run_id_for
from topics.timefmt import format_ms

SKIP_MISSED = {"policy": "skip", "grace_s": 60}


def missed_three_days(back_ms: int = T0 + 2 * DAY + 12 * HOUR) -> Shard:
    """The DAG's scheduler was away over three midnights (T0, +1d, +2d) until
    ``back_ms``: each reported missed at attempt 1; the live DAG fires again from
    T0 + 3d."""
    shard = Shard(now_ms=T0 - 10 * SECOND)
    assert shard.send(billing_dag(misfire=SKIP_MISSED)).rejected == []
    out = shard.advance(back_ms)
    missed = [r for r in out.results if r.status == "missed"]
    assert [(r.scheduled_ms, r.attempt, r.task) for r in missed] == [
        (T0 + d * DAY, 1, None) for d in range(3)
    ]
    return shard


def backfill(first_ms: int, last_ms: int, attempt: int, **fields: object) -> dict[str, object]:
    return command(
        "schedule.backfill",
        DAG_ID,
        backfill_id="fill",
        ranges=[[format_ms(first_ms), format_ms(last_ms), attempt]],
        **fields,
    )


def task_runs(shard: Shard) -> list[Run]:
    """The task runs in flight, as the worker received them."""
    return shard.in_flight(DAG_ID)


def finish_everything(shard: Shard, ends: list[Result], rng: random.Random | None = None) -> Shard:
    """Play the worker: report each task run in flight succeeded until none is left;
    with ``rng``, in a random order and with restores between reports. The DAG runs'
    own results (``task`` null) are added to ``ends``."""
    for _ in range(200):
        if rng is not None and rng.random() < 0.3:
            shard, out = shard.restored()
            ends += _dag_ends(out)
        in_flight = task_runs(shard)
        if not in_flight:
            return shard
        run = in_flight[0] if rng is None else rng.choice(in_flight)
        ends += _dag_ends(shard.report(run, "succeeded", at_ms=shard.now_ms + SECOND))
    raise AssertionError("the DAG runs never ended")


def _dag_ends(out: Out) -> list[Result]:
    """The DAG runs' own results among ``out``'s (a missed report is none)."""
    return [r for r in out.results if r.task is None and r.status != "missed"]


def test_each_missed_occurrence_becomes_a_dag_run_with_its_own_dates() -> None:
    shard = missed_three_days()
    out = shard.send(backfill(T0, T0 + 2 * DAY, 2, max_parallel=2))
    assert out.rejected == []
    roots = sorted((r.scheduled_ms, r.task, r.attempt) for r in out.runs)
    assert roots == [
        (T0 + d * DAY, task, 1) for d in range(2) for task in ("fx-rates", "usage-rollup")
    ]
    for run in out.runs:  # Airflow's convention: the interval that ends at the occurrence
        assert run.logical_date_ms == run.scheduled_ms - DAY
        assert run.data_interval == (run.scheduled_ms - DAY, run.scheduled_ms)
    doc = shard.state_doc(DAG_ID)
    assert sorted(doc["backfill"]["running"]) == [run_id_for(DAG_ID, T0 + d * DAY) for d in (0, 1)]
    assert doc["dag"]["runs"][run_id_for(DAG_ID, T0)]["backfill"] is True
    ends: list[Result] = []
    shard = finish_everything(shard, ends)
    # Each DAG run's own result once, at attempt 2: (run id, attempt) stays unique.
    assert sorted((r.run_id, r.attempt, r.status) for r in ends) == [
        (run_id_for(DAG_ID, T0 + d * DAY), 2, "succeeded") for d in range(3)
    ]
    backfill_doc = shard.state_doc(DAG_ID)["backfill"]
    assert backfill_doc["fired"] == 3 and "ended" in backfill_doc


def test_at_most_max_parallel_dag_runs_and_the_live_runs_keep_their_timing() -> None:
    shard = missed_three_days(T0 + 3 * DAY - 30 * SECOND)  # its tasks have not timed out
    shard.send(backfill(T0, T0 + 2 * DAY, 2, max_parallel=1))
    assert {r.scheduled_ms for r in task_runs(shard)} == {T0}
    # The live midnight fires although a backfill's DAG run is running and the DAG has
    # max_active_runs 1: the backfill's runs do not count against it.
    out = shard.run_until(T0 + 3 * DAY)
    assert {r.scheduled_ms for r in out.runs} == {T0 + 3 * DAY}
    assert [r for r in out.results if r.status == "skipped"] == []
    for _ in range(50):
        backfilled = {r.scheduled_ms for r in task_runs(shard)} - {T0 + 3 * DAY}
        assert len(backfilled) <= 1
        in_flight = task_runs(shard)
        if not in_flight:
            break
        shard.report(in_flight[0], "succeeded", at_ms=shard.now_ms + SECOND)
    assert shard.state_doc(DAG_ID)["backfill"]["fired"] == 3


def test_restores_at_random_points_neither_repeat_nor_skip_a_dag_run() -> None:
    for seed in range(10):
        rng = random.Random(seed)
        shard = missed_three_days()
        shard.send(backfill(T0, T0 + 2 * DAY, 2, max_parallel=2))
        ends: list[Result] = []
        shard = finish_everything(shard, ends, rng)
        assert sorted((r.scheduled_ms, r.attempt) for r in ends) == [
            (T0 + d * DAY, 2) for d in range(3)
        ], f"seed {seed}"
        tasks = [(r.run_id, r.attempt) for r in shard.written_runs()]
        assert len(tasks) == len(set(tasks)), f"seed {seed}: a task attempt written twice"
        assert len(tasks) == 3 * 4, f"seed {seed}"


def test_a_dag_run_known_to_the_run_book_is_let_pass() -> None:
    shard = Shard(now_ms=T0 - 10 * SECOND)
    shard.send(billing_dag())
    shard.run_until(T0)  # the DAG run of T0 runs (live)
    shard = finish_everything(shard, [])
    shard.run_until(T0 + DAY + HOUR)
    out = shard.send(backfill(T0, T0 + DAY, 2))
    assert out.runs == [] and out.rejected == []
    doc = shard.state_doc(DAG_ID)["backfill"]
    assert (doc["fired"], doc["passed"]) == (0, 2)
    assert "ended" in doc


def test_cancel_with_running_cancels_the_backfill_s_dag_runs() -> None:
    shard = missed_three_days()
    shard.send(backfill(T0, T0 + 2 * DAY, 2, max_parallel=2))
    out = shard.send(
        command("schedule.backfill_cancel", DAG_ID, backfill_id="fill", running=True, reason="r")
    )
    assert out.rejected == []
    assert sorted((c.run_id, c.attempt) for c in out.cancels) == sorted(
        (f"{run_id_for(DAG_ID, T0 + d * DAY)}/{task}", 1)
        for d in (0, 1)
        for task in ("fx-rates", "usage-rollup")
    )
    ends: list[Result] = []
    for run in task_runs(shard):
        ends += _dag_ends(shard.report(run, "cancelled", at_ms=shard.now_ms + SECOND))
    assert sorted((r.run_id, r.attempt, r.status) for r in ends) == [
        (run_id_for(DAG_ID, T0 + d * DAY), 2, "cancelled") for d in (0, 1)
    ]
    doc = shard.state_doc(DAG_ID)["backfill"]
    assert (doc["fired"], doc["cancelled"]) == (2, "r") and "ended" in doc
    assert shard.run_until(shard.now_ms + HOUR).runs == []


def test_the_plan_of_a_dag_starts_only_dag_runs_that_never_started() -> None:
    rows = [
        PastRun(T0, "missed", 1),
        PastRun(T0 + DAY, "succeeded", 1),
        PastRun(T0 + 2 * DAY, "failed", 2),
        PastRun(T0 + 3 * DAY, "cancelled", 1),
    ]
    instants = [T0 + d * DAY for d in range(5)]
    for mode in Reprocess:
        steps = list(
            plan_steps(
                instants,
                rows,
                mode,
                live_next_ms=T0 + 10 * DAY,
                handled_ms=T0 + 9 * DAY,
                known_to_ms=T0 + 5 * DAY,
                dag=True,
            )
        )
        assert [(s.action, s.attempt) for s in steps] == [
            (Action.RERUN, 2),
            (Action.KEEP, None),
            (Action.KEEP, None),
            (Action.KEEP, None),
            (Action.RUN, 1),
        ], mode
        assert "dag.clear" in steps[1].reason
