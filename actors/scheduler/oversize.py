"""A run record larger than `{ns}.runs` accepts: ended visibly, never retried, never a stall.

The broker refuses a record batch larger than its topic's ``max.message.bytes``,
and with it every record that shared the batch. Inside a shard's transaction that
refusal must fail the whole transaction (`actors.scheduler.writer.refused`), but a
shard rebuilt from its changelog would fire the same occurrence again and be
refused again, forever: one schedule whose job arguments outgrew the topic would
stop its whole shard. So the turn looks at every run record *before* it is
written, and one that cannot fit is not written at all. Instead, in the same turn:

- the shard writes the attempt's result, ``failed`` with error type
  ``NonRetryable`` and a message naming the sizes and what to change, to
  ``{ns}.results`` (so the history and every results consumer see it);
- the same result is applied to the shard's core, which ends the run the way any
  non-retryable failure ends: a dead letter with the error, the schedule's next
  occurrences unaffected.

The core is told through its ordinary entry point (`apply` of a results record),
so the changelog, the dead letter and the overlap bookkeeping stay the core's.
Pure: no I/O, no clock; the caller passes the limit it read from the topic.
"""

from __future__ import annotations

from collections.abc import Callable

from topics.messages import parse_run, result_value
from topics.names import TopicKind
from topics.records import InRecord, OutRecord
from topics.vocabulary import RunStatus

# A record batch's header (61 bytes) plus one record's framing (attributes, varint
# lengths and deltas: at most ~25 bytes without headers), rounded up: what a batch
# of one record costs beyond its key and value.
BATCH_OVERHEAD_BYTES = 128
ERROR_TYPE = "NonRetryable"
WORKER_NAME = "scheduler"

Apply = Callable[[InRecord, int], list[OutRecord]]


def record_bytes(record: OutRecord) -> int:
    """What one record costs in a batch of its own: key, value and framing."""
    key = 0 if record.key is None else len(record.key)
    value = 0 if record.value is None else len(record.value)
    return key + value + BATCH_OVERHEAD_BYTES


def too_large_message(size_bytes: int, limit_bytes: int, topic: str) -> str:
    return (
        f"run record larger than the runs topic accepts: {size_bytes} bytes with framing,"
        f" {topic} takes at most {limit_bytes} (max.message.bytes); raise max.message.bytes"
        f" on {topic} or make the job's args smaller"
    )


def end_oversized_runs(
    records: list[OutRecord],
    *,
    runs_limit_bytes: int | None,
    runs_topic: str,
    partition: int,
    apply: Apply,
    now_ms: int,
) -> tuple[list[OutRecord], list[str]]:
    """``records`` with every run record too large for ``{ns}.runs`` replaced, and why.

    Each such record is dropped and, in its place, a ``failed`` result of that attempt
    is written and applied to the core through ``apply`` (whose records follow it:
    the dead letter and the schedule's changelog). Returns the records to write and
    one line per ended run for the process log. ``runs_limit_bytes=None``: no limit
    known, nothing changes.
    """
    if runs_limit_bytes is None:
        return records, []
    out: list[OutRecord] = []
    why: list[str] = []
    # A worklist: what the core answers to an ended run (the next buffered occurrence,
    # a DAG task's successors) may be a run record just as large, and is checked too.
    pending = list(reversed(records))
    while pending:
        record = pending.pop()
        if record.topic is not TopicKind.RUNS or record.value is None:
            out.append(record)
            continue
        size_bytes = record_bytes(record)
        if size_bytes <= runs_limit_bytes:
            out.append(record)
            continue
        run = parse_run(record.value)
        message = too_large_message(size_bytes, runs_limit_bytes, runs_topic)
        value = result_value(
            run_id=run.run_id,
            schedule_id=run.schedule_id,
            task=run.task,
            attempt=run.attempt,
            status=RunStatus.FAILED,
            scheduled_ms=run.scheduled_ms,
            started_ms=None,
            finished_ms=now_ms,
            worker=WORKER_NAME,
            error={"type": ERROR_TYPE, "message": message},
        )
        key = run.schedule_id.encode()
        out.append(OutRecord(TopicKind.RESULTS, key, value))
        answered = apply(InRecord(TopicKind.RESULTS, partition, -1, key, value, now_ms), now_ms)
        pending.extend(reversed(answered))
        why.append(f"{run.run_id} attempt {run.attempt}: {message}")
    return out, why
