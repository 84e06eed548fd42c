"""A run with a concurrency key goes to the partition of its key (docs/DESIGN.md §8.2),
so every run of the key, from any schedule, meets one worker; its cancel follows it."""

from __future__ import annotations

from tests.kit.shard import MINUTE, T0, Shard, command, upsert
from topics.messages import is_cancel, parse_run, run_id_for
from topics.names import TopicKind
from topics.partitioner import murmur2_partition
from topics.records import OutRecord, TargetRecord
from topics.targets import TargetTopic, TargetTopics

RUNS = "kafkron.runs"
TOPICS = TargetTopics(
    known={RUNS: TargetTopic(12, 1_000_000), "kafkron.runs.gpu": TargetTopic(5, 1_000_000)},
    own_prefix="kafkron.",
)
KEY = {"key": "customer-42", "limit": 1}


def _placed(records: list[OutRecord]) -> list[TargetRecord]:
    return [r for r in records if type(r) is TargetRecord]


def _shard() -> Shard:
    shard = Shard()
    shard.core.set_target_topics(TOPICS)
    return shard


def test_runs_of_one_key_from_several_schedules_land_on_the_keys_partition() -> None:
    shard = _shard()
    for sid in ("a", "b", "c"):
        job = {"name": "test.job", "args": {}, "concurrency": KEY}
        assert not shard.send(upsert(sid, job=job), at_ms=T0 + 5).rejected
    records = _placed(shard.advance(T0 + MINUTE).records)
    assert sorted(r.key or b"" for r in records) == [b"a", b"b", b"c"]  # keyed by schedule
    assert {(r.topic, r.partition) for r in records} == {
        (RUNS, murmur2_partition(b"customer-42", 12))
    }
    run = parse_run(records[0].value or b"")
    assert run.job.concurrency is not None and run.job.concurrency.limit == 1


def test_a_keyed_runs_cancel_follows_it_to_the_keys_partition() -> None:
    shard = _shard()
    shard.send(upsert(job={"name": "test.job", "args": {}, "concurrency": KEY}), at_ms=T0 + 5)
    (run,) = _placed(shard.advance(T0 + MINUTE).records)
    out = shard.send(command("run.cancel", run_id=run_id_for("s", T0 + MINUTE)))
    (cancel,) = _placed(out.records)
    assert is_cancel(cancel.value or b"")
    assert (cancel.topic, cancel.partition) == (run.topic, run.partition)


def test_a_keyed_run_of_a_queue_goes_to_the_keys_partition_of_the_queue_topic() -> None:
    shard = _shard()
    job = {"name": "test.job", "args": {}, "queue": "gpu", "concurrency": KEY}
    shard.send(upsert(job=job), at_ms=T0 + 5)
    (run,) = _placed(shard.advance(T0 + MINUTE).records)
    assert (run.topic, run.partition) == (
        "kafkron.runs.gpu",
        murmur2_partition(b"customer-42", 5),
    )


def test_a_run_without_a_key_keeps_its_bytes_and_the_producers_partitioner() -> None:
    shard = _shard()
    shard.send(upsert(job={"name": "test.job", "args": {}}), at_ms=T0 + 5)
    out = shard.advance(T0 + MINUTE)
    assert _placed(out.records) == [] and len(out.runs) == 1
    (record,) = [r for r in out.records if r.topic == TopicKind.RUNS]
    assert record.partition is None and b"concurrency" not in (record.value or b"")


def test_a_bad_concurrency_is_rejected_naming_the_field() -> None:
    shard = _shard()
    for bad, field in (
        ({"key": "k"}, "job.concurrency.limit"),
        ({"key": "", "limit": 1}, "job.concurrency.key"),
        ({"key": "k", "limit": 0}, "job.concurrency.limit"),
        ({"key": "k", "limit": 1, "strategy": "newest"}, "job.concurrency.strategy"),
        ({"key": "k", "limit": 1, "size": 2}, "job.concurrency"),
    ):
        job = {"name": "test.job", "args": {}, "concurrency": bad}
        (rejected,) = shard.send(upsert(job=job)).rejected
        assert rejected.reason.startswith(field), rejected.reason
