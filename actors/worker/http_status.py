"""What an HTTP target's response means for its attempt: success, a retry, or the end.

- 2xx: succeeded.
- 408, 429 and 5xx: failed with error type `RETRYABLE_TYPE`, so the schedule's
  retry policy retries it; a ``Retry-After`` (seconds or an HTTP date) goes into
  the error as ``retry_after_s``, the floor of the shard's next delay.
- 3xx: failed for good (``NonRetryable``). Redirects are not followed: the place a
  redirect points to was never checked against the egress rule when the schedule
  was written, and a target that moved is fixed by scheduling its new URL.
- Any other status (4xx): failed for good; another attempt of the same request gets
  the same answer.

Connection errors and timeouts are retried too (`CONNECTION_TYPE`, `TIMEOUT_TYPE`).
"""

from __future__ import annotations

import email.utils
import math

from actors.worker.errors import MAX_ERROR_MESSAGE_CHARS, NON_RETRYABLE_TYPE
from topics.messages import RETRY_AFTER_FIELD, RETRY_AFTER_MAX_S

RETRYABLE_TYPE = "HttpStatus"
CONNECTION_TYPE = "HttpConnectionError"
TIMEOUT_TYPE = "HttpTimeout"
RETRIED_STATUSES = frozenset({408, 429})


def is_success(status: int) -> bool:
    return 200 <= status < 300


def is_retried(status: int) -> bool:
    return status in RETRIED_STATUSES or 500 <= status < 600


def retry_after_s(value: str | None, now_s: float) -> int | None:
    """Whole seconds to wait from a ``Retry-After`` header (delay-seconds or an
    HTTP-date, RFC 9110 §10.2.3), rounded up, at most `RETRY_AFTER_MAX_S`; None when
    absent or unreadable (then the backoff alone decides)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return min(int(text), RETRY_AFTER_MAX_S)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # HTTP dates are GMT; a zone-less one is read as such
        return None
    return max(0, min(math.ceil(when.timestamp() - now_s), RETRY_AFTER_MAX_S))


def status_error(
    status: int,
    reason: str,
    request: str,
    *,
    location: str | None = None,
    retry_after: str | None = None,
    now_s: float,
) -> dict[str, str] | None:
    """The result's error for a response of ``status`` to ``request`` ("POST url");
    None for a success."""
    if is_success(status):
        return None
    said = f"HTTP {status}{' ' + reason if reason else ''} from {request}"
    if is_retried(status):
        error = {"type": RETRYABLE_TYPE, "message": said}
        seconds = retry_after_s(retry_after, now_s)
        if seconds is not None:
            error["message"] += f" (Retry-After: {seconds} s)"
            error[RETRY_AFTER_FIELD] = str(seconds)
        return error
    if 300 <= status < 400:
        where = f" to {_clip(location, 300)}" if location else ""
        return final(
            "HttpRedirect",
            f"{said} redirects{where}; redirects are not followed, schedule the URL it names",
        )
    return final(RETRYABLE_TYPE, f"{said}; not retried (only 408, 429 and 5xx are)")


def final(kind: str, message: str) -> dict[str, str]:
    """A ``NonRetryable`` error whose message starts with what happened (``kind``), as
    a `NonRetryable` subclass's does."""
    return {"type": NON_RETRYABLE_TYPE, "message": _clip(f"{kind}: {message}")}


def retried(kind: str, message: str) -> dict[str, str]:
    return {"type": kind, "message": _clip(message)}


def _clip(text: str, limit: int = MAX_ERROR_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
