"""Worker actors: run registered jobs from ``{ns}.runs`` and publish their results.

Public names: ``job`` (register a function as a job), ``RunContext`` (what a job
is told about its run), ``NonRetryable`` (raise it to skip retries) and
``RunCancelled`` (what ``RunContext.heartbeat()`` raises once the worker wants a job
to stop).
"""

from actors.worker.context import RunContext
from actors.worker.errors import NonRetryable, RunCancelled
from actors.worker.registry import job

__all__ = ["NonRetryable", "RunCancelled", "RunContext", "job"]
