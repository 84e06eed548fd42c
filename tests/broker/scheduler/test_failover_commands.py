"""Commands on the real broker: any client's partitioner, and bad input mid-stream.

kcat (librdkafka) hashes keys with CRC32, Java and aiokafka with murmur2, so a
command produced with kcat can land on a shard that does not own its id; that
shard forwards it, and it takes effect exactly like one produced with aiokafka.
Malformed commands in the middle of a partition are rejected with a reason and
the valid commands after them still apply.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from aiokafka.admin import NewPartitions

from actors.views.tail import read_to_end
from tests.kit.scheduler import REPO, SchedulerProcesses, produce, upsert
from topics.admin import admin_client
from topics.messages import parse_rejected, parse_run
from topics.names import Settings, TopicKind
from topics.partitioner import crc32_partition, murmur2_partition

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SHARDS = 3


async def _runs_by_schedule(settings: Settings) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in await read_to_end(settings, settings.topic(TopicKind.RUNS)):
        assert record.value is not None
        run = parse_run(record.value)
        counts[run.schedule_id] = counts.get(run.schedule_id, 0) + 1
    return counts


async def _wait_for_runs(
    settings: Settings, ids: set[str], procs: SchedulerProcesses, timeout_s: float = 90
) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        counts = await _runs_by_schedule(settings)
        if ids <= set(counts):
            return counts
        await asyncio.sleep(1)
    raise AssertionError(f"no runs for {sorted(ids - set(counts))}:\n{procs.logs()}")


def _id_on_foreign_shard(prefix: str) -> str:
    """An id that kcat's CRC32 puts on another partition than murmur2's owner."""
    for i in range(1000):
        candidate = f"{prefix}-{i}"
        key = candidate.encode()
        if crc32_partition(key, SHARDS) != murmur2_partition(key, SHARDS):
            return candidate
    raise AssertionError("no id found whose CRC32 and murmur2 partitions differ")


def _kcat(settings: Settings, key: str, value: bytes) -> None:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed: apt-get install -y kcat"
    assert b"|" not in value
    subprocess.run(
        [kcat, "-P", "-b", settings.bootstrap, "-t", settings.topic(TopicKind.COMMANDS), "-K", "|"],
        input=key.encode() + b"|" + value + b"\n",
        check=True,
        timeout=60,
    )


@pytest.mark.kafka_partitions(SHARDS)
@pytest.mark.timeout(300)
async def test_command_produced_with_kcat_takes_effect(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    via_kcat = _id_on_foreign_shard("kcat")
    via_aiokafka = _id_on_foreign_shard("aiokafka")
    procs = SchedulerProcesses(kafka_settings, tmp_path)
    procs.start(1)
    try:
        await procs.wait_stable(SHARDS)
        _kcat(kafka_settings, via_kcat, upsert(via_kcat))
        await produce(kafka_settings, [(via_aiokafka.encode(), upsert(via_aiokafka))])
        await _wait_for_runs(kafka_settings, {via_kcat, via_aiokafka}, procs)
    finally:
        procs.stop_all()
    commands = await read_to_end(kafka_settings, kafka_settings.topic(TopicKind.COMMANDS))
    kcat_key = via_kcat.encode()
    landed = {r.partition for r in commands if r.key == kcat_key}
    owner = murmur2_partition(kcat_key, SHARDS)
    # kcat's record on its CRC32 partition, and the shard's forward on the owner's.
    assert landed == {crc32_partition(kcat_key, SHARDS), owner}
    assert not await read_to_end(kafka_settings, kafka_settings.topic(TopicKind.REJECTED))


def _keys_on(partition: int, prefix: str, count: int) -> list[str]:
    keys: list[str] = []
    i = 0
    while len(keys) < count:
        candidate = f"{prefix}-{i}"
        if murmur2_partition(candidate.encode(), SHARDS) == partition:
            keys.append(candidate)
        i += 1
    return keys


@pytest.mark.kafka_partitions(SHARDS)
@pytest.mark.timeout(300)
async def test_malformed_commands_are_rejected_and_later_ones_apply(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    before, after1, after2, garbage, wrong_type, bad_zone = _keys_on(0, "mixed", 6)
    wrong_typed = orjson.loads(upsert(wrong_type))
    wrong_typed["overlap"] = 5
    bad_zoned = orjson.loads(upsert(bad_zone))
    bad_zoned["spec"] = {"cron": "* * * * *", "tz": "Mars/Olympus_Mons"}
    stream = [
        (before.encode(), upsert(before)),
        (garbage.encode(), b"\xff\xfe not json at all {{{"),
        (wrong_type.encode(), orjson.dumps(wrong_typed)),
        (bad_zone.encode(), orjson.dumps(bad_zoned)),
        (after1.encode(), upsert(after1)),
        (after2.encode(), upsert(after2)),
    ]
    procs = SchedulerProcesses(kafka_settings, tmp_path)
    procs.start(1)
    try:
        await procs.wait_stable(SHARDS)
        await produce(kafka_settings, stream, partition=0)  # one partition: a real stream
        counts = await _wait_for_runs(kafka_settings, {before, after1, after2}, procs)
    finally:
        procs.stop_all()
    assert garbage not in counts and wrong_type not in counts and bad_zone not in counts
    rejected = {
        (r.key or b"").decode(): parse_rejected(r.value)
        for r in await read_to_end(kafka_settings, kafka_settings.topic(TopicKind.REJECTED))
        if r.value is not None
    }
    assert set(rejected) == {garbage, wrong_type, bad_zone}
    assert rejected[garbage].original == stream[1][1]
    assert "overlap" in rejected[wrong_type].reason
    assert "Mars/Olympus_Mons" in rejected[bad_zone].reason
    for item in rejected.values():
        assert item.topic == kafka_settings.topic(TopicKind.COMMANDS)
        assert item.partition == 0


@pytest.mark.kafka_partitions(SHARDS)
@pytest.mark.timeout(120)
async def test_scheduler_refuses_to_start_when_shard_counts_differ(
    kafka_settings: Settings,
) -> None:
    async with admin_client(kafka_settings) as admin:
        await admin.create_partitions(
            {kafka_settings.topic(TopicKind.RESULTS): NewPartitions(SHARDS + 1)}
        )
    env = {
        **os.environ,
        "KAFKRON_NAMESPACE": kafka_settings.namespace,
        "KAFKRON_BOOTSTRAP": kafka_settings.bootstrap,
    }
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "actors.cli", "scheduler"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 1, done.stderr
    assert kafka_settings.topic(TopicKind.RESULTS) in done.stderr
    assert "partitions" in done.stderr and "shard count" in done.stderr
