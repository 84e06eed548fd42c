"""Concurrency keys in the worker core (docs/DESIGN.md §8.2): at most ``limit`` runs
of a key at once on its partition's owner, each strategy, and the adoption rule."""

from __future__ import annotations

from actors.worker.core import CancelJob, Outcome, StartJob, WorkerCore
from tests.kit.worker import heard
from topics.command_types import Job
from topics.concurrency import CONCURRENCY_ERROR, Concurrency
from topics.messages import idempotency_key, parse_result, run_id_for, run_value
from topics.names import TopicKind
from topics.records import InRecord
from topics.vocabulary import ConcurrencyStrategy, RunStatus

T0 = 1_790_000_000_000
LEASE_MS = 3_000
AFTER_ADOPTION = T0 + LEASE_MS  # keyed runs of a partition adopted at T0 may start


def keyed(
    offset: int,
    key: str = "customer-42",
    limit: int = 1,
    strategy: ConcurrencyStrategy = ConcurrencyStrategy.QUEUE,
    partition: int = 0,
    deadline_ms: int = T0 + 600_000,
) -> InRecord:
    sid = f"s{offset}"
    run_id = run_id_for(sid, T0)
    value = run_value(
        run_id=run_id,
        schedule_id=sid,
        task=None,
        scheduled_ms=T0,
        fired_ms=T0,
        attempt=1,
        job=Job("noop", {}, concurrency=Concurrency(key, limit, strategy)),
        idempotency_key=idempotency_key(run_id),
        deadline_ms=deadline_ms,
    )
    return InRecord(TopicKind.RUNS, partition, offset, sid.encode(), value)


def core(concurrency: int = 8) -> WorkerCore:
    made = WorkerCore(
        worker="w1",
        concurrency=concurrency,
        known_job=lambda n: n == "noop",
        now_ms=T0,
        lease_loss_ms=LEASE_MS,
    )
    made.assign(0, 0, None, T0)
    return made


def starts(actions: list[object]) -> list[int]:
    return [a.key[1] for a in actions if isinstance(a, StartJob)]


def test_a_key_at_limit_1_runs_one_at_a_time_in_offset_order() -> None:
    worker = core()
    out = []
    for offset in range(3):
        out += worker.receive(keyed(offset), AFTER_ADOPTION)
    assert starts(out) == [0]
    exit_1 = heard(worker, AFTER_ADOPTION + 1)
    assert starts(worker.job_exited((0, 0, 0), Outcome(RunStatus.SUCCEEDED), exit_1)) == [1]
    exit_2 = heard(worker, AFTER_ADOPTION + 2)
    assert starts(worker.job_exited((0, 1, 0), Outcome(RunStatus.SUCCEEDED), exit_2)) == [2]


def test_other_keys_and_unkeyed_runs_are_not_held_behind_a_waiting_key() -> None:
    worker = core()
    out = worker.receive(keyed(0), AFTER_ADOPTION)
    out += worker.receive(keyed(1), AFTER_ADOPTION)
    out += worker.receive(keyed(2, key="other"), AFTER_ADOPTION)
    assert starts(out) == [0, 2]


def test_a_job_asked_to_stop_holds_its_keys_slot_until_it_has_exited() -> None:
    worker = core()
    worker.receive(keyed(0, deadline_ms=T0 + 10_000), AFTER_ADOPTION)
    worker.receive(keyed(1), AFTER_ADOPTION)
    worker.lease_renewed(T0 + 10_000)
    out = worker.advance(T0 + 10_000)  # run 0 times out: its job is asked to stop
    assert [a.key for a in out if isinstance(a, CancelJob)] == [(0, 0, 0)]
    assert starts(out) == [] and worker.running == 1  # it still runs: the slot is taken
    out = worker.job_exited((0, 0, 0), Outcome(RunStatus.CANCELLED), T0 + 10_500)
    assert starts(out) == [1]


def test_an_adopted_partitions_keyed_runs_wait_for_the_previous_owners_lease() -> None:
    worker = core()
    assert starts(worker.receive(keyed(0), T0 + 1)) == []  # the old owner may still run it
    assert worker.next_due_ms() == AFTER_ADOPTION  # woken for it
    assert starts(worker.advance(AFTER_ADOPTION)) == [0]


def test_limit_2_starts_two_and_the_third_waits() -> None:
    worker = core()
    out = []
    for offset in range(3):
        out += worker.receive(keyed(offset, limit=2), AFTER_ADOPTION)
    assert starts(out) == [0, 1]


def test_cancel_newest_ends_the_newcomer_cancelled_without_starting_it() -> None:
    worker = core()
    out = worker.receive(keyed(0, strategy=ConcurrencyStrategy.CANCEL_NEWEST), AFTER_ADOPTION)
    out += worker.receive(keyed(1, strategy=ConcurrencyStrategy.CANCEL_NEWEST), AFTER_ADOPTION)
    assert starts(out) == [0]
    commit = worker.take_commit(0)
    assert commit is not None
    (result,) = [parse_result(r.value or b"") for r in commit.results]
    assert result.run_id == run_id_for("s1", T0) and result.status == RunStatus.CANCELLED
    assert result.error is not None and result.error["type"] == CONCURRENCY_ERROR
    assert result.started_ms is None  # never started


def test_cancel_in_progress_stops_the_oldest_and_starts_the_newest_once_it_exited() -> None:
    worker = core()
    strategy = ConcurrencyStrategy.CANCEL_IN_PROGRESS
    out = worker.receive(keyed(0, strategy=strategy), AFTER_ADOPTION)
    assert starts(out) == [0]
    out = worker.receive(keyed(1, strategy=strategy), heard(worker, AFTER_ADOPTION + 1))
    assert [a.key for a in out if isinstance(a, CancelJob)] == [(0, 0, 0)]
    assert starts(out) == []  # not beside the job still stopping
    exited_ms = heard(worker, AFTER_ADOPTION + 2)
    out = worker.job_exited((0, 0, 0), Outcome(RunStatus.SUCCEEDED), exited_ms)
    assert starts(out) == [1]
    commit = worker.take_commit(0)
    assert commit is not None
    (result,) = [parse_result(r.value or b"") for r in commit.results]
    assert result.status == RunStatus.CANCELLED  # asked to stop: its one result says so
    assert result.error is not None and result.error["type"] == CONCURRENCY_ERROR


def test_a_rejoined_partitions_dropped_jobs_still_count_until_they_exit() -> None:
    worker = core()
    worker.receive(keyed(0), AFTER_ADOPTION)
    worker.revoke(0)  # a rebalance: the job is asked to stop, still runs
    worker.assign(0, 0, None, AFTER_ADOPTION, lease=1)  # kept: adopted again at once
    later = AFTER_ADOPTION + LEASE_MS  # past the adoption's wait
    worker.lease_renewed(later)
    out = worker.receive(keyed(0), later)
    out += worker.advance(later)
    assert starts(out) == []  # the old job of the key has not exited
    out = worker.job_exited((0, 0, 0), Outcome(RunStatus.CANCELLED), later + 1)
    assert starts(out) == [0]
