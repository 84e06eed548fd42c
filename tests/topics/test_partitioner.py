"""Our murmur2 is Kafka's: the partition a key lands on must be the one Java
clients and aiokafka pick, or a shard would not own the schedules sent to it."""

from __future__ import annotations

from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given, settings
from hypothesis import strategies as st

from topics.partitioner import murmur2, murmur2_partition

# Kafka's own test vectors (org.apache.kafka.common.utils.UtilsTest), signed.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def test_kafkas_vectors() -> None:
    for key, signed in KAFKA_VECTORS.items():
        assert murmur2(key) == signed & 0xFFFFFFFF, key


@settings(max_examples=2000, deadline=None)
@given(key=st.binary(max_size=1200), partitions=st.integers(1, 512))
def test_every_length_agrees_with_aiokafkas_partitioner(key: bytes, partitions: int) -> None:
    """Lengths past the cached word counts (1,024 bytes) included."""
    assert murmur2(key) == aiokafka_murmur2(key) & 0xFFFFFFFF
    assert murmur2_partition(key, partitions) == (aiokafka_murmur2(key) & 0x7FFFFFFF) % partitions
