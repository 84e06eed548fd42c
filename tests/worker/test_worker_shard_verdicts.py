"""The worker core and the shard core on one attempt: who writes its result.

Both pure state machines, wired by hand: the shard's run record is delivered to
the worker, the worker's result to the shard. Results of both are counted per
(run_id, attempt), as a reader of ``{ns}.results`` would see them.
"""

from __future__ import annotations

from collections import Counter

from actors.worker.core import CancelJob, Commit, Outcome, StartJob, WorkerCore
from tests.kit.shard import HOUR, MINUTE, SECOND, T0, Shard, upsert
from tests.worker.test_worker_core import run_record as busy_record
from topics.deadlines import TIMEOUT_MARGIN_MS
from topics.messages import Result, Run, parse_result
from topics.names import TopicKind
from topics.records import InRecord, OutRecord


def _worker(concurrency: int = 1) -> WorkerCore:
    core = WorkerCore(
        worker="w-1",
        concurrency=concurrency,
        known_job=lambda name: True,
        now_ms=T0,
        lease_loss_ms=10 * MINUTE,
    )
    core.assign(0, 0, None, T0)
    return core


def _as_record(shard: Shard, run: Run, offset: int) -> InRecord:
    [written] = [
        r
        for r in shard.written
        if r.topic == TopicKind.RUNS and r.value is not None and run.run_id.encode() in r.value
    ]
    return InRecord(TopicKind.RUNS, 0, offset, written.key, written.value)


def _results(records: list[OutRecord]) -> list[Result]:
    return [parse_result(r.value) for r in records if r.topic == TopicKind.RESULTS and r.value]


def _committed(worker: WorkerCore) -> Commit:
    commit = worker.take_commit(0)
    assert commit is not None
    worker.commit_done(commit)
    return commit


def test_a_saturated_worker_writes_nothing_for_an_attempt_the_shard_timed_out() -> None:
    shard = Shard()
    shard.send(upsert(spec={"every": "60s"}, timeout_s=10), at_ms=T0 + 5)
    [run] = shard.advance(T0 + MINUTE).runs
    worker = _worker(concurrency=1)
    # Another long job holds the only slot; the run waits in the worker's queue.
    worker.receive(busy_record(0, schedule_id="busy", deadline_ms=T0 + HOUR), T0 + MINUTE)
    worker.receive(_as_record(shard, run, 1), T0 + MINUTE)
    verdict_ms = run.deadline_ms + TIMEOUT_MARGIN_MS
    shard.advance(verdict_ms)  # the shard's timed_out for attempt 1, and its retry timer
    worker.lease_renewed(verdict_ms + SECOND)
    worker.job_exited((0, 0, 0), Outcome("succeeded"), verdict_ms + SECOND)
    commit = _committed(worker)
    assert commit.offset == 2
    assert [r.schedule_id for r in _results(list(commit.results))] == ["busy"]
    visible = _results(shard.written) + _results(list(commit.results))
    per_attempt = Counter((r.run_id, r.attempt) for r in visible)
    assert per_attempt[(run.run_id, 1)] == 1
    [timed_out] = [r for r in visible if (r.run_id, r.attempt) == (run.run_id, 1)]
    assert (timed_out.status, timed_out.worker) == ("timed_out", "shard-0")


def test_cancel_other_reaches_the_worker_and_the_attempt_has_one_result() -> None:
    """The cancel record follows the run on its partition: the worker stops the job
    and writes the one ``cancelled`` result, which ends the run; then the new starts."""
    shard = Shard()
    shard.send(upsert(overlap="cancel_other", spec={"every": "60s"}), at_ms=T0 + 5)
    [old] = shard.advance(T0 + MINUTE).runs
    worker = _worker()
    [start] = worker.receive(_as_record(shard, old, 0), T0 + MINUTE)
    assert isinstance(start, StartJob)
    out = shard.advance(T0 + 2 * MINUTE)  # asks the old run to stop; the new one waits
    assert out.results == [] and out.runs == []
    [cancel] = out.of(TopicKind.RUNS)
    [stop] = worker.receive(
        InRecord(TopicKind.RUNS, 0, 1, cancel.key, cancel.value), T0 + 2 * MINUTE
    )
    assert isinstance(stop, CancelJob) and stop.key == start.key
    # The job exits (it may even report success): the worker's verdict stands.
    worker.job_exited(start.key, Outcome("succeeded"), T0 + 2 * MINUTE + SECOND)
    commit = _committed(worker)
    [result] = _results(list(commit.results))
    assert (result.run_id, result.attempt, result.status) == (old.run_id, 1, "cancelled")
    assert commit.offset == 2
    written = commit.results[0]
    after = shard.raw_result(written.key, written.value)
    [new] = after.runs
    assert new.scheduled_ms == T0 + 2 * MINUTE and after.results == []
    assert [r["run_id"] for r in shard.state_doc()["runs"]] == [new.run_id]
