"""Cancel records in the worker core and its membership: no Kafka, no clock."""

from __future__ import annotations

from test_worker_core import T0, make_core, results_of, run_record

from actors.worker.core import CancelJob, Outcome, StartJob
from topics.messages import cancel_value, run_id_for
from topics.names import TopicKind
from topics.records import InRecord


def cancel_record(
    offset: int, schedule_id: str, *, attempt: int = 1, reason: str = "stop"
) -> InRecord:
    value = cancel_value(
        run_id=run_id_for(schedule_id, T0),
        schedule_id=schedule_id,
        task=None,
        attempt=attempt,
        reason=reason,
        requested_ms=T0 + 1,
    )
    return InRecord(TopicKind.RUNS, 0, offset, schedule_id.encode(), value)


def test_a_running_job_is_cancelled_with_one_result_once_it_has_stopped() -> None:
    # "Ended" means stopped: the result that lets the shard start the next run
    # (overlap cancel_other) waits for the job's exit, whatever the job returns.
    core = make_core()
    [start] = core.receive(run_record(0, schedule_id="a"), T0)
    assert isinstance(start, StartJob)
    [stop] = core.receive(cancel_record(1, "a", reason="bad input"), T0 + 10)
    assert stop == CancelJob(start.key, "cancelled: bad input")
    assert core.receive(cancel_record(2, "a", reason="again"), T0 + 11) == []  # asked once
    early = core.take_commit(0)
    assert early is not None and results_of(early) == []  # still running: no result yet
    assert early.offset == 0  # the run is open, so nothing past it is committed
    core.commit_done(early)
    core.job_exited(start.key, Outcome("succeeded"), T0 + 20)  # it finished anyway
    commit = core.take_commit(0)
    [result] = results_of(commit)
    assert (result.status, result.started_ms, result.finished_ms, result.error) == (
        "cancelled",
        T0,
        T0 + 20,
        {"type": "Cancelled", "message": "bad input"},
    )
    assert commit is not None and commit.offset == 3  # every record done
    assert core.take_commit(0) is None


def test_a_cancelled_job_that_never_stops_ends_cancelled_at_its_deadline() -> None:
    # A sync job that never calls ctx.heartbeat() cannot be stopped: its attempt ends
    # cancelled at the deadline (not timed_out), its late exit writes nothing more.
    core = make_core()
    [start] = core.receive(run_record(0, schedule_id="a", deadline_ms=T0 + 1_000), T0)
    assert isinstance(start, StartJob)
    core.receive(cancel_record(1, "a", reason="bad input"), T0 + 10)
    early = core.take_commit(0)
    assert early is not None and results_of(early) == []
    core.commit_done(early)
    assert core.advance(T0 + 1_000) == []  # told to stop already: no second CancelJob
    [result] = results_of(core.take_commit(0))
    assert result.status == "cancelled"
    assert result.error is not None and result.error["message"].startswith("bad input (")
    assert core.job_exited(start.key, Outcome("succeeded"), T0 + 5_000) == []
    assert core.take_commit(0) is None


def test_a_queued_run_is_cancelled_without_starting() -> None:
    core = make_core(concurrency=1)
    [first] = core.receive(run_record(0, schedule_id="a"), T0)
    assert core.receive(run_record(1, schedule_id="b"), T0) == []  # no free slot
    assert core.receive(cancel_record(2, "b"), T0 + 5) == []
    assert core.job_exited(first.key, Outcome("succeeded"), T0 + 6) == []  # b never starts
    statuses = {(r.schedule_id, r.status, r.started_ms) for r in results_of(core.take_commit(0))}
    assert statuses == {("a", "succeeded", T0), ("b", "cancelled", None)}


def test_a_run_and_its_cancel_in_one_batch_never_start() -> None:
    core = make_core()
    assert core.receive(run_record(0, schedule_id="a"), T0, fill=False) == []
    assert core.receive(cancel_record(1, "a"), T0, fill=False) == []
    assert core.fill(T0) == []
    [result] = results_of(core.take_commit(0))
    assert (result.status, result.started_ms) == ("cancelled", None)


def test_a_decided_run_keeps_its_result_and_another_attempt_is_untouched() -> None:
    core = make_core()
    [start] = core.receive(run_record(0, schedule_id="a"), T0)
    core.job_exited(start.key, Outcome("succeeded"), T0 + 3)
    assert core.receive(cancel_record(1, "a"), T0 + 5) == []
    [other] = core.receive(run_record(2, schedule_id="b", attempt=2), T0 + 6)
    assert core.receive(cancel_record(3, "b", attempt=1), T0 + 7) == []  # not this attempt
    assert core.running == 1 and isinstance(other, StartJob)
    [result] = results_of(core.take_commit(0))
    assert result.status == "succeeded"
    assert core.counts["cancels"] == 2


def test_a_cancel_reaches_a_running_job_on_a_partition_at_its_open_limit() -> None:
    # 256 runs open, 4 of them running: a cancel record adds no open run (its run is
    # already delivered), so it is delivered at once rather than held back with the
    # runs that wait for room; held back, the job it names would run on to success.
    core = make_core(concurrency=4, max_open=256)
    starts = []
    for offset in range(256):
        record = run_record(offset, schedule_id=f"s{offset}", deadline_ms=T0 + 3_600_000)
        starts += [a for a in core.receive(record, T0) if isinstance(a, StartJob)]
    assert len(starts) == 4 and 0 in core.paused()
    actions = core.receive(cancel_record(256, "s0", reason="bad input"), T0 + 1_000)
    assert [a.key for a in actions if isinstance(a, CancelJob)] == [starts[0].key]
    core.job_exited(starts[0].key, Outcome("succeeded"), T0 + 1_800_000)  # exits late
    [result] = [r for r in results_of(core.take_commit(0)) if r.schedule_id == "s0"]
    assert result.status == "cancelled"
    # A run arriving after it still waits for room.
    assert core.receive(run_record(257, schedule_id="s257"), T0 + 2_000) == []
    assert 0 in core.paused()
