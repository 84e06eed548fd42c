"""Forwarding to the owning shard, rejections, and bad input in the middle of a stream."""

from __future__ import annotations

import orjson
import pytest

from actors.shard import ShardCore
from actors.shard.routing import owner_partition
from actors.shard.schedule_commands import ScheduleCommands
from tests.kit.shard import MINUTE, T0, Shard, command, upsert
from topics.messages import REJECTED_ORIGINAL_MAX_BYTES
from topics.names import TopicKind
from topics.partitioner import crc32_partition, murmur2_partition
from topics.records import InRecord

PARTITIONS = 6


def _ids_owned_by(partition: int, count: int) -> list[str]:
    ids = (f"job-{i}" for i in range(10_000))
    return [i for i in ids if owner_partition(i, PARTITIONS) == partition][:count]


def test_a_command_for_a_key_owned_elsewhere_is_forwarded_and_nothing_else() -> None:
    shard = Shard(partition=0, partitions=PARTITIONS)
    foreign = _ids_owned_by(3, 1)[0]
    body = upsert(foreign)
    value = orjson.dumps(body)
    out = shard.send(value, key=foreign.encode())
    [forward] = out.records
    assert forward.topic == TopicKind.COMMANDS
    assert forward.key == foreign.encode() and forward.value == value
    assert forward.partition == 3 == murmur2_partition(foreign.encode(), PARTITIONS)
    assert shard.core.stats["schedules"] == 0 and shard.core.stats["forwarded_total"] == 1


def test_a_forward_keeps_the_authors_timestamp_so_look_backs_count_from_it() -> None:
    """Without it the forward was stamped when written: a one-off produced before its
    instant and forwarded after it was judged by the forward's time, not the author's."""
    shard = Shard(partition=0, partitions=PARTITIONS)
    foreign = _ids_owned_by(3, 1)[0]
    produced_ms = T0 - 5 * MINUTE
    [forward] = shard.send(upsert(foreign), produced_ms=produced_ms).records
    assert forward.timestamp_ms == produced_ms
    [unknown] = shard.send(upsert(foreign), produced_ms=0).records
    assert unknown.timestamp_ms is None  # no timestamp to keep: the producer stamps it


def test_a_null_key_is_routed_by_the_body_id() -> None:
    foreign = _ids_owned_by(4, 1)[0]
    shard = Shard(partition=0, partitions=PARTITIONS)
    value = orjson.dumps(upsert(foreign))
    [forward] = shard.send(value, key=None).records
    assert (forward.key, forward.partition, forward.value) == (foreign.encode(), 4, value)
    # ... and applied where it is owned
    owner = Shard(partition=4, partitions=PARTITIONS)
    out = owner.send(value, key=None)
    assert out.forwards == [] and out.rejected == [] and len(out.changelog) == 1


def test_a_kcat_produced_command_lands_on_the_crc32_partition_and_still_takes_effect() -> None:
    shards = [Shard(partition=p, partitions=PARTITIONS) for p in range(PARTITIONS)]
    moved = [i for i in _ids_owned_by(2, 50) if crc32_partition(i.encode(), PARTITIONS) != 2]
    assert moved
    schedule_id = moved[0]
    landed = crc32_partition(schedule_id.encode(), PARTITIONS)
    [forward] = shards[landed].send(upsert(schedule_id)).records
    assert forward.partition == 2
    out = shards[2].send(forward.value, key=forward.key)
    assert len(out.changelog) == 1 and out.forwards == []


def test_every_kind_of_bad_command_is_rejected_with_its_reason_and_original_bytes() -> None:
    shard = Shard()
    cases: list[tuple[bytes | None, bytes | None, str]] = [
        (b"s", b"{not json", "not valid JSON"),
        (
            b"s",
            orjson.dumps({"v": 1, "type": "schedule.explode", "id": "s"}),
            "unknown command type",
        ),
        (b"s", orjson.dumps(upsert(spec={"cron": "61 * * * *"})), "spec.cron"),
        (b"s", orjson.dumps(upsert(spec={"cron": "0 0 * * *", "tz": "Mars/Olympus"})), "spec.tz"),
        (b"s", orjson.dumps(upsert(timeout_s="soon")), "timeout_s"),
        (b"other", orjson.dumps(upsert("s")), "differs from id"),
        (b"s", None, "tombstone"),
        (b"s", b"x" * (300 * 1024), "KiB"),
        (b"s", orjson.dumps(upsert(spec={"at": "1999-01-01T00:00:00Z"})), "spec.at"),
        (b"\xff\xfe", orjson.dumps(upsert("s")), "UTF-8"),
    ]
    for offset, (key, value, words) in enumerate(cases):
        out = shard.send(value, key=key)
        [rejected] = out.rejected
        assert out.records == out.of(TopicKind.REJECTED)
        assert words in rejected.reason, (words, rejected.reason)
        # The original travels whole up to a bound (a 300 KiB one: its first 64 KiB).
        kept = None if value is None else value[:REJECTED_ORIGINAL_MAX_BYTES]
        assert rejected.original == kept
        assert (rejected.topic, rejected.partition, rejected.offset) == (
            "kafkron.commands",
            0,
            offset,
        )
        assert out.of(TopicKind.REJECTED)[0].key == key
        assert out.of(TopicKind.REJECTED)[0].partition is None
    assert shard.core.stats["rejected_total"] == len(cases)
    assert shard.core.stats["schedules"] == 0


def test_a_malformed_command_in_the_middle_of_a_stream_does_not_stop_the_following_ones() -> None:
    shard = Shard()
    stream: list[bytes] = [
        orjson.dumps(upsert("a")),
        b"\x00garbage",
        orjson.dumps(upsert("b", spec={"cron": "not a cron"})),
        orjson.dumps(upsert("c")),
        orjson.dumps(command("schedule.pause", "a")),
    ]
    for value in stream:
        shard.send(value, key=None, at_ms=T0 + 5)
    assert shard.core.stats["rejected_total"] == 2
    assert shard.core.stats["schedules"] == 2
    runs = shard.run_until(T0 + MINUTE).runs
    assert [r.schedule_id for r in runs] == ["c"]


def test_a_malformed_result_is_rejected_and_the_shard_goes_on() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    [run] = shard.advance(T0 + MINUTE).runs
    [rejected] = shard.raw_result(b"s", b'{"v": 1, "status": "succeeded"}').rejected
    assert "result" in rejected.reason and rejected.topic == "kafkron.results"
    assert len(shard.report(run, "succeeded").changelog) == 1


def test_an_internal_error_becomes_a_rejection_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(ScheduleCommands, "pause", broken)
    [rejected] = shard.send(command("schedule.pause")).rejected
    assert "internal error" in rejected.reason and "simulated bug" in rejected.reason
    monkeypatch.undo()
    assert shard.send(command("schedule.pause")).changelog  # and the next one applies


def test_a_record_of_another_topic_is_rejected() -> None:
    core = ShardCore(partition=0, partitions=1, now_ms=T0)
    [out] = core.apply(InRecord(TopicKind.RUNS, 0, 9, b"k", b"{}"), T0)
    assert out.topic == TopicKind.REJECTED


def test_the_namespace_names_the_topic_of_a_rejection() -> None:
    core = ShardCore(partition=0, partitions=1, now_ms=T0, namespace="acme")
    [out] = core.apply(InRecord(TopicKind.COMMANDS, 0, 1, b"s", b"nope"), T0)
    assert b'"topic":"acme.commands"' in (out.value or b"")
