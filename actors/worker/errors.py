"""Exceptions a job raises or meets, and how an exception becomes a result's error."""

from __future__ import annotations

# The result error type the schedule actor treats as final, whatever the policy says
# (it must match the shard's retry rule).
NON_RETRYABLE_TYPE = "NonRetryable"

# Messages longer than this are cut: results are small records read by people.
MAX_ERROR_MESSAGE_CHARS = 2000


class NonRetryable(Exception):
    """Raise from a job when another attempt cannot succeed (an account was deleted).

    The run goes straight to the dead-letter topic instead of being retried. The
    result's error type is ``NonRetryable``; a subclass keeps its own name in the
    message (``AccountDeleted: customer 8812``) so the dead letter still says what
    happened. A schedule can also list plain exception names in
    ``retry.non_retryable``.
    """


class RunCancelled(Exception):
    """Raised by ``RunContext.heartbeat()`` once the worker wants the job to stop.

    Reasons: its deadline passed, its partition moved to another worker, or the worker
    lost contact with the group coordinator. A sync job cannot be interrupted from
    outside its thread, so calling ``heartbeat()`` in its loops is how it learns this;
    let the exception propagate.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def error_of(exc: BaseException) -> dict[str, str]:
    """The ``{"type", "message"}`` a failed result carries for ``exc``."""
    name = type(exc).__name__
    message = str(exc)
    if isinstance(exc, NonRetryable) and type(exc) is not NonRetryable:
        message = f"{name}: {message}" if message else name
        name = NON_RETRYABLE_TYPE
    if len(message) > MAX_ERROR_MESSAGE_CHARS:
        message = message[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"
    return {"type": name, "message": message}
