"""Reading one partition of the compacted changelog, read_committed, up to its end.

"Its end" is the last stable offset at the moment of the call (a read_committed
consumer's end offset): everything committed before it, nothing of a transaction
still open. Run this *after* ``init_transactions`` of the shard's producer: that call
fences the previous owner and settles its open transaction, so the end we read
is final — no earlier owner can commit behind it.

Completion is judged by the consumer's *position*, not by the last record seen:
with transactions the last offsets of a partition are often commit markers
(control records) that a consumer never returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from actors.scheduler.breather import Breather
from topics.clients import consumer_kwargs
from topics.names import Settings

# Large fetches: a 100k-schedule shard is tens of megabytes of JSON.
MAX_PARTITION_FETCH_BYTES = 16 * 1024 * 1024
FETCH_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RestoreResult:
    records: int  # changelog records read and fed to the core (in offset order)
    keys: int  # the same: the core keeps the last record per key (see `read_to_end`)
    end_offset: int


def make_restore_consumer(
    bootstrap: str, client_id: str, fetch_max_wait_ms: int = 20
) -> AIOKafkaConsumer:
    """A consumer outside any group (assign only), read_committed, never committing.

    ``fetch_max_wait_ms``: a restore knows the end up front, so a long poll at the
    end would only add latency; a standby's tailer waits at the end, and polls long.
    """
    return AIOKafkaConsumer(
        **consumer_kwargs(Settings.from_env(bootstrap=bootstrap), client_id),
        max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES,
        fetch_max_bytes=FETCH_MAX_BYTES,
        fetch_max_wait_ms=fetch_max_wait_ms,
    )


async def read_to_end(
    consumer: AIOKafkaConsumer,
    tp: TopicPartition,
    feed: Callable[[bytes, bytes | None], None],
    start_offset: int | None = None,
) -> RestoreResult:
    """Feed every committed record of ``tp`` to ``feed(key, value)``, in offset order.

    ``start_offset``: feed from there instead of the beginning (a standby that
    tailed the changelog up to it only catches up; see `actors.scheduler.standby`).

    The changelog is last-writer-wins per key (a schedule's record is its whole
    state, a definition's record its definition), and the core keeps the last
    record per key, as compaction would. Records are fed as they arrive rather
    than collected first: collecting the latest value of a million keys would
    hold every value in memory next to the state the core builds from them
    (a third of a gigabyte), whereas decoding the few superseded records a
    partition holds between cleanings costs less (the small records of version 2
    are sliced, not parsed). A final tombstone is fed as ``None``.
    """
    consumer.assign([tp])
    if start_offset is None:
        await consumer.seek_to_beginning(tp)
    else:
        consumer.seek(tp, start_offset)
    end_offset = (await consumer.end_offsets([tp]))[tp]
    records = 0
    breather = Breather()
    while await consumer.position(tp) < end_offset:
        batches = await consumer.getmany(tp, timeout_ms=1_000, max_records=5_000)
        for record in batches.get(tp, ()):
            if record.offset >= end_offset:
                break
            key = record.key
            if key is None:
                continue  # changelog records are keyed; nothing to rebuild
            feed(key, record.value)
            records += 1
        await breather.maybe()
    consumer.assign([])  # stop fetching in the background; the next restore assigns anew
    return RestoreResult(records=records, keys=records, end_offset=end_offset)
