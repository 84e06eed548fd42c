"""A key from a run's placeholders is rendered by the shard, once per definition
(docs/DESIGN.md §8.2, §8.5): runs go to the rendered key's partition, the run record
carries the rendered key (a worker sees a literal key), the changelog keeps the
template."""

from __future__ import annotations

from typing import Any

from actors.worker.core import StartJob, WorkerCore
from tests.kit.shard import MINUTE, SECOND, T0, Shard, command, upsert
from tests.kit.worker import heard
from topics.messages import parse_run
from topics.names import TopicKind
from topics.partitioner import murmur2_partition
from topics.records import InRecord, OutRecord, TargetRecord
from topics.targets import TargetTopic, TargetTopics

RUNS = "kafkron.runs"
TOPICS = TargetTopics(known={RUNS: TargetTopic(12, 1_000_000)}, own_prefix="kafkron.")


def _placed(records: list[OutRecord]) -> list[TargetRecord]:
    return [r for r in records if type(r) is TargetRecord]


def _shard() -> Shard:
    shard = Shard()
    shard.core.set_target_topics(TOPICS)
    return shard


def _job(key: str, args: dict[str, Any], field: str = "concurrency") -> dict[str, Any]:
    limit = {"key": key, "limit": 1} if field == "concurrency" else {"key": key, "per_s": 5}
    return {"name": "billing.invoice", "args": args, field: limit}


def test_two_schedules_whose_args_render_one_key_share_its_partition() -> None:
    shard = _shard()
    template = "invoice-{args.customer}"
    for sid, customer in (("monthly", "c-42"), ("adhoc", "c-42"), ("other", "c-7")):
        assert not shard.send(upsert(sid, job=_job(template, {"customer": customer}))).rejected
    records = {r.key: r for r in _placed(shard.advance(T0 + MINUTE).records)}
    partition = murmur2_partition(b"invoice-c-42", 12)
    assert records[b"monthly"].partition == records[b"adhoc"].partition == partition
    assert records[b"other"].partition == murmur2_partition(b"invoice-c-7", 12)
    run = parse_run(records[b"monthly"].value or b"")  # what a worker decodes
    assert run.job.concurrency is not None and run.job.concurrency.key == "invoice-c-42"


def test_the_changelog_keeps_the_template_and_a_restore_renders_it_again() -> None:
    shard = _shard()
    shard.send(upsert("s", job=_job("invoice-{args.customer}", {"customer": "c-42"})))
    (first,) = _placed(shard.advance(T0 + MINUTE).records)
    shard.report(parse_run(first.value or b""), "succeeded")  # overlap skip: let the next fire
    assert b"invoice-{args.customer}" in b"".join(v or b"" for v in shard.changelog.values())
    restored, _ = shard.restored(T0 + MINUTE + SECOND)
    restored.core.set_target_topics(TOPICS)
    (record,) = _placed(restored.advance(T0 + 2 * MINUTE).records)
    assert parse_run(record.value or b"").job.concurrency.key == "invoice-c-42"  # type: ignore[union-attr]
    assert record.partition == murmur2_partition(b"invoice-c-42", 12)


def test_schedule_id_gives_each_schedule_its_own_key_though_their_bytes_are_equal() -> None:
    shard = _shard()
    for sid in ("a", "b"):  # identical definitions: shared, but for the key naming the id
        shard.send(upsert(sid, job=_job("one-at-a-time-{schedule_id}", {})))
    records = {
        r.key: parse_run(r.value or b"") for r in _placed(shard.advance(T0 + MINUTE).records)
    }
    for run in records.values():
        shard.report(run, "succeeded")
    assert {k: r.job.concurrency.key for k, r in records.items()} == {  # type: ignore[union-attr]
        b"a": "one-at-a-time-a",
        b"b": "one-at-a-time-b",
    }
    restored, _ = shard.restored(T0 + MINUTE + SECOND)  # restored one by one, not shared
    restored.core.set_target_topics(TOPICS)
    again = _placed(restored.advance(T0 + 2 * MINUTE).records)
    assert {parse_run(r.value or b"").job.concurrency.key for r in again} == {  # type: ignore[union-attr]
        "one-at-a-time-a",
        "one-at-a-time-b",
    }


def test_a_rate_limit_key_is_rendered_and_routes_too() -> None:
    shard = _shard()
    shard.send(upsert("s", job=_job("pay-{args.provider}", {"provider": "acme"}, "rate_limit")))
    (record,) = _placed(shard.advance(T0 + MINUTE).records)
    run = parse_run(record.value or b"")
    assert run.job.rate_limit is not None and run.job.rate_limit.key == "pay-acme"
    assert record.partition == murmur2_partition(b"pay-acme", 12)


def test_a_retry_carries_the_rendered_key_to_the_keys_partition() -> None:
    shard = _shard()
    shard.send(upsert("s", job=_job("invoice-{args.customer}", {"customer": "c-42"})))
    (first,) = _placed(shard.advance(T0 + MINUTE).records)
    shard.report(parse_run(first.value or b""), "failed", at_ms=T0 + MINUTE + SECOND)
    retry = _placed(shard.run_until(T0 + 2 * MINUTE - SECOND).records)
    (again,) = [r for r in retry if parse_run(r.value or b"").attempt == 2]
    assert again.partition == first.partition
    assert parse_run(again.value or b"").job.concurrency.key == "invoice-c-42"  # type: ignore[union-attr]


def test_a_dag_tasks_schedule_id_is_the_dags_id() -> None:
    shard = _shard()
    tasks = {
        "extract": {"job": _job("dag-{schedule_id}", {})},
        "load": {"job": _job("dag-{schedule_id}", {}), "after": ["extract"]},
    }
    assert not shard.send(
        command("dag.upsert", "nightly", spec={"every": "60s"}, tasks=tasks)
    ).rejected
    (record,) = _placed(shard.advance(T0 + MINUTE).records)
    run = parse_run(record.value or b"")
    assert run.task == "extract"
    assert run.job.concurrency is not None and run.job.concurrency.key == "dag-nightly"
    assert record.partition == murmur2_partition(b"dag-nightly", 12)


def test_the_worker_counts_the_rendered_key_across_schedules() -> None:
    shard = _shard()
    for sid in ("monthly", "adhoc"):
        shard.send(upsert(sid, job=_job("invoice-{args.customer}", {"customer": "c-42"})))
    records = _placed(shard.advance(T0 + MINUTE).records)
    partition = murmur2_partition(b"invoice-c-42", 12)
    assert {r.partition for r in records} == {partition}
    worker = WorkerCore(
        worker="w1", concurrency=8, known_job=lambda n: True, now_ms=T0, lease_loss_ms=3_000
    )
    worker.assign(partition, 0, None, T0)
    now_ms = heard(worker, T0 + MINUTE)  # past the adoption wait, the lease held
    started = []
    for offset, record in enumerate(records):
        delivered = InRecord(TopicKind.RUNS, partition, offset, record.key, record.value)
        started += [a for a in worker.receive(delivered, now_ms) if isinstance(a, StartJob)]
    assert len(started) == 1  # limit 1: the other schedule's run of the key waits
    (waiting,) = worker.queued_runs()
    assert waiting.job.concurrency is not None and waiting.job.concurrency.key == "invoice-c-42"
