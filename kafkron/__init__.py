"""kafkron: a distributed job scheduler on Apache Kafka, from Python.

This package is kafkron's public face: what a job author and a program that
schedules work import. Everything else (`actors`, `topics`, `simulation`) is the
layout's inside and may change between versions.

Job authors::

    from kafkron import NonRetryable, RunCancelled, RunContext, job

    @job("billing.invoice_nightly")
    def invoice_nightly(ctx: RunContext, customers: int = 3000) -> None:
        for n in range(customers):
            ctx.heartbeat({"done": n})  # raises RunCancelled once the run must stop
            ...

A worker runs the jobs of a module: ``kafkron worker --jobs billing.jobs``.
"""

# `actors` first: importing it installs the spec compiler the command decoder uses.
from actors import CANCELLED_ERROR, NonRetryable, RunCancelled, RunContext, job

__all__ = [
    "CANCELLED_ERROR",
    "NonRetryable",
    "RunCancelled",
    "RunContext",
    "job",
]
