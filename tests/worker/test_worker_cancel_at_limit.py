"""Cancels on a partition at its open-run limit: the worker core as the runtime
drives it, which hands it records of a partition only while it is not paused.

The limit (``max_open``) bounds the runs delivered and unfinished; records fetched
beyond it wait in the partition's backlog. The partition is paused only once that
backlog is full (``max_backlog``), so a cancel record produced after a burst still
reaches the worker while the burst's jobs run; and a run adopted past the limit
still waits for the adoption's end, where its cancel may lie.
"""

from __future__ import annotations

from actors.worker.core import Action, CancelJob, Outcome, StartJob, WorkerCore
from tests.kit.worker import heard
from tests.worker.test_worker_cancel import cancel_record
from tests.worker.test_worker_core import T0, results_of, run_record
from tests.worker.test_worker_core import make_core as worker_core
from topics.records import InRecord

HOUR_MS = 3_600_000


def make_core(*, concurrency: int = 2, max_open: int = 4, max_backlog: int = 4) -> WorkerCore:
    """Small limits, and partition 0 left unassigned for each test to assign its way."""
    core = worker_core(concurrency=concurrency, max_open=max_open, max_backlog=max_backlog)
    core.revoke(0)
    return core


def fetch(core: WorkerCore, records: list[InRecord], now_ms: int) -> list[Action]:
    """One fetch, as the runtime hands it over: refused for a paused partition."""
    assert 0 not in core.paused(), "the runtime fetches nothing of a paused partition"
    actions: list[Action] = []
    for record in records:
        actions += core.receive(record, now_ms, fill=False)
    return actions + core.fill(now_ms)


def runs(offsets: range) -> list[InRecord]:
    return [run_record(o, schedule_id=f"s{o}", deadline_ms=T0 + HOUR_MS) for o in offsets]


def started(actions: list[Action]) -> dict[str, StartJob]:
    return {a.run.schedule_id: a for a in actions if isinstance(a, StartJob)}


def test_a_partition_at_its_open_limit_is_fetched_until_its_backlog_is_full() -> None:
    core = make_core()
    core.assign(0, 0, None, T0)
    fetch(core, runs(range(4)), T0)  # the limit: 4 open
    assert core.paused() == frozenset()
    fetch(core, runs(range(4, 7)), T0)  # 3 in the backlog
    assert core.paused() == frozenset()
    fetch(core, runs(range(7, 8)), T0)  # the backlog is full
    assert core.paused() == {0}


def test_a_cancel_produced_after_a_burst_stops_its_running_job() -> None:
    # s0 and s1 run for an hour; 6 more runs fill the limit and the backlog's start.
    # An operator cancels s0: its record comes after them, and must reach the job now.
    core = make_core()
    core.assign(0, 0, None, T0)
    jobs = started(fetch(core, runs(range(6)), T0))
    assert sorted(jobs) == ["s0", "s1"]
    actions = fetch(core, [cancel_record(6, "s0", reason="operator")], T0 + 1_000)
    assert actions == [CancelJob(jobs["s0"].key, "cancelled: operator")]
    core.job_exited(jobs["s0"].key, Outcome("succeeded"), T0 + 2_000)
    [result] = [r for r in results_of(core.take_commit(0)) if r.schedule_id == "s0"]
    assert (result.status, result.error) == (
        "cancelled",
        {"type": "Cancelled", "message": "operator"},
    )


def test_a_backlogged_run_whose_cancel_waits_behind_it_never_starts() -> None:
    # s4 waits in the backlog; its cancel record comes three runs later, still in the
    # backlog when room frees and s4 is delivered and reaches a free slot: it must
    # be decided cancelled then, not started.
    core = make_core(max_backlog=8)
    core.assign(0, 0, None, T0)
    records = [*runs(range(8)), cancel_record(8, "s4", reason="operator")]
    jobs = started(fetch(core, records, T0))
    now = T0
    results = {}
    while jobs:
        name = min(jobs)
        now = heard(core, now + 1_000)
        for action in core.job_exited(jobs.pop(name).key, Outcome("succeeded"), now):
            assert isinstance(action, StartJob), action
            assert action.run.schedule_id != "s4", "a cancelled run started"
            jobs[action.run.schedule_id] = action
        commit = core.take_commit(0)
        if commit is not None:
            core.commit_done(commit)
            for result in results_of(commit):
                assert result.schedule_id not in results  # one result each
                results[result.schedule_id] = result
    assert len(results) == 8
    assert (results["s4"].status, results["s4"].started_ms) == ("cancelled", None)
    assert core.idle()


def test_a_new_owner_past_its_open_limit_never_starts_a_run_cancelled_before_it() -> None:
    # Adopted with 5 runs and a cancel of s1 before its end: the limit (4) is reached
    # before that end. The catch-up goes on into the backlog, so s1 never starts.
    core = make_core()
    core.assign(0, 0, None, T0, lease=1, end_offset=7)
    assert started(fetch(core, runs(range(5)), T0)) == {}  # split fetch, catching up
    assert core.catching_up() == {0}
    assert started(fetch(core, [cancel_record(6, "s1", reason="before")], T0)) == {}
    jobs = started(core.caught_up(0, 7, T0 + 1))
    assert sorted(jobs) == ["s0", "s2"]
    [result] = results_of(core.take_commit(0))
    assert (result.schedule_id, result.status, result.started_ms) == ("s1", "cancelled", None)


def test_an_adoption_whose_backlog_fills_before_its_end_starts_its_runs() -> None:
    # Its backlog full, it cannot fetch further until runs finish: its catch-up ends
    # there rather than waiting for a position it cannot reach.
    core = make_core()
    core.assign(0, 0, None, T0, lease=1, end_offset=1_000)
    jobs = started(fetch(core, runs(range(8)), T0))
    assert sorted(jobs) == ["s0", "s1"] and core.catching_up() == frozenset()
    assert core.paused() == {0}


def test_a_record_that_fills_the_backlog_ends_the_catch_up_and_starts_runs_at_once() -> None:
    # The same with records handed over one by one (``fill=True``).
    core = make_core()
    core.assign(0, 0, None, T0, lease=1, end_offset=1_000)
    jobs = {}
    for record in runs(range(8)):
        jobs.update(started(core.receive(record, T0)))
    assert sorted(jobs) == ["s0", "s1"] and core.catching_up() == frozenset()
