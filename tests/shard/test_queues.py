"""Worker queues in the shard core: a run of queue Q goes to ``{ns}.runs.Q``, its
cancel record with it; a queue whose topic is missing fails the attempt visibly."""

from __future__ import annotations

from actors.shard.runs import QUEUE_REFUSED_ERROR
from tests.kit.shard import MINUTE, SECOND, T0, Shard, command, upsert
from topics.messages import is_cancel, parse_cancel, parse_run, run_id_for
from topics.names import TopicKind
from topics.partitioner import murmur2_partition
from topics.records import OutRecord, TargetRecord
from topics.targets import TargetTopic, TargetTopics

GPU = "kafkron.runs.gpu"
WITH_GPU = TargetTopics(known={GPU: TargetTopic(4, 1_000_000)}, own_prefix="kafkron.")


def _queued(records: list[OutRecord]) -> list[TargetRecord]:
    return [r for r in records if type(r) is TargetRecord]


def _shard(targets: TargetTopics = WITH_GPU) -> Shard:
    shard = Shard()
    shard.core.set_target_topics(targets)
    return shard


def _gpu_job(**more: object) -> dict[str, object]:
    return {"name": "test.job", "args": {}, "queue": "gpu", **more}


def test_a_queued_run_goes_to_its_queue_topic_keyed_like_the_schedule() -> None:
    shard = _shard()
    assert not shard.send(upsert(job=_gpu_job()), at_ms=T0 + 5).rejected
    out = shard.advance(T0 + MINUTE)
    assert out.runs == []  # nothing on {ns}.runs
    (record,) = _queued(out.records)
    assert record.topic == GPU and record.key == b"s"
    assert record.partition == murmur2_partition(b"s", 4)
    run = parse_run(record.value or b"")
    assert run.run_id == run_id_for("s", T0 + MINUTE) and run.job.queue == "gpu"
    assert b'"queue":"gpu"' in (record.value or b"")
    assert out.changelog  # in the fire's own batch


def test_the_default_queue_keeps_the_bytes_it_always_had() -> None:
    shard = _shard()
    shard.send(upsert(job={"name": "test.job", "args": {}, "queue": "default"}), at_ms=T0 + 5)
    out = shard.advance(T0 + MINUTE)
    (run,) = out.runs
    assert _queued(out.records) == []
    assert b"queue" not in (out.of(TopicKind.RUNS)[0].value or b"")
    assert run.job.queue == "default"


def test_a_cancel_travels_on_the_runs_queue_topic_and_partition() -> None:
    shard = _shard()
    shard.send(upsert(job=_gpu_job()), at_ms=T0 + 5)
    (run_record,) = _queued(shard.advance(T0 + MINUTE).records)
    out = shard.send(command("run.cancel", run_id=run_id_for("s", T0 + MINUTE)))
    (cancel,) = _queued(out.records)
    assert (cancel.topic, cancel.partition, cancel.key) == (
        run_record.topic,
        run_record.partition,
        run_record.key,
    )
    assert is_cancel(cancel.value or b"")
    assert parse_cancel(cancel.value or b"").run_id == run_id_for("s", T0 + MINUTE)
    assert out.cancels == []  # nothing on {ns}.runs


def test_a_missing_queue_topic_fails_the_attempt_and_retries_then_dead_letters() -> None:
    shard = _shard(TargetTopics(own_prefix="kafkron."))
    retry = {"max_attempts": 2, "initial_s": 1, "jitter": "none"}
    shard.send(upsert(job=_gpu_job(), retry=retry), at_ms=T0 + 5)
    out = shard.advance(T0 + MINUTE)
    assert _queued(out.records) == [] and out.runs == []
    (failed,) = out.results
    assert failed.status == "failed" and failed.attempt == 1
    assert failed.error is not None and failed.error["type"] == QUEUE_REFUSED_ERROR
    assert "topics create --queue gpu" in failed.error["message"]
    assert out.changelog  # the turn commits: the retry is in the changelog
    out = shard.advance(T0 + MINUTE + 2 * SECOND)  # attempt 2: the last
    assert [r.attempt for r in out.results] == [2]
    (dead,) = out.dlq
    assert dead.last_error is not None and dead.last_error["type"] == QUEUE_REFUSED_ERROR
    assert shard.in_flight() == []


