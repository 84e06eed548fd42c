"""A Kafka target's occurrence: its record, written by the shard in the fire's transaction.

Pure, like the rest of the core. An occurrence of a schedule whose job is the
carrier `topics.targets.KAFKA_JOB` never becomes a run on ``{ns}.runs``: the shard
writes the target record itself, beside a ``succeeded`` result naming the topic and
partition, in the same batch as the schedule's changelog update. The runtime
commits the batch in one transaction, so the record is visible to read_committed
readers exactly when the occurrence counts as fired: once, across any failover.

When the record cannot be written (its topic not allowed, unknown, larger than the
topic accepts, or refused by the broker on an earlier try: `TargetTopics.why_not`),
the occurrence ends at once, visibly: a ``failed`` result with error type
`REFUSED_ERROR` and the reason, and a dead letter naming the target (the carrier
job's args hold the topic). No retry: what refused it does not heal by waiting a
backoff, and a ``dlq.replay`` tries again (as attempt n + 1) once it is fixed.

The partition is chosen here, not by the producer, so the result can name it: the
default partitioner's murmur2 of the rendered key, or of the run id for a keyless
record (the same occurrence always lands on the same partition).
"""

from __future__ import annotations

from collections.abc import Callable

from actors.shard.state import instant_text
from topics.partitioner import murmur2_partition
from topics.records import TargetRecord
from topics.targets import (
    ATTEMPT_HEADER,
    IDEMPOTENCY_KEY_HEADER,
    RUN_ID_HEADER,
    SCHEDULE_ID_HEADER,
    SCHEDULED_AT_HEADER,
    KafkaDelivery,
    TargetTopics,
)
from topics.templates import render

REFUSED_ERROR = "TargetRefused"
# A record's framing in a batch of its own, headers aside (see actors.scheduler.oversize).
_FRAMING_BYTES = 128


class Occurrence:
    """What a target's placeholders may name, for one attempt of one occurrence."""

    __slots__ = ("_fired_ms", "_interval", "_values")

    def __init__(
        self,
        *,
        schedule_id: str,
        run_id: str,
        scheduled_ms: int,
        fired_ms: int,
        attempt: int,
        idempotency_key: str,
        interval: Callable[[], tuple[int, int]] | None,
    ) -> None:
        self._values = {
            "run_id": run_id,
            "schedule_id": schedule_id,
            "scheduled_at": instant_text(scheduled_ms),
            "attempt": str(attempt),
            "idempotency_key": idempotency_key,
        }
        self._fired_ms = fired_ms
        self._interval = interval

    def __call__(self, name: str) -> str:
        found = self._values.get(name)
        if found is not None:
            return found
        if name == "fired_at":  # rarely named: made only then
            found = self._values[name] = instant_text(self._fired_ms)
            return found
        # The interval walks the spec back: only for a template that names it.
        start_ms, end_ms = self._interval() if self._interval is not None else (0, 0)
        self._values["logical_date"] = self._values["data_interval_start"] = instant_text(start_ms)
        self._values["data_interval_end"] = instant_text(end_ms)
        return self._values[name]

    def header(self, name: str) -> bytes:
        return self._values[name].encode()


def target_record(
    delivery: KafkaDelivery, occurrence: Occurrence, targets: TargetTopics
) -> TargetRecord | str:
    """The record to write, or the reason it cannot be written."""
    topic = targets.writable(delivery.topic)
    if isinstance(topic, str):
        return topic
    key = None if delivery.key is None else render(delivery.key, occurrence).encode()
    try:
        value = delivery.value_bytes(occurrence)
    except (TypeError, ValueError) as exc:  # orjson: a rendered value it cannot encode
        return f"target value could not be encoded: {exc}"
    run_id = occurrence.header("run_id")
    headers = [
        (RUN_ID_HEADER, run_id),
        (SCHEDULE_ID_HEADER, occurrence.header("schedule_id")),
        (SCHEDULED_AT_HEADER, occurrence.header("scheduled_at")),
        (ATTEMPT_HEADER, occurrence.header("attempt")),
        (IDEMPOTENCY_KEY_HEADER, occurrence.header("idempotency_key")),
    ]
    if delivery.headers:
        headers += [(name, render(text, occurrence).encode()) for name, text in delivery.headers]
    limit = topic.max_message_bytes
    if limit is not None:
        size = len(value) + (0 if key is None else len(key)) + _FRAMING_BYTES
        for name, header in headers:
            size += len(name) + len(header) + 8
        if size > limit:
            return (
                f"target record of {size} bytes with framing is larger than {delivery.topic}"
                f" accepts ({limit}, max.message.bytes); make the value smaller"
                " or raise max.message.bytes on the topic"
            )
    if key is not None:
        partition = _partition(key, topic.partitions)
    else:  # the run id: new at each fire, not worth remembering
        partition = murmur2_partition(run_id, topic.partitions)
    return TargetRecord(delivery.topic, key, value, partition, None, tuple(headers))


_PARTITION_CACHE_MAX = 1_000_000
# murmur2 in Python costs ~15 µs, and a keyed target's key is most often the same at
# every fire (``{schedule_id}``): remember it (dropped wholesale past a cap).
_partitions: dict[tuple[bytes, int], int] = {}


def _partition(hashed: bytes, partitions: int) -> int:
    cache_key = (hashed, partitions)
    partition = _partitions.get(cache_key)
    if partition is None:
        partition = murmur2_partition(hashed, partitions)
        if len(_partitions) >= _PARTITION_CACHE_MAX:
            _partitions.clear()
        _partitions[cache_key] = partition
    return partition
