"""Progress reports (``ctx.heartbeat(details)``): published at most once per interval
per attempt as ``running`` results, never an attempt's outcome (docs/DESIGN.md §3.5).

The worker core, the context's throttle, the shard (which ignores them), the wire
format and the history store: no Kafka, no clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from actors.history.store import AttemptProgress
from actors.worker.context import RunContext
from actors.worker.core import CancelJob, Outcome, StartJob
from tests.history.test_history_store import T0 as H0
from tests.history.test_history_store import finished, fired, open_store
from tests.kit.shard import MINUTE, SECOND, Shard, upsert
from tests.worker.test_worker_cancel import cancel_record
from tests.worker.test_worker_core import T0, make_core, results_of, run_record
from topics.messages import (
    PROGRESS_DETAILS_MAX_BYTES,
    PROGRESS_INTERVAL_MS,
    PROGRESS_STATUS,
    parse_result,
    parse_run,
    result_value,
)
from topics.records import InRecord
from topics.timefmt import format_ms


def test_a_report_goes_out_with_the_next_commit_at_most_once_per_interval() -> None:
    core = make_core()
    [start] = core.receive(run_record(0, schedule_id="a"), T0)
    assert isinstance(start, StartJob)
    core.progress(start.key, {"done": 1}, T0 + 100, T0 + 100)
    core.progress(start.key, {"done": 2}, T0 + 200, T0 + 200)  # within the interval
    commit = core.take_commit(0)
    assert commit is not None and commit.offset == 0  # the run is still open
    [report] = results_of(commit)
    assert (report.status, report.started_ms, report.finished_ms) == (PROGRESS_STATUS, T0, None)
    assert report.progress == {"details": {"done": 1}, "at": format_ms(T0 + 100)}
    core.commit_done(commit)
    later = T0 + 100 + PROGRESS_INTERVAL_MS
    core.progress(start.key, {"done": 3}, later, later)
    core.job_exited(start.key, Outcome("succeeded"), later + 5)
    [again, result] = results_of(core.take_commit(0))
    assert again.status == PROGRESS_STATUS and again.progress is not None
    assert again.progress["details"] == {"done": 3}
    assert result.status == "succeeded"  # the one outcome, after its reports
    assert core.counts["progress"] == 2


def test_no_report_once_the_attempt_is_decided_or_asked_to_stop() -> None:
    core = make_core()
    [start] = core.receive(run_record(0, schedule_id="a"), T0)
    assert isinstance(start, StartJob)
    [stop] = core.receive(cancel_record(1, "a"), T0 + 10)
    assert isinstance(stop, CancelJob)
    core.progress(start.key, {"done": 1}, T0 + 20, T0 + 20)
    core.job_exited(start.key, Outcome("cancelled"), T0 + 30)
    core.progress(start.key, {"done": 2}, T0 + 40, T0 + 40)  # exited: nothing
    [result] = results_of(core.take_commit(0))
    assert result.status == "cancelled"


def test_a_refused_report_is_dropped_never_turned_into_a_failure() -> None:
    core = make_core()
    [start] = core.receive(run_record(0, schedule_id="a"), T0)
    assert isinstance(start, StartJob)
    core.progress(start.key, {"done": 1}, T0 + 1, T0 + 1)
    commit = core.take_commit(0)
    assert commit is not None
    core.commit_refused(commit, [0], "MESSAGE_TOO_LARGE")
    again = core.take_commit(0)
    assert again is not None and results_of(again) == []


def test_the_context_hands_over_one_report_per_interval() -> None:
    run = parse_run(run_record(0, schedule_id="a").value or b"")
    sent: list[tuple[Any, int]] = []
    ctx = RunContext(run, worker="w", on_progress=lambda d, at: sent.append((d, at)))
    ctx.heartbeat()  # no details: nothing to publish
    ctx.heartbeat({"done": 1})
    ctx.heartbeat({"done": 2})  # within the interval
    assert [d for d, _ in sent] == [{"done": 1}]
    assert ctx.heartbeat_details == {"done": 2}


def test_the_shard_ignores_a_report_the_attempt_runs_on() -> None:
    shard = Shard(now_ms=T0 - SECOND)
    shard.send(upsert("s", spec={"every": "60s"}, timeout_s=300))
    [run] = shard.run_until(T0 + MINUTE).runs
    value = result_value(
        run_id=run.run_id,
        schedule_id=run.schedule_id,
        task=None,
        attempt=run.attempt,
        status=PROGRESS_STATUS,
        scheduled_ms=run.scheduled_ms,
        started_ms=run.fired_ms,
        finished_ms=None,
        worker="w-1",
        error=None,
        progress=({"done": 1}, run.fired_ms + 5),
    )
    out = shard.raw_result(b"s", value)
    assert out.runs == [] and out.results == [] and out.dlq == []
    assert [r.run_id for r in shard.in_flight()] == [run.run_id]  # still in flight
    assert shard.report(run, "succeeded").runs == []


def test_details_are_bounded_and_anything_json_cannot_carry_is_shown() -> None:
    def report(details: Any) -> Any:
        value = result_value(
            run_id="a@x",
            schedule_id="a",
            task=None,
            attempt=1,
            status=PROGRESS_STATUS,
            scheduled_ms=0,
            started_ms=0,
            finished_ms=None,
            worker="w",
            error=None,
            progress=(details, 1_000),
        )
        progress = parse_result(value).progress
        assert progress is not None and progress["at"] == "1970-01-01T00:00:01.000Z"
        return progress["details"]

    assert report({"done": 3, "of": 10}) == {"done": 3, "of": 10}
    assert "omitted" in report("x" * (PROGRESS_DETAILS_MAX_BYTES + 1))
    assert report({1, 2}).startswith("{1")  # a set: its repr


async def test_the_history_keeps_the_latest_report_and_the_outcome_wins(tmp_path: Path) -> None:
    def progress(at_ms: int, done: int) -> AttemptProgress:
        return AttemptProgress("a@1", 1, "a", None, H0, H0 + 5, "w1", f'{{"done":{done}}}', at_ms)

    store = await open_store(tmp_path)
    async with store:
        await store.write([fired("a@1", 1, H0, H0), progress(H0 + 20, 1)], {})
        await store.write([progress(H0 + 40, 2), progress(H0 + 30, 9)], {})  # latest wins
        [attempt] = await store.attempts("a@1")
        assert (attempt.status, attempt.progress, attempt.progress_ms) == (
            "running",
            '{"done":2}',
            H0 + 40,
        )
        await store.write([finished("a@1", 1, "succeeded", H0 + 5, H0 + 50)], {})
        await store.write([progress(H0 + 45, 3)], {})  # read after the outcome: kept out
        [attempt] = await store.attempts("a@1")
        assert (attempt.status, attempt.finished_ms) == ("succeeded", H0 + 50)
        run = await store.run("a@1")
        assert run is not None and run.status == "succeeded"


def test_a_run_with_a_start_deadline_reports_its_start_at_once() -> None:
    core = make_core()
    record = run_record(0, schedule_id="a")
    value = orjson.loads(record.value or b"")
    value["report_start"] = True
    record = InRecord(
        record.topic, record.partition, record.offset, record.key, orjson.dumps(value)
    )
    [start] = core.receive(record, T0 + 30)
    assert isinstance(start, StartJob) and start.run.report_start
    commit = core.take_commit(0)
    assert commit is not None and commit.offset == 0  # the run is still open
    [report] = results_of(commit)
    assert (report.status, report.started_ms, report.finished_ms) == (
        PROGRESS_STATUS,
        T0 + 30,
        None,
    )
    assert core.counts["start_reports"] == 1 and core.counts["progress"] == 0
    # The job's own first heartbeat still goes out at once.
    core.commit_done(commit)
    core.progress(start.key, {"done": 1}, T0 + 40, T0 + 40)
    [beat] = results_of(core.take_commit(0))
    assert beat.progress == {"details": {"done": 1}, "at": format_ms(T0 + 40)}


def test_a_run_without_a_start_deadline_reports_nothing_at_its_start() -> None:
    core = make_core()
    [start] = core.receive(run_record(0, schedule_id="a"), T0)
    assert isinstance(start, StartJob)
    commit = core.take_commit(0)
    assert commit is None or results_of(commit) == []