def test_a_topic_created_between_attempts_takes_the_retry() -> None:
    shard = _shard(TargetTopics(own_prefix="kafkron."))
    shard.send(upsert(job=_gpu_job(), retry={"initial_s": 1, "jitter": "none"}), at_ms=T0 + 5)
    assert shard.advance(T0 + MINUTE).results[0].status == "failed"
    shard.core.set_target_topics(WITH_GPU)
    out = shard.advance(T0 + MINUTE + 2 * SECOND)
    (record,) = _queued(out.records)
    assert parse_run(record.value or b"").attempt == 2
    assert out.results == []


def test_a_refused_queue_topic_fails_its_attempts_for_a_while() -> None:
    refused = TargetTopics(
        known={GPU: TargetTopic(4, 1_000_000)},
        refused={GPU: "TopicAuthorizationFailedError"},
        own_prefix="kafkron.",
    )
    shard = _shard(refused)
    shard.send(upsert(job=_gpu_job()), at_ms=T0 + 5)
    (failed,) = shard.advance(T0 + MINUTE).results
    assert failed.error is not None and "refused the last record" in failed.error["message"]


def test_a_record_larger_than_the_queue_topic_accepts_fails_instead_of_the_batch() -> None:
    small = TargetTopics(known={GPU: TargetTopic(4, 300)}, own_prefix="kafkron.")
    shard = _shard(small)
    shard.send(upsert(job=_gpu_job(args={"pad": "x" * 400})), at_ms=T0 + 5)
    out = shard.advance(T0 + MINUTE)
    assert _queued(out.records) == []
    assert "larger than kafkron.runs.gpu accepts" in out.results[0].error["message"]  # type: ignore[index]


def test_a_queue_change_moves_the_next_attempt_and_each_cancel_follows_its_attempt() -> None:
    shard = _shard()
    retry = {"initial_s": 1, "jitter": "none"}
    shard.send(upsert(job=_gpu_job(), timeout_s=300, retry=retry), at_ms=T0 + 5)
    (first,) = _queued(shard.advance(T0 + MINUTE).records)
    run = parse_run(first.value or b"")
    # Re-upserted to the default queue while attempt 1 is out on the gpu topic.
    assert not shard.send(upsert(timeout_s=300, retry=retry)).rejected
    run_id = run_id_for("s", T0 + MINUTE)
    assert shard.core.schedule("s").runs[run_id].queue == "gpu"  # type: ignore[union-attr]
    shard.report(run, "failed")
    out = shard.advance(T0 + MINUTE + 2 * SECOND)
    assert [r.attempt for r in out.runs] == [2] and _queued(out.records) == []
    out = shard.send(command("run.cancel", run_id=run_id))
    assert [c.attempt for c in out.cancels] == [2] and _queued(out.records) == []


def test_a_queued_run_survives_a_restore() -> None:
    shard = _shard()
    shard.send(upsert(job=_gpu_job(), timeout_s=300), at_ms=T0 + 5)
    shard.advance(T0 + MINUTE)
    restored, _ = shard.restored(T0 + MINUTE + SECOND)
    restored.core.set_target_topics(WITH_GPU)
    out = restored.send(command("run.cancel", run_id=run_id_for("s", T0 + MINUTE)))
    assert [r.topic for r in _queued(out.records)] == [GPU]  # its cancel follows it
    assert restored.core.schedule("s").definition.queue == "gpu"  # type: ignore[union-attr]


def test_an_invalid_queue_is_rejected_naming_the_field() -> None:
    shard = _shard()
    for bad in ("a.b", "", "x" * 101, 7):
        (rejected,) = shard.send(upsert(job=_gpu_job(queue=bad))).rejected
        assert rejected.reason.startswith("job.queue: ")


def _dag(*names: str) -> dict[str, object]:
    tasks = {name: {"job": _gpu_job(), "after": []} for name in names}
    return command("dag.upsert", "d", spec={"every": "60s"}, tasks=tasks)


def test_a_dag_tasks_runs_go_to_its_queue_and_a_removed_tasks_cancel_follows() -> None:
    shard = _shard()
    assert not shard.send(_dag("a", "b"), at_ms=T0 + 5).rejected
    out = shard.advance(T0 + MINUTE)
    runs = [parse_run(r.value or b"") for r in _queued(out.records)]
    assert sorted(r.task or "" for r in runs) == ["a", "b"]
    assert {r.topic for r in _queued(out.records)} == {GPU}
    out = shard.send(_dag("a"))  # b is removed while it runs: its cancel goes where it is
    (cancel,) = _queued(out.records)
    assert cancel.topic == GPU and parse_cancel(cancel.value or b"").task == "b"
