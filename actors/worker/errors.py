"""Exceptions a job raises or meets, and how an exception becomes a result's error."""

from __future__ import annotations

# The result error type the schedule actor treats as final, whatever the policy says
# (it must match the shard's retry rule).
NON_RETRYABLE_TYPE = "NonRetryable"

CANCELLED_ERROR = "Cancelled"
"""The ``error.type`` of a result whose run was cancelled by a ``run.cancel`` command
(or by ``overlap: cancel_other``); its ``error.message`` is the reason given.

Example, reading a result::

    if result.status == "cancelled" and result.error["type"] == CANCELLED_ERROR:
        print("stopped on purpose:", result.error["message"])
"""

# Messages longer than this are cut: results are small records read by people.
MAX_ERROR_MESSAGE_CHARS = 2000


class NonRetryable(Exception):
    """Raise from a job when another attempt cannot succeed (an account was deleted).

    The run goes straight to the dead-letter topic instead of being retried. The
    result's error type is ``NonRetryable``; a subclass keeps its own name in the
    message (``AccountDeleted: customer 8812``) so the dead letter still says what
    happened. A schedule can also list plain exception names in
    ``retry.non_retryable``.

    Example::

        class AccountDeleted(NonRetryable):
            pass

        @job("billing.charge")
        def charge(ctx: RunContext, customer: str) -> None:
            if not accounts.exists(customer):
                raise AccountDeleted(f"customer {customer}")
    """


class RunCancelled(Exception):
    """Raised by ``RunContext.heartbeat()`` once the worker wants the job to stop.

    Reasons: its deadline passed, its partition moved to another worker, or the worker
    lost contact with the group coordinator. A sync job cannot be interrupted from
    outside its thread, so calling ``heartbeat()`` in its loops is how it learns this;
    let the exception propagate (the attempt then ends ``cancelled``).

    Example::

        @job("reports.rebuild")
        def rebuild(ctx: RunContext) -> None:
            for page in pages():
                ctx.heartbeat({"page": page})  # raises RunCancelled when told to stop
                render(page)
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def error_of(exc: BaseException) -> dict[str, str]:
    """The ``{"type", "message"}`` a failed result carries for ``exc``.

    Total: it never raises, whatever the exception (a ``__str__`` with a bug of its
    own), and its text is valid UTF-8, so the result can always be written."""
    name = utf8_text(type(exc).__name__)
    try:
        message = utf8_text(str(exc))
    except BaseException:  # the job author's `__str__` raised: the exit must still count
        message = f"<unprintable {name}>"
    if isinstance(exc, NonRetryable) and type(exc) is not NonRetryable:
        message = f"{name}: {message}" if message else name
        name = NON_RETRYABLE_TYPE
    if len(message) > MAX_ERROR_MESSAGE_CHARS:
        message = message[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"
    return {"type": name, "message": message}


def utf8_text(text: str) -> str:
    """``text`` as a result can carry it: a lone surrogate (a file name from
    ``os.listdir`` that is not UTF-8) becomes its escape (``\\udcff``) instead of
    making the whole result impossible to encode."""
    if text.isascii():  # the common case, at the cost of one scan
        return text
    return text.encode("utf-8", "backslashreplace").decode()
