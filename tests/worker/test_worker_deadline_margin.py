"""Past its deadline plus the shard's margin, an attempt's result is the shard's.

The shard writes ``timed_out`` for an attempt it has heard nothing about by
``deadline + TIMEOUT_MARGIN_MS`` and retries it; a worker that gets to that attempt
later (it was down, or saturated) must not write a second result for it.
"""

from __future__ import annotations

from actors.shard import core as shard_core
from actors.shard import runs as shard_runs
from actors.worker.core import CancelJob, Outcome, StartJob
from tests.kit.worker import heard
from tests.worker.test_worker_core import T0, make_core, results_of, run_record
from topics.deadlines import TIMEOUT_MARGIN_MS, shard_decides

DEADLINE_MS = T0 + 1_000
VERDICT_MS = DEADLINE_MS + TIMEOUT_MARGIN_MS  # from here on the shard decides


def test_the_shard_and_the_worker_share_one_margin() -> None:
    assert shard_runs.TIMEOUT_MARGIN_MS is TIMEOUT_MARGIN_MS
    assert shard_core.TIMEOUT_MARGIN_MS is TIMEOUT_MARGIN_MS
    assert not shard_decides(DEADLINE_MS, VERDICT_MS - 1)
    assert shard_decides(DEADLINE_MS, VERDICT_MS)


def test_a_run_received_after_the_shards_verdict_is_acknowledged_without_a_result() -> None:
    core = make_core()
    assert core.receive(run_record(0, deadline_ms=DEADLINE_MS), heard(core, VERDICT_MS)) == []
    commit = core.take_commit(0)
    assert commit is not None and commit.offset == 1 and commit.results == ()
    assert core.counts["left_to_shard"] == 1 and core.counts["timed_out"] == 0
    assert core.running == 0 and core.queued == 0


def test_an_unknown_job_after_the_shards_verdict_gets_no_result_either() -> None:
    core = make_core()
    assert core.receive(run_record(0, name="nope", deadline_ms=DEADLINE_MS), VERDICT_MS) == []
    commit = core.take_commit(0)
    assert commit is not None and commit.offset == 1 and commit.results == ()


def test_a_run_queued_until_after_the_verdict_never_starts_and_writes_nothing() -> None:
    core = make_core(concurrency=1)
    core.receive(run_record(0), T0)
    core.receive(run_record(1, deadline_ms=DEADLINE_MS), T0)
    assert core.job_exited((0, 0, 0), Outcome("succeeded"), heard(core, VERDICT_MS)) == []
    commit = core.take_commit(0)
    assert commit is not None and commit.offset == 2
    assert [r.schedule_id for r in results_of(commit)] == ["s0"]


def test_a_run_queued_past_its_deadline_but_before_the_verdict_is_timed_out() -> None:
    core = make_core(concurrency=1)
    core.receive(run_record(0), T0)
    core.receive(run_record(1, deadline_ms=DEADLINE_MS), T0)
    core.job_exited((0, 0, 0), Outcome("succeeded"), heard(core, VERDICT_MS - 1))
    results = results_of(core.take_commit(0))
    assert [(r.schedule_id, r.status) for r in results] == [
        ("s0", "succeeded"),
        ("s1", "timed_out"),
    ]


def test_a_job_still_running_at_the_verdict_is_cancelled_without_a_result() -> None:
    core = make_core()
    [start] = core.receive(run_record(0, deadline_ms=DEADLINE_MS), T0)
    assert isinstance(start, StartJob)
    # The loop stalled past the deadline and the margin: cancel, but the shard decides.
    core.lease_renewed(VERDICT_MS)  # heartbeats went on; only the job loop stalled
    assert core.advance(VERDICT_MS) == [CancelJob((0, 0, 0), "timeout")]
    commit = core.take_commit(0)
    assert commit is not None and commit.offset == 1 and commit.results == ()
    core.commit_done(commit)
    # The job's own exit afterwards writes nothing either, and frees its slot.
    core.job_exited((0, 0, 0), Outcome("cancelled"), VERDICT_MS + 5)
    assert core.running == 0 and core.take_commit(0) is None and core.idle()


def test_a_job_that_exits_after_the_verdict_before_any_advance_writes_nothing() -> None:
    core = make_core()
    core.receive(run_record(0, deadline_ms=DEADLINE_MS), T0)
    core.job_exited((0, 0, 0), Outcome("succeeded"), VERDICT_MS + 1)
    commit = core.take_commit(0)
    assert commit is not None and commit.offset == 1 and commit.results == ()
    assert core.counts["succeeded"] == 0 and core.counts["left_to_shard"] == 1


def test_at_the_deadline_and_before_the_verdict_the_worker_still_writes_timed_out() -> None:
    core = make_core()
    core.receive(run_record(0, deadline_ms=DEADLINE_MS), T0)
    core.lease_renewed(VERDICT_MS - 1)
    assert core.advance(VERDICT_MS - 1) == [CancelJob((0, 0, 0), "timeout")]
    [result] = results_of(core.take_commit(0))
    assert result.status == "timed_out" and result.finished_ms == VERDICT_MS - 1
    # Its exit after the verdict changes nothing: the one result is already decided.
    core.job_exited((0, 0, 0), Outcome("succeeded"), VERDICT_MS + 1)
    assert core.take_commit(0) is None
