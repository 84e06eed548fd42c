"""A Kafka target: the shard writes each occurrence's record itself, in the fire's batch."""

from __future__ import annotations

import base64

from actors.shard.delivery import REFUSED_ERROR
from tests.kit.shard import MINUTE, SECOND, T0, Shard, command
from tests.kit.shard import upsert as job_upsert
from topics.messages import run_id_for
from topics.names import TopicKind
from topics.partitioner import murmur2_partition
from topics.records import OutRecord, TargetRecord
from topics.targets import (
    ATTEMPT_HEADER,
    IDEMPOTENCY_KEY_HEADER,
    KAFKA_JOB,
    RUN_ID_HEADER,
    SCHEDULED_AT_HEADER,
    TargetTopic,
    TargetTopics,
)
from topics.timefmt import format_ms

TOPIC = "orders.due"
ALLOWED = TargetTopics(
    allowed=("orders.*",), known={TOPIC: TargetTopic(3, 10_000)}, own_prefix="kafkron."
)


def _shard(targets: TargetTopics = ALLOWED) -> Shard:
    shard = Shard()
    shard.core.set_target_topics(targets)
    return shard


def upsert(schedule_id: str = "s", **fields: object) -> dict[str, object]:
    """A schedule.upsert whose ``target`` (if given) replaces the kit's job."""
    body = job_upsert(schedule_id, **fields)
    if "target" in fields:
        del body["job"]
    return body


def _target(**kafka: object) -> dict[str, object]:
    return {"kafka": {"topic": TOPIC, **kafka}}


def _targets(records: list[OutRecord]) -> list[TargetRecord]:
    return [r for r in records if type(r) is TargetRecord]


def test_each_occurrence_writes_its_record_and_a_succeeded_result_and_no_run() -> None:
    shard = _shard()
    body = upsert(
        target=_target(
            key="{schedule_id}",
            value={"order": "o-1", "due": "{scheduled_at}", "text": "{{literal}}"},
            headers={"source": "billing {run_id}"},
        )
    )
    assert not shard.send(body).rejected
    out = shard.advance(T0)  # every 60 s from now: the first occurrence is now
    (record,) = _targets(out.records)
    scheduled = format_ms(T0)
    run_id = run_id_for("s", T0)
    assert record.topic == TOPIC and record.key == b"s"
    assert record.partition == murmur2_partition(b"s", 3)
    assert record.value == (
        b'{"order":"o-1","due":"' + scheduled.encode() + b'","text":"{literal}"}'
    )
    headers = dict(record.headers)
    assert headers[RUN_ID_HEADER] == run_id.encode()
    assert headers[SCHEDULED_AT_HEADER] == scheduled.encode()
    assert headers[ATTEMPT_HEADER] == b"1"
    assert len(headers[IDEMPOTENCY_KEY_HEADER]) == 64
    assert headers["source"] == f"billing {run_id}".encode()
    assert out.runs == []
    (result,) = out.results
    assert (result.run_id, result.status, result.attempt) == (run_id, "succeeded", 1)
    assert result.target == {"kafka": {"topic": TOPIC, "partition": record.partition}}
    assert out.changelog  # the fire is in the same batch as the schedule's new state
    assert shard.in_flight() == []


def test_a_keyless_record_lands_on_its_run_ids_partition_and_raw_bytes_stay_raw() -> None:
    shard = _shard()
    raw = b"\x00\x01binary"
    shard.send(upsert(target=_target(value={"base64": base64.b64encode(raw).decode()})))
    out = shard.advance(T0 + MINUTE)
    records = _targets(out.records)
    assert [r.value for r in records] == [raw, raw]
    for record, minute in zip(records, (0, 1), strict=True):
        run_id = run_id_for("s", T0 + minute * MINUTE).encode()
        assert record.key is None and record.partition == murmur2_partition(run_id, 3)


def test_the_data_interval_is_the_previous_occurrence_up_to_this_one() -> None:
    shard = _shard()
    shard.send(
        upsert(
            spec={"cron": "0 * * * *"},
            target=_target(value="{logical_date}/{data_interval_end}"),
        )
    )
    out = shard.advance(T0 + 60 * MINUTE)
    (record,) = _targets(out.records)
    expected = f'"{format_ms(T0)}/{format_ms(T0 + 60 * MINUTE)}"'
    assert record.value == expected.encode()


def test_an_upsert_naming_a_topic_not_allowed_is_rejected_and_fires_nothing() -> None:
    shard = _shard()
    for topic in ("payments", "kafkron.runs", "__consumer_offsets"):
        out = shard.send(upsert(target={"kafka": {"topic": topic, "value": {}}}))
        (rejected,) = out.rejected
        assert rejected.reason.startswith("target.kafka.topic: target topic " + topic)
    assert (
        "allows no target topics"
        in _shard(TargetTopics()).send(upsert(target=_target(value={}))).rejected[0].reason
    )
    assert _targets(shard.advance(T0 + 5 * MINUTE).records) == []


