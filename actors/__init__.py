"""kafkron actors: the schedule, worker and history actors.

Each actor's behaviour is a pure state machine (time passed in, records returned);
the Kafka runtime around it is a thin layer that feeds it messages and commits what
it returns in one transaction. The simulation drives the same state machines.

The job authors' names are exported here too, for programs written before the
`kafkron` package (their one documented home): ``job``, ``RunContext``,
``NonRetryable``, ``RunCancelled`` and ``CANCELLED_ERROR``.
"""

# Installs the spec compiler that `topics.commands.decode_command` uses (the wire
# layer cannot import the time rules; docs/DESIGN.md §4.2): any actors import does it.
import actors.timespec  # noqa: F401
from actors.worker import CANCELLED_ERROR, NonRetryable, RunCancelled, RunContext, job

__all__ = ["CANCELLED_ERROR", "NonRetryable", "RunCancelled", "RunContext", "job"]
