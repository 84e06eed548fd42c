"""When `Client.wait_for` says a run has ended (`kafkron.outcomes.OutcomeTracker`),
from results and dead letters as the shard and the workers write them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkron.outcomes import OutcomeTracker, run_id
from topics.command_types import Job
from topics.covers import Covers
from topics.messages import DeadLetter, Result, dlq_value, parse_dlq, parse_result, result_value
from topics.vocabulary import RunStatus

T0 = 1_790_000_000_000
RUN = run_id("fx", "2026-09-21T14:13:20Z")


def _result(status: RunStatus, attempt: int = 1, run: str = RUN, **extra: Any) -> Result:
    return parse_result(
        result_value(
            run_id=run,
            schedule_id=run.split("@")[0],
            task=None,
            attempt=attempt,
            status=status,
            scheduled_ms=T0,
            started_ms=T0,
            finished_ms=T0 + 10,
            worker="w1",
            error=None if status == RunStatus.SUCCEEDED else {"type": "E", "message": "m"},
            **extra,
        )
    )


def _dead(attempts: list[int]) -> DeadLetter:
    history: list[Mapping[str, Any]] = [{"attempt": n, "status": "failed"} for n in attempts]
    return parse_dlq(
        dlq_value(
            run_id=RUN,
            schedule_id="fx",
            task=None,
            job=Job("j", {}),
            last_error={"type": "E", "message": "m"},
            attempts=history,
            dead_at_ms=T0 + 20,
        )
    )


def test_a_success_ends_the_run_and_a_progress_report_does_not() -> None:
    tracker = OutcomeTracker(RUN)
    progress = _result(RunStatus.RUNNING, progress=({"done": 1}, T0))
    assert tracker.on_result(progress) is None
    outcome = tracker.on_result(_result(RunStatus.SUCCEEDED))
    assert outcome is not None and outcome.succeeded and outcome.dead_letter is None


def test_a_failure_ends_the_run_only_with_its_dead_letter() -> None:
    tracker = OutcomeTracker(RUN)
    assert tracker.on_result(_result(RunStatus.FAILED, 1)) is None  # to be retried
    assert tracker.on_result(_result(RunStatus.TIMED_OUT, 2)) is None
    outcome = tracker.on_dead_letter(_dead([1, 2]))
    assert outcome is not None and outcome.status == "timed_out" and outcome.attempt == 2
    assert outcome.dead_letter is not None and outcome.error == {"type": "E", "message": "m"}


def test_a_dead_letter_read_before_its_result_waits_for_it() -> None:
    tracker = OutcomeTracker(RUN)
    assert tracker.on_dead_letter(_dead([1])) is None
    outcome = tracker.on_result(_result(RunStatus.FAILED, 1))
    assert outcome is not None and outcome.dead_letter is not None


def test_after_a_replay_the_old_dead_letter_ends_nothing() -> None:
    tracker = OutcomeTracker(RUN)
    tracker.on_dead_letter(_dead([1, 2]))
    assert tracker.on_result(_result(RunStatus.FAILED, 3)) is None  # the replay's attempt
    assert tracker.on_result(_result(RunStatus.FAILED, 2)) is None  # an older one, late
    outcome = tracker.on_result(_result(RunStatus.SUCCEEDED, 4))
    assert outcome is not None and outcome.attempt == 4


def test_a_dag_runs_own_result_ends_it_whatever_its_status() -> None:
    tracker = OutcomeTracker(RUN)
    outcome = tracker.on_result(_result(RunStatus.FAILED, counts={"succeeded": 1, "failed": 1}))
    assert outcome is not None and outcome.counts == {"succeeded": 1, "failed": 1}


def test_a_folded_result_ends_the_occurrences_it_covers_only() -> None:
    covers = Covers(T0 - 60_000, T0 + 60_000, 3)
    first = run_id("fx", "2026-09-21T14:12:20Z")
    folded = _result(RunStatus.MISSED, run=first, covers=covers)
    outcome = OutcomeTracker(RUN).on_result(folded)
    assert outcome is not None and outcome.status == "missed" and outcome.result is folded
    later = OutcomeTracker(run_id("fx", "2026-09-21T14:15:00Z"))
    assert later.on_result(folded) is None
    assert OutcomeTracker(run_id("other", "2026-09-21T14:13:20Z")).on_result(folded) is None
