"""How large the schedules topic's segments may grow, and the advice when they are larger.

A new owner restores a shard by reading its whole changelog partition, and Kafka
compacts only closed segments: the active one is read back record by record,
superseded records included. With the broker's default (1 GiB, or an hour by
``segment.ms``) that is an hour of fires: a 100k-schedule shard firing every 20 s
left 3 records per schedule to read. Capped at `SCHEDULES_SEGMENT_BYTES` (16 MiB,
about 80k fire records, under half a second of restore) the cleaner keeps up
(dirty ratio 0.1). Kafka's own restored topics are capped the same way
(``__consumer_offsets``: 100 MiB).
"""

from __future__ import annotations

from collections.abc import Mapping

from topics.names import Settings, TopicKind

SCHEDULES_SEGMENT_BYTES = 16 * 1024 * 1024


def slow_restore(settings: Settings, configs: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The schedules topic's segments, if larger than `SCHEDULES_SEGMENT_BYTES` (topics
    created before the cap): a guarantee holds, but a new owner reads more records."""
    name = settings.topic(TopicKind.SCHEDULES)
    found = configs.get(name, {}).get("segment.bytes")
    if found is None or not found.isdigit() or int(found) <= SCHEDULES_SEGMENT_BYTES:
        return []
    return [
        f"{name}: segment.bytes is {found}; compaction never touches the active segment,"
        f" so a new owner restores up to that many bytes of superseded records (kafka-configs"
        f" --alter --add-config segment.bytes={SCHEDULES_SEGMENT_BYTES})"
    ]
