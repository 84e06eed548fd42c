"""kafkron actors: the schedule, worker and history actors.

Each actor's behaviour is a pure state machine (time passed in, records returned);
the Kafka runtime around it is a thin layer that feeds it messages and commits what
it returns in one transaction. The simulation drives the same state machines.
"""

from actors.worker import NonRetryable, RunContext, job

__all__ = ["NonRetryable", "RunContext", "job"]
