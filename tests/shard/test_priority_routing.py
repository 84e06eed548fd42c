"""Priorities in the shard core (docs/DESIGN.md §8.4): a run of priority 5-9 goes to its
queue's high lane topic, its cancel with it; 1-4 stay on the queue's topic carrying
their priority; a missing lane topic takes the queue-refused path; a priority with a
concurrency key is refused."""

from __future__ import annotations

from actors.shard.runs import QUEUE_REFUSED_ERROR
from tests.kit.shard import MINUTE, SECOND, T0, Shard, command, upsert
from topics.messages import is_cancel, parse_run, run_id_for
from topics.names import TopicKind
from topics.partitioner import murmur2_partition
from topics.records import OutRecord, TargetRecord
from topics.targets import TargetTopic, TargetTopics

LANE = "kafkron.runs.default.hi"
GPU_LANE = "kafkron.runs.gpu.hi"
TOPICS = TargetTopics(
    known={
        LANE: TargetTopic(3, 1_000_000),
        GPU_LANE: TargetTopic(2, 1_000_000),
        "kafkron.runs.gpu": TargetTopic(4, 1_000_000),
    },
    own_prefix="kafkron.",
)


def _placed(records: list[OutRecord]) -> list[TargetRecord]:
    return [r for r in records if type(r) is TargetRecord]


def _shard(targets: TargetTopics = TOPICS) -> Shard:
    shard = Shard()
    shard.core.set_target_topics(targets)
    return shard


def _job(priority: int, **more: object) -> dict[str, object]:
    return {"name": "test.job", "args": {}, "priority": priority, **more}


def test_a_high_priority_run_goes_to_the_default_queues_high_lane() -> None:
    shard = _shard()
    assert not shard.send(upsert(job=_job(7)), at_ms=T0 + 5).rejected
    out = shard.advance(T0 + MINUTE)
    assert out.runs == []  # nothing on {ns}.runs
    (record,) = _placed(out.records)
    assert (record.topic, record.key) == (LANE, b"s")
    assert record.partition == murmur2_partition(b"s", 3)
    run = parse_run(record.value or b"")
    assert run.job.priority == 7 and run.job.queue == "default"


def test_priority_5_is_the_lanes_threshold_and_4_stays_on_the_runs_topic() -> None:
    shard = _shard()
    shard.send(upsert("four", job=_job(4)), at_ms=T0 + 5)
    shard.send(upsert("five", job=_job(5)), at_ms=T0 + 5)
    out = shard.advance(T0 + MINUTE)
    (normal,) = out.of(TopicKind.RUNS)
    assert normal.key == b"four" and normal.partition is None
    assert parse_run(normal.value or b"").job.priority == 4
    assert [(r.topic, r.key) for r in _placed(out.records)] == [(LANE, b"five")]


def test_priority_0_keeps_the_bytes_it_always_had() -> None:
    shard = _shard()
    shard.send(upsert(job=_job(0)), at_ms=T0 + 5)
    out = shard.advance(T0 + MINUTE)
    (record,) = out.of(TopicKind.RUNS)
    assert b"priority" not in (record.value or b"")


def test_a_queues_high_priority_run_goes_to_that_queues_lane() -> None:
    shard = _shard()
    shard.send(upsert(job=_job(9, queue="gpu")), at_ms=T0 + 5)
    (record,) = _placed(shard.advance(T0 + MINUTE).records)
    assert (record.topic, record.partition) == (GPU_LANE, murmur2_partition(b"s", 2))


def test_a_cancel_follows_the_attempt_to_its_lane_even_after_a_priority_change() -> None:
    shard = _shard()
    shard.send(upsert(job=_job(8), timeout_s=300), at_ms=T0 + 5)
    (run,) = _placed(shard.advance(T0 + MINUTE).records)
    shard.send(upsert(job=_job(0), timeout_s=300))  # the next attempts: {ns}.runs
    out = shard.send(command("run.cancel", run_id=run_id_for("s", T0 + MINUTE)))
    (cancel,) = _placed(out.records)
    assert is_cancel(cancel.value or b"")
    assert (cancel.topic, cancel.partition) == (run.topic, run.partition)
    assert out.cancels == []


