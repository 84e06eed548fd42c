"""Key to partition, as the clients that write `{ns}.commands` compute it.

Java clients and aiokafka use murmur2 of the key bytes (Kafka's default
partitioner); librdkafka (kcat, confluent-kafka) defaults to CRC32
(``consistent_random``). A shard owns the keys whose *murmur2* partition is its
own; a command that arrived elsewhere (e.g. from kcat) is forwarded there.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``), unsigned 32-bit.

    The key's little-endian 32-bit words are unpacked in one call (a loop of byte
    indexing cost 1.5x as much: every result a worker writes and every fire a
    scheduler routes hashes its schedule id).
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    words = length >> 2
    if words:
        unpack = _WORD_STRUCTS.get(words)
        if unpack is None:
            unpack = struct.Struct(f"<{words}I").unpack_from
            if words <= _CACHED_WORDS_MAX:  # ids' lengths; a longer key builds its own
                _WORD_STRUCTS[words] = unpack
        for k in unpack(data):
            k = (k * _M) & _MASK32
            k ^= k >> 24
            h = ((h * _M) ^ ((k * _M) & _MASK32)) & _MASK32
    tail = length & ~3
    extra = length & 3
    if extra >= 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h


_WORD_STRUCTS: dict[int, Callable[[bytes], tuple[int, ...]]] = {}  # word count -> unpack
_CACHED_WORDS_MAX = 256


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def crc32_partition(key: bytes, partitions: int) -> int:
    """The partition librdkafka's default ``consistent_random`` picks for a non-empty key."""
    return zlib.crc32(key) % partitions
