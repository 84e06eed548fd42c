"""Backoff, deterministic jitter, retries through a shard, the DLQ and dlq.replay."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from actors.shard.retry import backoff_ms, is_final_failure, jitter_fraction
from tests.kit.shard import MINUTE, SECOND, T0, Shard, command, upsert
from topics.commands import RetryPolicy
from topics.messages import Run


def test_backoff_without_jitter_is_exponential_and_capped() -> None:
    policy = RetryPolicy(initial_s=1, coefficient=2, max_interval_s=100, jitter="none")
    delays = [backoff_ms(policy, run_id="r", attempt=k, failures_in_series=k) for k in range(1, 10)]
    assert delays == [1000, 2000, 4000, 8000, 16000, 32000, 64000, 100000, 100000]


def test_backoff_survives_a_huge_exponent() -> None:
    policy = RetryPolicy(max_attempts=1000, coefficient=100, max_interval_s=7, jitter="none")
    assert backoff_ms(policy, run_id="r", attempt=999, failures_in_series=999) == 7000


@given(run_id=st.text(min_size=1, max_size=60), attempt=st.integers(1, 1000))
def test_jitter_is_a_pure_function_of_run_and_attempt(run_id: str, attempt: int) -> None:
    u = jitter_fraction(run_id, attempt)
    assert 0.0 <= u < 1.0
    assert jitter_fraction(run_id, attempt) == u
    policy = RetryPolicy()
    cap_ms = min(100_000, 1000 * 2 ** (attempt - 1)) if attempt < 30 else 100_000
    delay = backoff_ms(policy, run_id=run_id, attempt=attempt, failures_in_series=attempt)
    assert 0 <= delay <= cap_ms
    assert delay == backoff_ms(policy, run_id=run_id, attempt=attempt, failures_in_series=attempt)


def test_full_jitter_spreads_runs_that_fail_together() -> None:
    policy = RetryPolicy(initial_s=10, max_interval_s=10)
    delays = {
        backoff_ms(
            policy, run_id=f"job-{i}@2026-10-10T00:00:00.000Z", attempt=1, failures_in_series=1
        )
        for i in range(200)
    }
    assert len(delays) > 190  # not a synchronised wave
    assert min(delays) < 2_000 and max(delays) > 8_000


def test_final_failures() -> None:
    policy = RetryPolicy(max_attempts=3, non_retryable=("AccountDeleted",))
    assert not is_final_failure(policy, error_type="IOError", failures_in_series=2)
    assert is_final_failure(policy, error_type="IOError", failures_in_series=3)
    assert is_final_failure(policy, error_type="AccountDeleted", failures_in_series=1)
    assert is_final_failure(policy, error_type="NonRetryable", failures_in_series=1)
    assert not is_final_failure(policy, error_type=None, failures_in_series=1)


# --- through a shard ---------------------------------------------------------------

RETRY = {
    "max_attempts": 3,
    "initial_s": 2,
    "coefficient": 3,
    "max_interval_s": 60,
    "jitter": "none",
}


def _first_run(shard: Shard, **fields: Any) -> Run:
    body = upsert(spec={"cron": "0 0 * * *"}, retry=RETRY)
    body.update(fields)
    shard.send(body, at_ms=T0 - 1)
    [run] = shard.advance(T0).runs
    return run


def test_a_failed_attempt_is_retried_after_its_backoff_with_the_same_run_id() -> None:
    shard = Shard()
    run = _first_run(shard)
    out = shard.report(run, "failed", at_ms=T0 + SECOND)
    assert out.runs == [] and out.dlq == []
    assert shard.state_doc()["runs"][0]["retry_at"] is not None
    assert shard.advance(T0 + 3 * SECOND - 1).runs == []
    [second] = shard.advance(T0 + 3 * SECOND).runs  # failed at +1 s, waits 2 s
    assert (second.run_id, second.attempt) == (run.run_id, 2)
    assert second.idempotency_key == run.idempotency_key
    assert second.scheduled_ms == run.scheduled_ms and second.fired_ms == T0 + 3 * SECOND
    shard.report(second, "failed", at_ms=T0 + 4 * SECOND)
    [third] = shard.advance(T0 + 10 * SECOND).runs  # waits 2 s * 3
    assert third.attempt == 3
    assert shard.core.stats["retries_total"] == 2


def test_exhausted_attempts_go_to_the_dlq_with_every_outcome_and_stop() -> None:
    shard = Shard()
    run = _first_run(shard)
    attempt = run
    for k in range(3):
        out = shard.report(attempt, "failed", error={"type": "IOError", "message": f"try {k + 1}"})
        if k < 2:
            [attempt] = shard.run_until(shard.now_ms + MINUTE).runs
    [dead] = out.dlq
    assert dead.run_id == run.run_id and dead.job.name == "test.job"
    assert dead.last_error == {"type": "IOError", "message": "try 3"}
    assert [a["attempt"] for a in dead.attempts] == [1, 2, 3]
    assert [a["status"] for a in dead.attempts] == ["failed"] * 3
    assert shard.state_doc().get("runs") is None
    assert [
        r for r in shard.run_until(shard.now_ms + 10 * MINUTE).runs if r.run_id == run.run_id
    ] == []


def test_a_non_retryable_error_goes_straight_to_the_dlq() -> None:
    shard = Shard()
    run = _first_run(shard)
    out = shard.report(run, "failed", error={"type": "NonRetryable", "message": "card deleted"})
    assert len(out.dlq) == 1
    shard2 = Shard()
    run2 = _first_run(shard2, retry={**RETRY, "non_retryable": ["AccountDeleted"]})
    assert (
        len(shard2.report(run2, "failed", error={"type": "AccountDeleted", "message": "x"}).dlq)
        == 1
    )


def test_success_ends_the_run_and_later_or_duplicate_results_are_ignored() -> None:
    shard = Shard()
    run = _first_run(shard)
    out = shard.report(run, "succeeded", at_ms=T0 + SECOND)
    assert out.runs == [] and out.dlq == []
    assert shard.state_doc().get("runs") is None
    assert shard.core.stats["timers"] == 1  # only the next fire is left
    assert shard.report(run, "succeeded").records == []  # redelivered
    assert shard.report(run, "failed").records == []  # late and contradictory
    assert shard.report(run, "failed", attempt=7).records == []  # unknown attempt
    assert shard.core.stats["results_ignored_total"] == 3


def test_a_result_for_a_superseded_attempt_is_ignored() -> None:
    shard = Shard()
    run = _first_run(shard)
    shard.report(run, "failed", at_ms=T0 + SECOND)
    assert shard.report(run, "succeeded").records == []  # attempt 1 is over
    [second] = shard.advance(T0 + 3 * SECOND).runs
    assert shard.report(run, "succeeded").records == []
    assert len(shard.report(second, "succeeded").changelog) == 1


def test_a_timed_out_result_from_the_worker_is_retried() -> None:
    shard = Shard()
    run = _first_run(shard)
    shard.report(run, "timed_out", at_ms=T0 + SECOND)
    [second] = shard.advance(T0 + 3 * SECOND).runs
    assert second.attempt == 2


def test_dlq_replay_starts_a_fresh_series_whose_attempt_numbers_continue() -> None:
    shard = Shard()
    run = _first_run(shard, overlap="allow")
    shard.report(run, "failed", error={"type": "NonRetryable", "message": "no"})
    out = shard.send(command("dlq.replay", run_id=run.run_id), at_ms=T0 + MINUTE)
    [replayed] = out.runs
    assert (replayed.run_id, replayed.attempt) == (run.run_id, 2)
    assert replayed.scheduled_ms == run.scheduled_ms and replayed.fired_ms == T0 + MINUTE
    # A fresh budget of 3 attempts: 2, 3, 4, then the DLQ again.
    attempt = replayed
    for _ in range(2):
        shard.report(attempt, "failed")
        [attempt] = [
            r for r in shard.run_until(shard.now_ms + MINUTE).runs if r.run_id == run.run_id
        ]
    out = shard.report(attempt, "failed")
    [dead] = out.dlq
    assert attempt.attempt == 4
    assert [a["attempt"] for a in dead.attempts] == [2, 3, 4]


def test_dlq_replay_of_a_run_that_is_not_dead_is_rejected() -> None:
    shard = Shard()
    run = _first_run(shard)
    [rejection] = shard.send(command("dlq.replay", run_id=run.run_id)).rejected
    assert "is in flight" in rejection.reason
    shard.report(run, "failed", error={"type": "NonRetryable", "message": "no"})
    assert len(shard.send(command("dlq.replay", run_id=run.run_id)).runs) == 1
    [again] = shard.send(command("dlq.replay", run_id=run.run_id)).rejected
    assert "is in flight" in again.reason
    [ghost] = shard.send(command("dlq.replay", run_id="s@2026-01-01T00:00:00.000Z")).rejected
    assert "not among the dead-lettered runs" in ghost.reason
