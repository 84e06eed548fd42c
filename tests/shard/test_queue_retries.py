"""A queue topic that cannot take an attempt fails it (`QueueRefused`), and the next
attempt waits until the topic can have changed: the end of the refusal mark, or the
scheduler's next look at the topics for a missing one. So the default retry policy
(5 attempts within about 15 s) is not spent inside one refusal (docs/DESIGN.md §8.1)."""

from __future__ import annotations

from actors.shard.runs import QUEUE_REFUSED_ERROR
from tests.kit.shard import MINUTE, SECOND, T0, Shard, upsert
from topics.messages import retry_after_ms
from topics.records import TargetRecord
from topics.targets import MARK_HANDOVER_MS, TargetTopic, TargetTopics

GPU = "kafkron.runs.gpu"
JOB = {"name": "test.job", "args": {}, "queue": "gpu"}


def _shard(targets: TargetTopics) -> Shard:
    shard = Shard()
    shard.core.set_target_topics(targets)
    assert not shard.send(upsert(job=JOB), at_ms=T0 + 5).rejected  # the default retry policy
    return shard


def _refused(**more: object) -> TargetTopics:
    return TargetTopics(
        known={GPU: TargetTopic(4, 1_000_000)},
        refused={GPU: "TopicAuthorizationFailedError"},
        own_prefix="kafkron.",
        **more,  # type: ignore[arg-type]
    )


def test_the_default_retries_are_not_spent_inside_one_refusal() -> None:
    shard = _shard(_refused())
    out = shard.run_until(T0 + MINUTE + 59 * SECOND)  # within a first refusal's minute
    assert [r.attempt for r in out.results] == [1]
    assert out.dlq == []
    (failed,) = out.results
    assert failed.error is not None and failed.error["type"] == QUEUE_REFUSED_ERROR


def test_the_next_attempt_waits_for_the_end_of_the_refusal_mark() -> None:
    until_ms = T0 + MINUTE + 7 * MINUTE  # a refusal in a row: marked longer
    shard = _shard(_refused(refused_until_ms={GPU: until_ms}))
    (failed,) = shard.advance(T0 + MINUTE).results
    assert retry_after_ms(failed.error) == 7 * MINUTE  # stated in the result, for people
    waiting = shard.run_until(until_ms - SECOND).results
    assert [r for r in waiting if r.status != "skipped"] == []  # later ones: overlap skip
    shard.core.set_target_topics(
        TargetTopics(known={GPU: TargetTopic(4, None)}, own_prefix="kafkron.")
    )
    out = shard.run_until(until_ms + 2 * SECOND)  # at most the backoff's jitter later
    (record,) = [r for r in out.records if type(r) is TargetRecord]
    assert record.topic == GPU and [r for r in out.results if r.status != "skipped"] == []


def test_a_missing_topic_is_retried_after_the_schedulers_next_look() -> None:
    shard = _shard(TargetTopics(own_prefix="kafkron.", refresh_ms=30 * SECOND))
    (failed,) = shard.advance(T0 + MINUTE).results
    assert retry_after_ms(failed.error) == 30 * SECOND
    assert shard.run_until(T0 + MINUTE + 29 * SECOND).results == []
    assert [r.attempt for r in shard.run_until(T0 + MINUTE + 32 * SECOND).results] == [2]


def test_a_mark_past_its_end_in_a_stale_view_is_not_retried_at_once() -> None:
    # The view the shard holds still lists the mark after its end (the runtime's next
    # view is a loop iteration away): the retry waits for that view, not 0 ms.
    until_ms = T0 + MINUTE - 5 * SECOND  # already over when the occurrence fires
    shard = _shard(_refused(refused_until_ms={GPU: until_ms}))
    (failed,) = shard.advance(T0 + MINUTE).results
    assert retry_after_ms(failed.error) == MARK_HANDOVER_MS
