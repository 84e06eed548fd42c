"""Cancel records in the worker core and its membership: no Kafka, no clock."""

from __future__ import annotations

from actors.worker.core import CancelJob, Outcome, StartJob
from actors.worker.membership import WorkerMachine, Write
from tests.kit.worker import heard
from tests.worker.test_worker_core import T0, make_core, results_of, run_record
from tests.worker.test_worker_membership import make_machine, of
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
    assert core.take_commit(0) is None  # nothing finished: the cancel settles with the job
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
    assert len(starts) == 4 and 0 not in core.paused()
    actions = core.receive(cancel_record(256, "s0", reason="bad input"), T0 + 1_000)
    assert [a.key for a in actions if isinstance(a, CancelJob)] == [starts[0].key]
    exited_ms = heard(core, T0 + 1_800_000)  # exits late, the lease held meanwhile
    core.job_exited(starts[0].key, Outcome("succeeded"), exited_ms)
    [result] = [r for r in results_of(core.take_commit(0)) if r.schedule_id == "s0"]
    assert result.status == "cancelled"
    # A run arriving after it still waits for room, in the backlog.
    assert core.receive(run_record(257, schedule_id="s257"), T0 + 2_000) == []
    assert core.fetch_position(0) == 258


def _adopted(end_offset: int) -> WorkerMachine:
    """A machine that has just adopted partition 0 from offset 0 (its end then:
    ``end_offset``), as a new owner after a worker's death."""
    m = make_machine()
    m.assigned({0}, T0, rejoined=False)
    lease = m.lease(0)
    assert lease is not None
    m.producer_started(0, lease, T0)
    m.committed_read(0, lease, 0, None, T0, end_offset=end_offset)
    return m


def test_a_new_owner_never_starts_a_run_whose_cancel_comes_in_a_later_fetch() -> None:
    # Split fetch at adoption: the run (offset 0) in one fetch, its cancel record
    # (offset 2, after a transaction marker at 1) in the next. Both were committed
    # before the adoption, so the run must never start.
    m = _adopted(end_offset=3)
    assert m.catching_up() == {0}
    assert of(m.records([run_record(0, schedule_id="a")], T0 + 1), StartJob) == []
    assert m.fetched_to(0, 1, T0 + 1) == []  # not at the end yet
    assert of(m.records([cancel_record(2, "a")], T0 + 2), StartJob) == []
    assert m.fetched_to(0, 3, T0 + 2) == []  # caught up: nothing left to start
    assert m.catching_up() == frozenset()
    [write] = of(m.tick(T0 + 3), Write)
    [result] = results_of(write.commit)
    assert (result.status, result.started_ms) == ("cancelled", None)


def test_runs_of_an_adopted_partition_start_once_it_is_caught_up() -> None:
    m = _adopted(end_offset=2)
    assert of(m.records([run_record(0, schedule_id="a")], T0 + 1), StartJob) == []
    assert of(m.records([run_record(1, schedule_id="b")], T0 + 1), StartJob) == []
    started = of(m.fetched_to(0, 2, T0 + 2), StartJob)
    assert [s.run.schedule_id for s in started] == ["a", "b"]  # in offset order
    # Later runs start as they come (the catch-up is over).
    assert len(of(m.records([run_record(2, schedule_id="c")], T0 + 3), StartJob)) == 1


def test_a_partition_adopted_at_its_end_does_not_wait() -> None:
    m = _adopted(end_offset=0)
    assert m.catching_up() == frozenset()
    assert len(of(m.records([run_record(0, schedule_id="a")], T0 + 1), StartJob)) == 1


