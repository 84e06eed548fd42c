"""History rows of target runs, made from wire records by the recorder's own `to_row`.

A Kafka target has no run record (the shard writes its record and its result in
the fire's transaction), so its result alone says where it went; an HTTP target's
run names its URL and its result the status; a dead letter names the target it
failed to reach.
"""

from __future__ import annotations

from actors.history.recorder import to_row
from actors.history.store import Row
from topics.command_types import Job
from topics.messages import dlq_value, result_value, run_value
from topics.names import TopicKind
from topics.targets import HTTP_JOB, KAFKA_JOB
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus

T0 = 1_790_000_000_000
KAFKA_RUN = f"order-due@{format_ms(T0)}"
REFUSED_RUN = f"order-due@{format_ms(T0 + 60_000)}"
HTTP_RUN = f"charge-hook@{format_ms(T0)}"
HTTP_ARGS = {"url": "https://billing.example/charge", "method": "POST", "headers": {}}


def target_rows() -> list[Row]:
    kafka_job = Job(KAFKA_JOB, {"topic": "orders.due", "key": None, "value": 1, "headers": {}})
    records = [
        (
            TopicKind.RESULTS,
            result_value(
                run_id=KAFKA_RUN, schedule_id="order-due", task=None, attempt=1,
                status=RunStatus.SUCCEEDED, scheduled_ms=T0, started_ms=T0 + 3,
                finished_ms=T0 + 3, worker="shard-2", error=None,
                target={"kafka": {"topic": "orders.due", "partition": 3}},
            ),
        ),
        (
            TopicKind.RESULTS,
            result_value(
                run_id=REFUSED_RUN, schedule_id="order-due", task=None, attempt=1,
                status=RunStatus.FAILED, scheduled_ms=T0 + 60_000, started_ms=None,
                finished_ms=T0 + 60_003, worker="shard-2",
                error={"type": "TargetRefused", "message": "target topic orders.due refused"},
            ),
        ),
        (
            TopicKind.DLQ,
            dlq_value(
                run_id=REFUSED_RUN, schedule_id="order-due", task=None, job=kafka_job,
                last_error={"type": "TargetRefused", "message": "refused"},
                attempts=[{"attempt": 1}], dead_at_ms=T0 + 60_004,
            ),
        ),
        (
            TopicKind.RUNS,
            run_value(
                run_id=HTTP_RUN, schedule_id="charge-hook", task=None, scheduled_ms=T0,
                fired_ms=T0 + 5, attempt=1, job=Job(HTTP_JOB, HTTP_ARGS),
                idempotency_key="k" * 64, deadline_ms=T0 + 3_600_000,
            ),
        ),
        (
            TopicKind.RESULTS,
            result_value(
                run_id=HTTP_RUN, schedule_id="charge-hook", task=None, attempt=1,
                status=RunStatus.SUCCEEDED, scheduled_ms=T0, started_ms=T0 + 10,
                finished_ms=T0 + 51, worker="worker-1", error=None,
                target={"http": {"status": 200, "duration_ms": 41, "body": "ok"}},
            ),
        ),
    ]  # fmt: skip
    rows = [
        to_row(kind, 0, offset, None, value, T0) for offset, (kind, value) in enumerate(records)
    ]
    return [row for row in rows if row is not None]
