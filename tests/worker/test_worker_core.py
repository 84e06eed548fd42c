"""The worker core driven by events alone: no Kafka, no clock, no asyncio."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actors.worker.core import (
    CancelJob,
    Commit,
    Discarded,
    LeaseLost,
    Outcome,
    StartJob,
    WorkerCore,
)
from actors.worker.offsets import PartitionOffsets
from topics.command_types import Job
from topics.messages import Result, idempotency_key, parse_result, run_id_for, run_value
from topics.names import TopicKind
from topics.records import InRecord

T0 = 1_790_000_000_000
LEASE_MS = 3_000


def run_record(
    offset: int,
    *,
    partition: int = 0,
    name: str = "noop",
    deadline_ms: int = T0 + 60_000,
    schedule_id: str | None = None,
    attempt: int = 1,
) -> InRecord:
    sid = schedule_id or f"s{offset}"
    run_id = run_id_for(sid, T0)
    value = run_value(
        run_id=run_id,
        schedule_id=sid,
        task=None,
        scheduled_ms=T0,
        fired_ms=T0,
        attempt=attempt,
        job=Job(name, {}),
        idempotency_key=idempotency_key(run_id),
        deadline_ms=deadline_ms,
    )
    return InRecord(TopicKind.RUNS, partition, offset, sid.encode(), value)


def make_core(concurrency: int = 4, max_open: int = 256, max_backlog: int = 1024) -> WorkerCore:
    core = WorkerCore(
        worker="w1",
        concurrency=concurrency,
        known_job=lambda name: name in {"noop", "slow"},
        now_ms=T0,
        lease_loss_ms=LEASE_MS,
        max_open_per_partition=max_open,
        max_backlog_per_partition=max_backlog,
    )
    core.assign(0, 0, None, T0)
    return core


def results_of(commit: Commit | None) -> list[Result]:
    assert commit is not None
    return [parse_result(r.value or b"") for r in commit.results]


def test_a_run_starts_and_its_result_and_offset_commit_together() -> None:
    core = make_core()
    [start] = core.receive(run_record(0), T0)
    assert isinstance(start, StartJob) and start.key == (0, 0, 0) and start.run.schedule_id == "s0"
    assert core.take_commit(0) is None
    core.job_exited((0, 0, 0), Outcome("succeeded"), T0 + 5)
    commit = core.take_commit(0)
    assert commit is not None and commit.offset == 1 and commit.metadata == "k1 0"
    [result] = results_of(commit)
    assert (result.run_id, result.attempt, result.status, result.worker) == (
        run_id_for("s0", T0),
        1,
        "succeeded",
        "w1",
    )
    assert result.started_ms == T0 and result.finished_ms == T0 + 5 and result.error is None
    assert commit.results[0].key == b"s0" and commit.results[0].topic is TopicKind.RESULTS
    core.commit_done(commit)
    assert core.committed_offset(0) == 1 and core.idle()


def test_concurrency_limits_running_jobs_and_a_freed_slot_starts_the_next() -> None:
    core = make_core(concurrency=2)
    started = [a for o in range(3) for a in core.receive(run_record(o), T0)]
    assert [a.key for a in started if isinstance(a, StartJob)] == [(0, 0, 0), (0, 1, 0)]
    assert core.running == 2 and core.queued == 1
    nxt = core.job_exited((0, 1, 0), Outcome("failed", {"type": "E", "message": "m"}), T0 + 1)
    assert [a.key for a in nxt if isinstance(a, StartJob)] == [(0, 2, 0)]


def test_out_of_order_finish_commits_the_lowest_open_offset_and_names_the_rest() -> None:
    core = make_core()
    for o in (0, 2, 3, 6):  # gaps: transaction markers
        core.receive(run_record(o), T0)
    core.job_exited((0, 3, 0), Outcome("succeeded"), T0 + 1)
    core.job_exited((0, 6, 0), Outcome("succeeded"), T0 + 1)
    commit = core.take_commit(0)
    assert commit is not None and commit.offset == 0
    assert commit.metadata == "k1 7 2"  # end 7; 0 and 2 open
    assert sorted(r.run_id for r in results_of(commit)) == [
        run_id_for("s3", T0),
        run_id_for("s6", T0),
    ]
    # A new owner restored from this commit runs 0 and 2 again, never 3 or 6.
    restored = PartitionOffsets(commit.offset, commit.metadata)
    assert [o for o in (0, 2, 3, 6) if restored.deliver(o)] == [0, 2]


def test_a_job_past_its_deadline_is_timed_out_at_the_deadline_never_before() -> None:
    core = make_core()
    core.receive(run_record(0, deadline_ms=T0 + 1_000), T0)
    assert core.next_due_ms() == T0 + 1_000
    assert core.advance(T0 + 999) == []
    assert core.advance(T0 + 1_000) == [CancelJob((0, 0, 0), "timeout")]
    [result] = results_of(core.take_commit(0))
    assert result.status == "timed_out" and result.error is not None
    assert result.error["type"] == "Timeout" and result.finished_ms == T0 + 1_000
    # The job's own exit afterwards changes nothing, but frees its slot.
    assert core.running == 1
    core.job_exited((0, 0, 0), Outcome("succeeded"), T0 + 5_000)
    assert core.running == 0 and core.take_commit(0) is None


def test_a_run_whose_deadline_passed_while_queued_never_starts() -> None:
    core = make_core(concurrency=1)
    core.receive(run_record(0), T0)
    core.receive(run_record(1, deadline_ms=T0 + 10), T0)
    assert core.job_exited((0, 0, 0), Outcome("succeeded"), T0 + 20) == []
    results = results_of(core.take_commit(0))
    assert [r.status for r in results] == ["succeeded", "timed_out"]
    assert results[1].error is not None and "slot" in results[1].error["message"]


def test_unknown_job_fails_with_advice_and_malformed_records_are_acknowledged() -> None:
    core = make_core()
    assert core.receive(run_record(0, name="nope"), T0) == []
    bad = InRecord(TopicKind.RUNS, 0, 1, b"x", b"{not json")
    [discarded] = core.receive(bad, T0)
    assert isinstance(discarded, Discarded) and discarded.key == (0, 1, 0)
    commit = core.take_commit(0)
    assert commit is not None and commit.offset == 2
    [result] = results_of(commit)
    assert result.status == "failed" and result.error is not None
    assert result.error["type"] == "UnknownJob" and "--jobs" in result.error["message"]


def test_revoking_a_partition_cancels_its_jobs_and_drops_their_results() -> None:
    core = make_core(concurrency=2)
    core.assign(1, 40, None, T0)
    for o in range(3):
        core.receive(run_record(o), T0)
    core.receive(run_record(40, partition=1), T0)
    core.job_exited((0, 0, 0), Outcome("succeeded"), T0 + 1)  # recorded, not committed
    actions = core.revoke(0)
    assert actions == [CancelJob((0, 1, 0), "revoked"), CancelJob((0, 2, 0), "revoked")]
    assert core.take_commit(0) is None and 0 not in core.assigned
    # The cancelled job's exit frees its slot for the other partition's run; no result.
    [start] = core.job_exited((0, 1, 0), Outcome("cancelled"), T0 + 2)
    assert isinstance(start, StartJob) and start.key == (1, 40, 0)
    assert core.receive(run_record(3), T0) == []  # a stale record of the revoked partition


def test_lease_lost_after_silence_cancels_everything_and_renewal_prevents_it() -> None:
    core = make_core()
    core.receive(run_record(0), T0)
    core.lease_renewed(T0 + 2_000)
    assert core.advance(T0 + 2_000 + LEASE_MS) == []
    actions = core.advance(T0 + 2_001 + LEASE_MS)
    assert actions == [LeaseLost((0,), LEASE_MS + 1), CancelJob((0, 0, 0), "lease lost")]
    assert core.assigned == frozenset() and core.next_due_ms() is None
    assert core.running == 1  # the slot is held until the job has really exited
    assert core.job_exited((0, 0, 0), Outcome("succeeded"), T0 + 9_000) == []
    assert core.running == 0


def test_a_partition_whose_backlog_is_full_is_paused_until_a_run_finishes() -> None:
    core = make_core(concurrency=1, max_open=2, max_backlog=1)
    core.receive(run_record(0), T0)
    core.receive(run_record(1), T0)
    assert core.paused() == frozenset()  # at its open limit, still fetched
    core.receive(run_record(2), T0)
    assert core.paused() == frozenset({0})  # its backlog full
    core.job_exited((0, 0, 0), Outcome("succeeded"), T0)
    assert core.paused() == frozenset()


def test_a_failed_commit_is_offered_again_and_one_in_flight_blocks_another() -> None:
    core = make_core()
    core.receive(run_record(0), T0)
    core.job_exited((0, 0, 0), Outcome("succeeded"), T0)
    first = core.take_commit(0)
    assert first is not None
    core.receive(run_record(1), T0)
    core.job_exited((0, 1, 0), Outcome("succeeded"), T0)
    assert core.take_commit(0) is None
    core.commit_failed(first)
    again = core.take_commit(0)
    assert again is not None and again.offset == 2
    assert [r.run_id for r in results_of(again)] == [run_id_for("s0", T0), run_id_for("s1", T0)]


def test_a_job_that_cancels_itself_reports_cancelled() -> None:
    core = make_core()
    core.receive(run_record(0), T0)
    core.job_exited((0, 0, 0), Outcome("cancelled", {"type": "RunCancelled", "message": "x"}), T0)
    [result] = results_of(core.take_commit(0))
    assert result.status == "cancelled"


EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("receive"), st.integers(0, 1)),
        st.tuples(st.just("exit"), st.integers(0, 30)),
        st.tuples(st.just("commit"), st.integers(0, 1)),
        st.tuples(st.just("fail"), st.integers(0, 1)),
        st.tuples(st.just("tick"), st.integers(0, 400)),
    ),
    max_size=80,
)


@given(EVENTS)
def test_every_delivered_run_gets_exactly_one_committed_result_below_the_offset(
    events: list[tuple[str, int]],
) -> None:
    """Whatever the interleaving: no run has two committed results, committed offsets
    never go back, and every run below a committed offset has its committed result."""
    core = make_core(concurrency=3, max_open=4)
    core.assign(1, 0, None, T0)
    now = T0
    next_offset = {0: 0, 1: 0}
    delivered: dict[int, list[int]] = {0: [], 1: []}
    running: list[tuple[int, int]] = []
    in_flight: dict[int, Commit] = {}
    committed_ids: dict[int, list[str]] = {0: [], 1: []}
    committed_offset = {0: 0, 1: 0}
    actions: list[object]
    for kind, arg in events:
        actions = []
        if kind == "receive":
            offset = next_offset[arg]
            next_offset[arg] += 1 + offset % 2  # gaps, as transaction markers leave
            delivered[arg].append(offset)
            rec = run_record(
                offset,
                partition=arg,
                schedule_id=f"p{arg}-{offset}",
                deadline_ms=T0 + 2_000 + offset * 100,
            )
            actions = list(core.receive(rec, now))
        elif kind == "exit" and running:
            key = running.pop(arg % len(running))
            actions = list(core.job_exited(key, Outcome("succeeded"), now))
        elif kind in ("commit", "fail") and arg in in_flight:
            commit = in_flight.pop(arg)
            if kind == "commit":
                core.commit_done(commit)
                committed_ids[arg].extend(r.run_id for r in results_of(commit))
                assert commit.offset >= committed_offset[arg]
                committed_offset[arg] = commit.offset
            else:
                core.commit_failed(commit)
        elif kind == "commit":
            taken = core.take_commit(arg)
            if taken is not None:
                in_flight[arg] = taken
        elif kind == "tick":
            now += arg
            core.lease_renewed(now)
            actions = list(core.advance(now))
        running.extend(a.key for a in actions if isinstance(a, StartJob))
    for partition, run_ids in committed_ids.items():
        assert len(run_ids) == len(set(run_ids))
        below = {
            run_id_for(f"p{partition}-{o}", T0)
            for o in delivered[partition]
            if o < committed_offset[partition]
        }
        assert below <= set(run_ids)


def test_records_beyond_the_open_limit_wait_undelivered_and_commits_never_name_them() -> None:
    core = make_core(concurrency=1, max_open=2, max_backlog=3)
    for o in range(5):
        core.receive(run_record(o), T0)
    assert core.paused() == frozenset({0}) and core.fetch_position(0) == 5
    assert core.receive(run_record(3), T0) == []  # fetched again after a seek: ignored
    [start] = core.job_exited((0, 0, 0), Outcome("succeeded"), T0)
    assert isinstance(start, StartJob) and start.key == (0, 1, 0)
    commit = core.take_commit(0)
    # Offset 2 was delivered when 0 finished; 3 and 4 are not mentioned anywhere.
    assert commit is not None and (commit.offset, commit.metadata) == (1, "k1 2 1")
    restored = PartitionOffsets(commit.offset, commit.metadata)
    assert [o for o in range(5) if restored.deliver(o)] == [1, 2, 3, 4]
    for o in (1, 2, 3):
        core.job_exited((0, o, 0), Outcome("succeeded"), T0)
    assert core.paused() == frozenset() and core.fetch_position(0) == 5


def test_a_partition_restored_with_max_open_runs_fetches_and_runs_them() -> None:
    """The previous owner committed with the partition full (as many open runs as the
    limit allows): those runs are not in this process yet, so they must not count
    against the limit, or the partition is paused before the very records that would
    free it are fetched, and it stays stuck for good (internet-midnight, seed 1)."""
    previous = make_core(concurrency=1, max_open=3)
    for o in range(4):
        previous.receive(run_record(o), T0)
    previous.job_exited((0, 0, 0), Outcome("succeeded"), T0)
    handed_over = previous.take_commit(0)
    assert handed_over is not None and (handed_over.offset, handed_over.metadata) == (1, "k1 3 1 2")
    core = make_core(concurrency=4, max_open=3, max_backlog=2)
    core.revoke(0)
    core.assign(0, handed_over.offset, handed_over.metadata, T0, lease=1)
    assert core.paused() == frozenset() and core.fetch_position(0) == 1
    started = [a for r in range(1, 6) for a in core.receive(run_record(r), T0)]
    # The three handed-over runs start; the records after them wait for room.
    assert [a.key[1] for a in started if isinstance(a, StartJob)] == [1, 2, 3]
    assert core.paused() == frozenset({0}) and core.fetch_position(0) == 6
    [start] = core.job_exited((0, 1, 1), Outcome("succeeded"), T0)
    assert isinstance(start, StartJob) and start.key == (0, 4, 1)
