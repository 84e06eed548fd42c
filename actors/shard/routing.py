"""Which shard applies a command: the owner of its key under Kafka's default partitioner.

A shard owns the schedule ids whose murmur2 partition (as Java clients and aiokafka
compute it) is its own. A command may land elsewhere: librdkafka clients (kcat,
confluent-kafka) hash keys with CRC32, a producer may pick a partition by hand, a
null key goes wherever the producer likes. Such a command is forwarded, unchanged
but keyed by its id, to the partition of its owner, which then applies it; its
rejection, if any, also happens there, so a command is judged in one place.
"""

from __future__ import annotations

from topics.commands import command_id
from topics.partitioner import murmur2_partition


def owner_partition(schedule_id: str, partitions: int) -> int:
    return murmur2_partition(schedule_id.encode(), partitions)


def forward_target(
    key: bytes | None, value: bytes | None, *, partition: int, partitions: int
) -> tuple[bytes, int] | None:
    """``(key, partition)`` to forward a command to, or None when it is ours to apply.

    None also when the command names no routable id (no UTF-8 key, no id in a
    JSON body): it is rejected here, there being no better place.
    """
    routed = command_id(key, value)
    if routed is None:
        return None
    try:
        routed_key = routed.encode()
    except UnicodeEncodeError:  # an id with lone surrogates: the decoder rejects it
        return None
    owner = murmur2_partition(routed_key, partitions)
    return None if owner == partition else (routed_key, owner)
