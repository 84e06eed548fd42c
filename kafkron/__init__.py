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

Programs that schedule work, with `Client` (asyncio) or `SyncClient`::

    from kafkron import Client, Cron, Retry

    async with Client() as client:  # KAFKRON_NAMESPACE, KAFKRON_BOOTSTRAP, security
        await client.create_schedule(
            "invoice-nightly", Cron("0 0 * * *", tz="Europe/London"),
            "billing.invoice_nightly", retry=Retry(max_attempts=3))

Commands can also be built alone (`schedule_upsert`, `run_cancel`, ...) and sent
later; every builder validates as the shard does and raises `InvalidCommand` naming
the field.
"""

# `actors` first: importing it installs the spec compiler the command decoder uses.
from actors import CANCELLED_ERROR, NonRetryable, RunCancelled, RunContext, job
from actors.sending import SendError
from actors.views.holiday_source import holiday_days
from kafkron.backfills import BackfillSent
from kafkron.client import Client
from kafkron.outcomes import RunOutcome, run_id
from kafkron.reading import ReadError
from kafkron.schedules import Schedule, next_fires
from kafkron.sync import SyncClient
from topics.alerts import Alert, AlertType, Deadline, DeadlineKind, parse_alert
from topics.calendar_builders import calendar_delete, calendar_upsert
from topics.command_builders import (
    CommandRecord,
    InvalidCommand,
    backfill_cancel,
    dag_clear,
    dag_upsert,
    dlq_replay,
    run_cancel,
    schedule_backfill,
    schedule_delete,
    schedule_pause,
    schedule_resume,
    schedule_trigger,
    schedule_upsert,
    validated,
)
from topics.command_parts import (
    AnyOf,
    At,
    BusinessDay,
    Cron,
    Days,
    Dst,
    Every,
    HttpTarget,
    KafkaTarget,
    Misfire,
    Retry,
    RRule,
    Spec,
    Task,
)
from topics.concurrency import Concurrency
from topics.messages import DeadLetter, Result
from topics.names import Settings
from topics.ratelimits import RateLimit
from topics.schedule_fields import ScheduleFields
from topics.vocabulary import (
    ConcurrencyStrategy,
    DstFold,
    DstGap,
    JitterMode,
    MisfireMode,
    OverlapPolicy,
    RunStatus,
)

__all__ = [
    "CANCELLED_ERROR",
    "Alert",
    "AlertType",
    "AnyOf",
    "At",
    "BackfillSent",
    "BusinessDay",
    "Client",
    "CommandRecord",
    "Concurrency",
    "ConcurrencyStrategy",
    "Cron",
    "Days",
    "DeadLetter",
    "Deadline",
    "DeadlineKind",
    "Dst",
    "DstFold",
    "DstGap",
    "Every",
    "HttpTarget",
    "InvalidCommand",
    "JitterMode",
    "KafkaTarget",
    "Misfire",
    "MisfireMode",
    "NonRetryable",
    "OverlapPolicy",
    "RRule",
    "RateLimit",
    "ReadError",
    "Result",
    "Retry",
    "RunCancelled",
    "RunContext",
    "RunOutcome",
    "RunStatus",
    "Schedule",
    "ScheduleFields",
    "SendError",
    "Settings",
    "Spec",
    "SyncClient",
    "Task",
    "backfill_cancel",
    "calendar_delete",
    "calendar_upsert",
    "dag_clear",
    "dag_upsert",
    "dlq_replay",
    "holiday_days",
    "job",
    "next_fires",
    "parse_alert",
    "run_cancel",
    "run_id",
    "schedule_backfill",
    "schedule_delete",
    "schedule_pause",
    "schedule_resume",
    "schedule_trigger",
    "schedule_upsert",
    "validated",
]
