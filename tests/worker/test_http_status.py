"""What an HTTP target's answer means: success, retried (with the Retry-After floor
for the shard) or final; Retry-After in seconds and as an HTTP date."""

from __future__ import annotations

import email.utils

import pytest

from actors.shard.retry import is_final_failure
from actors.worker.http_status import retry_after_s, status_error
from topics.commands import RetryPolicy
from topics.messages import RETRY_AFTER_MAX_S

NOW = 1_790_000_000.0
POLICY = RetryPolicy(max_attempts=5)


def _error(status: int, **kw: str) -> dict[str, str] | None:
    return status_error(status, "", "POST https://api.example/x", now_s=NOW, **kw)


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_2xx_succeeds(status: int) -> None:
    assert _error(status) is None


@pytest.mark.parametrize("status", [408, 429, 500, 501, 502, 503, 504, 599])
def test_408_429_and_5xx_are_retried_by_the_policy(status: int) -> None:
    error = _error(status)
    assert error is not None and error["message"].startswith(f"HTTP {status} from POST")
    assert not is_final_failure(POLICY, error_type=error["type"], failures_in_series=1)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 409, 410, 422, 451, 499])
def test_other_4xx_are_final(status: int) -> None:
    error = _error(status)
    assert error is not None and error["type"] == "NonRetryable"
    assert is_final_failure(POLICY, error_type=error["type"], failures_in_series=1)


@pytest.mark.parametrize("status", [300, 301, 302, 303, 307, 308])
def test_redirects_are_final_and_say_where_they_point(status: int) -> None:
    error = _error(status, location="https://elsewhere.example/y")
    assert error is not None and error["type"] == "NonRetryable"
    assert "redirects to https://elsewhere.example/y" in error["message"]
    assert "not followed" in error["message"]


def test_retry_after_in_seconds() -> None:
    assert retry_after_s("30", NOW) == 30
    assert retry_after_s(" 0 ", NOW) == 0
    assert retry_after_s("99999999", NOW) == RETRY_AFTER_MAX_S


def test_retry_after_as_an_http_date() -> None:
    later = email.utils.formatdate(NOW + 90.2, usegmt=True)  # "Sun, 06 Sep 2026 ... GMT"
    assert retry_after_s(later, NOW) == 90  # the date has whole seconds: .2 is cut
    assert retry_after_s(email.utils.formatdate(NOW - 60, usegmt=True), NOW) == 0
    assert retry_after_s(email.utils.formatdate(NOW + 10**6, usegmt=True), NOW) == 3600


@pytest.mark.parametrize("text", [None, "", "soon", "-5", "1.5", "Sun, 99 Foo 2026"])
def test_unreadable_retry_after_is_ignored(text: str | None) -> None:
    assert retry_after_s(text, NOW) is None


def test_retry_after_goes_into_a_retried_error_only() -> None:
    busy = _error(429, retry_after="12")
    assert busy is not None and busy["retry_after_s"] == "12"
    assert "Retry-After: 12 s" in busy["message"]
    gone = _error(404, retry_after="12")
    assert gone is not None and "retry_after_s" not in gone
