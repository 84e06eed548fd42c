"""One log line per dead letter and per rejected command a shard has committed.

The shard core is pure and does not log; the runtime writes what it returns. After
a transaction commits, `log_committed` picks the few ``{ns}.dlq`` and
``{ns}.rejected`` records out of the batch and says, in a line each, what a person
on call wants to know: which run died, after how many attempts, of what; which
command was refused, and why. Logged after the commit, so a line never describes a
record that a failed transaction took back.

Cost on the hot path: one identity test per written record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from topics.messages import parse_dlq, parse_rejected
from topics.names import TopicKind
from topics.records import OutRecord

log = logging.getLogger("kafkron.scheduler")

_DLQ = TopicKind.DLQ
_REJECTED = TopicKind.REJECTED
_MAX_TEXT = 200


def log_committed(partition: int, records: Iterable[OutRecord]) -> None:
    for record in records:
        topic = record.topic
        if (topic is _DLQ or topic is _REJECTED) and record.value is not None:
            try:
                _log_one(partition, topic, record.value)
            except ValueError as exc:  # a record we wrote ourselves; say so, never raise
                log.warning("shard %d wrote an unreadable %s record: %s", partition, topic, exc)


def _log_one(partition: int, topic: TopicKind, value: bytes) -> None:
    if topic is _DLQ:
        letter = parse_dlq(value)
        error = letter.last_error or {}
        # The record keeps the first and the last few attempts, each with its number.
        last = letter.attempts[-1].get("attempt") if letter.attempts else None
        attempts = last if isinstance(last, int) else len(letter.attempts)
        log.warning(
            "DLQ: run %s (job %s) dead-lettered after %d attempts: %s: %s"
            " (shard %d; `kafkron dlq replay %s` runs it again)",
            letter.run_id,
            letter.job.name,
            attempts,
            error.get("type", "?"),
            str(error.get("message", ""))[:_MAX_TEXT],
            partition,
            letter.run_id,
        )
    else:
        rejected = parse_rejected(value)
        log.warning(
            "REJECTED: command at %s[%d]@%d: %s (shard %d)",
            rejected.topic,
            rejected.partition,
            rejected.offset,
            rejected.reason[:_MAX_TEXT],
            partition,
        )
