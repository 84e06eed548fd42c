"""The shard's side of rate limits (docs/DESIGN.md §8.5): a rate-limited run goes to the
partition of its key, and a pause or resume is written to ``{ns}.ratelimits``."""

from __future__ import annotations

from tests.kit.shard import MINUTE, T0, Shard, command, upsert
from topics.messages import parse_run
from topics.names import TopicKind
from topics.partitioner import murmur2_partition
from topics.ratelimits import decode_pause_value
from topics.records import TargetRecord
from topics.targets import TargetTopic, TargetTopics
from topics.timefmt import format_ms

RUNS = "kafkron.runs"
RATELIMITS = "kafkron.ratelimits"
TOPICS = TargetTopics(
    known={RUNS: TargetTopic(12, 1_000_000), RATELIMITS: TargetTopic(1, 1_000_000)},
    own_prefix="kafkron.",
)
RATE = {"key": "payments", "per_s": 10, "burst": 5}


def test_runs_of_one_rate_limited_key_land_on_the_keys_partition() -> None:
    shard = Shard()
    shard.core.set_target_topics(TOPICS)
    for sid in ("a", "b", "c"):
        job = {"name": "test.job", "args": {}, "rate_limit": RATE}
        assert not shard.send(upsert(sid, job=job), at_ms=T0 + 5).rejected
    records = [r for r in shard.advance(T0 + MINUTE).records if type(r) is TargetRecord]
    assert sorted(r.key or b"" for r in records) == [b"a", b"b", b"c"]
    assert {(r.topic, r.partition) for r in records} == {(RUNS, murmur2_partition(b"payments", 12))}
    rate = parse_run(records[0].value or b"").job.rate_limit
    assert rate is not None and (rate.per_s, rate.burst) == (10, 5)


def test_a_pause_and_a_resume_are_written_to_the_ratelimits_topic() -> None:
    shard = Shard()
    shard.core.set_target_topics(TOPICS)
    until = format_ms(T0 + 3_600_000)
    out = shard.send(command("ratelimit.pause", "payments", until=until, note="quota"), at_ms=T0)
    [record] = out.of(TopicKind.RATELIMITS)
    assert record.key == b"payments" and record.partition == 0
    pause = decode_pause_value(record.value or b"", "payments")
    assert (pause.until_ms, pause.note, pause.at_ms) == (T0 + 3_600_000, "quota", T0)
    [resumed] = shard.send(command("ratelimit.resume", "payments"), at_ms=T0).of(
        TopicKind.RATELIMITS
    )
    assert resumed.key == b"payments" and resumed.value is None


def test_a_bad_pause_is_rejected_with_a_reason_and_writes_nothing() -> None:
    shard = Shard()
    out = shard.send(command("ratelimit.pause", "payments", until=format_ms(T0 - 1)), at_ms=T0)
    assert out.of(TopicKind.RATELIMITS) == []
    assert out.rejected[0].reason.startswith("until") and "passed" in out.rejected[0].reason


def test_a_pause_for_a_missing_ratelimits_topic_is_rejected_naming_the_fix() -> None:
    # The topic deleted (or never created): writing to it would fail the shard's
    # transaction again at every rebuild; the command is rejected instead, and the rest
    # of the turn goes on.
    shard = Shard()
    shard.core.set_target_topics(
        TargetTopics(known={RUNS: TOPICS.known[RUNS]}, own_prefix="kafkron.")
    )
    out = shard.send(command("ratelimit.pause", "payments"), at_ms=T0)
    assert out.of(TopicKind.RATELIMITS) == []
    [rejected] = out.rejected
    assert RATELIMITS in rejected.reason and "kafkron topics create" in rejected.reason
    out = shard.send(command("ratelimit.resume", "payments"), at_ms=T0)
    assert out.of(TopicKind.RATELIMITS) == [] and len(out.rejected) == 1
    assert not shard.send(upsert("a"), at_ms=T0 + 5).rejected  # nothing else waits
    assert shard.core.schedule("a") is not None


def test_a_pause_for_a_refused_ratelimits_topic_is_rejected_with_the_brokers_reason() -> None:
    # A hand-made ACL without Write: the broker refused the last transaction that wrote
    # to it (the runtime marks the topic refused for a while, `refused_target`).
    shard = Shard()
    why = "not authorized: the scheduler's principal may not Write it"
    shard.core.set_target_topics(
        TargetTopics(known=TOPICS.known, refused={RATELIMITS: why}, own_prefix="kafkron.")
    )
    out = shard.send(command("ratelimit.pause", "payments"), at_ms=T0)
    assert out.of(TopicKind.RATELIMITS) == []
    [rejected] = out.rejected
    assert RATELIMITS in rejected.reason and why in rejected.reason
    assert "kafkron acl plan --role scheduler" in rejected.reason
