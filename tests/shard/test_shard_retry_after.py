"""A failed result's ``error.retry_after_s`` (an HTTP target's Retry-After) is the
floor of the next retry's delay; the backoff still applies when it is longer."""

from __future__ import annotations

from tests.kit.shard import SECOND, T0, Shard, upsert
from topics.messages import RETRY_AFTER_MAX_S, parse_result, result_value, retry_after_ms
from topics.vocabulary import RunStatus

RETRY = {
    "max_attempts": 3,
    "initial_s": 2,
    "coefficient": 2,
    "max_interval_s": 60,
    "jitter": "none",
}


def _failed_once(retry_after: str | None) -> tuple[Shard, int]:
    """A shard whose first attempt failed at T0 + 1 s; the failure's error carries
    ``retry_after``. Returns the shard and the instant the failure was applied."""
    shard = Shard()
    shard.send(upsert(spec={"cron": "0 0 * * *"}, retry=RETRY), at_ms=T0 - 1)
    [run] = shard.advance(T0).runs
    error = {"type": "HttpStatus", "message": "HTTP 429 from POST https://api.example/x"}
    if retry_after is not None:
        error["retry_after_s"] = retry_after
    shard.report(run, "failed", error=error, at_ms=T0 + SECOND)
    return shard, T0 + SECOND


def test_a_retry_after_longer_than_the_backoff_delays_the_retry() -> None:
    shard, failed_ms = _failed_once("30")
    assert shard.advance(failed_ms + 30 * SECOND - 1).runs == []  # backoff alone: 2 s
    [second] = shard.advance(failed_ms + 30 * SECOND).runs
    assert second.attempt == 2 and second.fired_ms == failed_ms + 30 * SECOND


def test_a_retry_after_shorter_than_the_backoff_changes_nothing() -> None:
    shard, failed_ms = _failed_once("1")
    assert shard.advance(failed_ms + 2 * SECOND - 1).runs == []
    [second] = shard.advance(failed_ms + 2 * SECOND).runs
    assert second.attempt == 2


def test_a_result_without_retry_after_waits_the_backoff() -> None:
    shard, failed_ms = _failed_once(None)
    [second] = shard.advance(failed_ms + 2 * SECOND).runs
    assert second.attempt == 2


def test_retry_after_is_read_strictly_and_capped() -> None:
    assert retry_after_ms(None) == 0
    assert retry_after_ms({"type": "X", "message": ""}) == 0
    for bad in ("soon", "-5", "nan", "inf", "0", ""):
        assert retry_after_ms({"type": "X", "message": "", "retry_after_s": bad}) == 0, bad
    assert retry_after_ms({"type": "X", "message": "", "retry_after_s": "2.5"}) == 2500
    huge = {"type": "X", "message": "", "retry_after_s": "999999999"}
    assert retry_after_ms(huge) == RETRY_AFTER_MAX_S * 1000


def test_the_result_wire_keeps_retry_after() -> None:
    error = {"type": "HttpStatus", "message": "HTTP 503", "retry_after_s": "7"}
    value = result_value(
        run_id="s@2026-10-10T00:00:00.000Z",
        schedule_id="s",
        task=None,
        attempt=1,
        status=RunStatus.FAILED,
        scheduled_ms=T0,
        started_ms=T0,
        finished_ms=T0,
        worker="w",
        error=error,
    )
    assert parse_result(value).error == error