def test_a_missing_topic_fails_the_occurrence_visibly_and_a_replay_delivers_it() -> None:
    shard = _shard(TargetTopics(allowed=("orders.*",), own_prefix="kafkron."))
    shard.send(upsert(target=_target(value={})))
    out = shard.advance(T0)
    assert _targets(out.records) == []
    (failed,) = out.results
    assert failed.status == "failed" and failed.error is not None
    assert failed.error["type"] == REFUSED_ERROR and "does not exist" in failed.error["message"]
    (dead,) = out.dlq
    assert dead.job.name == KAFKA_JOB and dead.job.args["topic"] == TOPIC
    shard.core.set_target_topics(ALLOWED)  # the topic was created
    replayed = shard.send(command("dlq.replay", run_id=failed.run_id))
    (record,) = _targets(replayed.records)
    assert dict(record.headers)[ATTEMPT_HEADER] == b"2"
    assert [(r.run_id, r.attempt, r.status) for r in replayed.results] == [
        (failed.run_id, 2, "succeeded")
    ]
    assert _targets(shard.advance(T0 + MINUTE).records)  # firing goes on


def test_a_record_larger_than_the_topic_accepts_or_a_refused_topic_fails_only_its_own() -> None:
    small = TargetTopics(
        allowed=("orders.*",), known={TOPIC: TargetTopic(3, 300)}, own_prefix="kafkron."
    )
    shard = _shard(small)
    shard.send(upsert("big", target=_target(value={"pad": "x" * 400})))
    shard.send(upsert("plain"))
    out = shard.advance(T0)
    (failed,) = [r for r in out.results if r.schedule_id == "big"]
    assert failed.error is not None and "larger than orders.due accepts" in failed.error["message"]
    assert [r.schedule_id for r in out.runs] == ["plain"]  # the other schedule fired
    refused = TargetTopics(
        allowed=("orders.*",),
        known={TOPIC: TargetTopic(3, 10_000)},
        refused={TOPIC: "PolicyViolation: no"},
        own_prefix="kafkron.",
    )
    shard.core.set_target_topics(refused)
    out = shard.advance(T0 + MINUTE)
    (failed,) = [r for r in out.results if r.schedule_id == "big"]
    assert failed.error is not None and "PolicyViolation: no" in failed.error["message"]


def test_a_restored_shard_delivers_each_occurrence_once() -> None:
    shard = _shard()
    shard.send(upsert(target=_target(value={"n": "{scheduled_at}"})))
    first = shard.advance(T0 + MINUTE)
    restored, _ = shard.restored(T0 + MINUTE + 30 * SECOND)
    restored.core.set_target_topics(ALLOWED)
    later = restored.advance(T0 + 3 * MINUTE)
    fired = [dict(r.headers)[SCHEDULED_AT_HEADER] for r in _targets(first.records + later.records)]
    assert fired == [format_ms(T0 + m * MINUTE).encode() for m in (0, 1, 2, 3)]


def test_a_trigger_delivers_at_once() -> None:
    shard = _shard()
    shard.send(upsert(spec={"cron": "0 0 1 1 *"}, target=_target(value={})))
    out = shard.send(command("schedule.trigger"), at_ms=T0 + 5 * SECOND)
    assert len(_targets(out.records)) == 1
    assert [r.status for r in out.results] == ["succeeded"]
    assert all(r.topic is not TopicKind.RUNS for r in out.records)


def test_a_replay_refused_again_is_dead_lettered_again_and_can_be_replayed_once_more() -> None:
    missing = TargetTopics(allowed=("orders.*",), own_prefix="kafkron.")
    shard = _shard(missing)
    shard.send(upsert(target=_target(value={})))
    (failed,) = shard.advance(T0).results
    again = shard.send(command("dlq.replay", run_id=failed.run_id))
    assert [(r.attempt, r.status) for r in again.results] == [(2, "failed")]
    assert len(again.dlq) == 1
    shard.core.set_target_topics(ALLOWED)
    third = shard.send(command("dlq.replay", run_id=failed.run_id))
    assert third.rejected == []
    assert [(r.attempt, r.status) for r in third.results] == [(3, "succeeded")]


def test_a_job_schedule_with_runs_in_flight_is_not_switched_to_a_kafka_target() -> None:
    shard = _shard()
    shard.send(job_upsert(overlap="allow"))
    (run,) = shard.advance(T0).runs
    out = shard.send(upsert(target=_target(value={})))
    assert "run(s) of its job in flight" in out.rejected[0].reason
    shard.report(run, "succeeded")
    assert shard.send(upsert(target=_target(value={}))).rejected == []