def test_a_lane_run_survives_a_restore_and_its_cancel_follows() -> None:
    shard = _shard()
    shard.send(upsert(job=_job(6), timeout_s=300), at_ms=T0 + 5)
    shard.advance(T0 + MINUTE)
    restored, _ = shard.restored(T0 + MINUTE + SECOND)
    restored.core.set_target_topics(TOPICS)
    out = restored.send(command("run.cancel", run_id=run_id_for("s", T0 + MINUTE)))
    assert [r.topic for r in _placed(out.records)] == [LANE]


def test_a_missing_lane_topic_fails_the_attempt_as_a_missing_queue_topic_does() -> None:
    shard = _shard(TargetTopics(own_prefix="kafkron."))
    shard.send(upsert(job=_job(7), retry={"max_attempts": 2, "jitter": "none"}), at_ms=T0 + 5)
    out = shard.advance(T0 + MINUTE)
    assert _placed(out.records) == [] and out.runs == []
    (failed,) = out.results
    assert failed.error is not None and failed.error["type"] == QUEUE_REFUSED_ERROR
    assert "high lane topic kafkron.runs.default.hi" in failed.error["message"]
    assert "kafkron topics create --lanes" in failed.error["message"]
    assert out.changelog


def test_a_dag_tasks_priority_places_its_runs() -> None:
    shard = _shard()
    tasks = {"a": {"job": _job(5), "after": []}, "b": {"job": _job(1), "after": []}}
    assert not shard.send(command("dag.upsert", "d", spec={"every": "60s"}, tasks=tasks)).rejected
    out = shard.advance(T0 + MINUTE)
    (lane,) = _placed(out.records)
    assert lane.topic == LANE and parse_run(lane.value or b"").task == "a"
    (normal,) = out.of(TopicKind.RUNS)
    assert parse_run(normal.value or b"").task == "b"


def test_a_bad_priority_is_rejected_naming_the_field() -> None:
    shard = _shard()
    for bad in (10, -1, "7", 2.5, True):
        (rejected,) = shard.send(upsert(job=_job(bad))).rejected  # type: ignore[arg-type]
        assert rejected.reason.startswith("job.priority: "), rejected.reason


def test_a_priority_with_a_concurrency_key_is_refused_with_the_reason() -> None:
    shard = _shard()
    job = _job(3, concurrency={"key": "k", "limit": 1})
    (rejected,) = shard.send(upsert(job=job)).rejected
    assert rejected.reason.startswith("job.priority: a job with a concurrency key")
    assert not shard.send(upsert(job=_job(0, concurrency={"key": "k", "limit": 1}))).rejected


def test_a_refused_lane_topic_fails_the_attempt_and_owes_its_cancel() -> None:
    shard = _shard()
    shard.send(upsert(job=_job(7), timeout_s=900), at_ms=T0 + 5)
    (run,) = _placed(shard.advance(T0 + MINUTE).records)
    # The broker refused the lane's last batch (its Write revoked, say): the next attempt
    # of another schedule fails QueueRefused, and a cancel of the run placed before is
    # owed, not written into a transaction the broker would refuse.
    refused = TargetTopics(
        known=dict(TOPICS.known),
        refused={LANE: "TopicAuthorizationFailedError"},
        own_prefix="kafkron.",
    )
    shard.core.set_target_topics(refused)
    shard.send(upsert("other", job=_job(5)), at_ms=T0 + MINUTE + 5)
    out = shard.advance(T0 + 2 * MINUTE)
    failed = [r for r in out.results if r.schedule_id == "other"]
    assert failed and failed[0].error is not None
    assert failed[0].error["type"] == QUEUE_REFUSED_ERROR
    assert "refused the last record" in failed[0].error["message"]
    out = shard.send(command("run.cancel", run_id=run_id_for("s", T0 + MINUTE)))
    assert _placed(out.records) == []  # owed while the lane refuses
    shard.core.set_target_topics(TOPICS)  # the mark lifted
    out = shard.run_until(T0 + 5 * MINUTE)
    cancels = [r for r in _placed(out.records) if is_cancel(r.value or b"")]
    assert [(c.topic, c.partition) for c in cancels] == [(run.topic, run.partition)]
