"""Worker actors: run registered jobs from ``{ns}.runs`` and publish their results.

Public names: ``job`` (register a function as a job), ``RunContext`` (what a job
is told about its run), ``NonRetryable`` (raise it to skip retries),
``RunCancelled`` (what ``RunContext.heartbeat()`` raises once the worker wants a job
to stop) and ``CANCELLED_ERROR`` (the ``error.type`` of a cancelled run's result).
Job authors import them from ``kafkron``, which re-exports them.
"""

from actors.worker.context import RunContext
from actors.worker.errors import CANCELLED_ERROR, NonRetryable, RunCancelled
from actors.worker.registry import job

__all__ = ["CANCELLED_ERROR", "NonRetryable", "RunCancelled", "RunContext", "job"]