def test_a_cancel_taken_before_a_crash_stops_the_run_at_the_next_owner() -> None:
    # The owner asked the job to stop and committed (the job had not exited yet),
    # then died. The cancel record stays open in that commit with its run, so the
    # next owner, restored from it, delivers both again and never starts the run.
    core = make_core()
    [start] = core.receive(run_record(0, schedule_id="a"), T0)
    assert isinstance(start, StartJob)
    [stop] = core.receive(cancel_record(1, "a", reason="bad input"), T0 + 10)
    assert isinstance(stop, CancelJob)
    core.receive(cancel_record(2, "a", reason="again"), T0 + 11)  # asked once: done at once
    commit = core.take_commit(0)
    assert commit is not None and results_of(commit) == []
    assert (commit.offset, commit.metadata) == (0, "k1 3 1")  # the run and its cancel open
    core.commit_done(commit)
    nxt = make_core()
    nxt.revoke(0)
    nxt.assign(0, commit.offset, commit.metadata, T0 + 20, lease=1, end_offset=3)
    assert nxt.receive(run_record(0, schedule_id="a"), T0 + 21) == []  # catching up
    assert nxt.receive(cancel_record(1, "a", reason="bad input"), T0 + 21) == []
    assert nxt.receive(cancel_record(2, "a", reason="again"), T0 + 21) == []  # finished before
    assert nxt.caught_up(0, 3, T0 + 22) == []  # nothing left to start
    [result] = results_of(nxt.take_commit(0))
    assert (result.status, result.started_ms, result.error) == (
        "cancelled",
        None,
        {"type": "Cancelled", "message": "bad input"},
    )
    # The old owner's cancel is settled with its job's exit, like its run.
    core.job_exited(start.key, Outcome("succeeded"), T0 + 30)
    last = core.take_commit(0)
    assert last is not None and last.offset == 3 and last.metadata == "k1 0"


def test_over_the_open_limit_at_adoption_every_cancel_reaches_its_own_attempt() -> None:
    # Adopted with 300 unfinished runs before its end, past the open limit (256):
    # 44 runs wait in the backlog. Cancels in the same fetch: for s1 (delivered, not
    # started yet), for s290 (in the backlog). Cancels fetched after the catch-up,
    # behind the backlog: for s0 (running by then) and for attempt 1 of s5, whose run
    # here is attempt 2. Each reaches the attempt it names, no later than it would
    # on a partition below its limit, and no other attempt.
    core = make_core(concurrency=4, max_open=256)
    core.revoke(0)
    core.assign(0, 0, None, T0, lease=1, end_offset=10_000)
    hour_ms = 3_600_000
    records = [
        run_record(o, schedule_id=f"s{o}", attempt=2 if o == 5 else 1, deadline_ms=T0 + hour_ms)
        for o in range(300)
    ]
    records += [cancel_record(300, "s1", reason="one"), cancel_record(301, "s290", reason="late")]
    actions = []  # one fetch, as the runtime hands it over
    for record in records:
        actions += core.receive(record, T0 + 1, fill=False)
    actions += core.fill(T0 + 1)
    assert [a for a in actions if isinstance(a, StartJob)] == []  # still catching up
    actions = core.caught_up(0, 10_000, T0 + 1)
    started = {a.run.schedule_id: a.key for a in actions if isinstance(a, StartJob)}
    assert sorted(started) == ["s0", "s2", "s3", "s4"] and core.catching_up() == frozenset()
    assert 0 not in core.paused()
    later = [
        cancel_record(302, "s0", reason="zero"),
        cancel_record(303, "s5", attempt=1, reason="stale"),
    ]
    actions = [a for record in later for a in core.receive(record, T0 + 2, fill=False)]
    # s0's job is asked to stop now, though its cancel record waits behind 44 runs.
    assert actions == [CancelJob(started["s0"], "cancelled: zero")]
    results = {}
    metadata = ""
    now = T0 + 3
    while started:  # finish every job as it comes, s0 last, each returning success
        name = next((n for n in started if n != "s0"), "s0")
        key = started.pop(name)
        if name == "s0":  # its cancel record was delivered meanwhile: open with its run
            assert metadata == "k1 304 302"
        now += 1
        for action in core.job_exited(key, Outcome("succeeded"), now):
            assert isinstance(action, StartJob), action
            assert action.run.schedule_id not in ("s1", "s290")  # never started
            started[action.run.schedule_id] = action.key
        commit = core.take_commit(0)
        if commit is not None:
            core.commit_done(commit)
            metadata = commit.metadata
            for result in results_of(commit):
                assert (result.schedule_id, result.attempt) not in results  # one each
                results[(result.schedule_id, result.attempt)] = result
    assert len(results) == 300
    assert (results[("s0", 1)].status, results[("s0", 1)].error) == (
        "cancelled",
        {"type": "Cancelled", "message": "zero"},
    )
    for name in ("s1", "s290"):
        assert (results[(name, 1)].status, results[(name, 1)].started_ms) == ("cancelled", None)
    assert results[("s5", 2)].status == "succeeded"  # the stale cancel named attempt 1
    others = {r.status for k, r in results.items() if k[0] not in ("s0", "s1", "s290")}
    assert others == {"succeeded"}
    assert core.counts["cancels"] == 4 and core.idle()
    assert core.committed_offset(0) == 304  # every record, cancels included, finished
