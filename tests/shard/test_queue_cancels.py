"""A cancel record always reaches the partition its attempt went to (docs/DESIGN.md
§8.1): after the queue topic grew, after a restore, and after a refusal mark on the
queue topic kept it from being written at once."""

from __future__ import annotations

from tests.kit.shard import MINUTE, SECOND, T0, Out, Shard, command, upsert
from topics.messages import Result, is_cancel, parse_cancel, run_id_for
from topics.partitioner import murmur2_partition
from topics.records import OutRecord, TargetRecord
from topics.targets import TargetTopic, TargetTopics

GPU = "kafkron.runs.gpu"
WITH_GPU = TargetTopics(known={GPU: TargetTopic(4, 1_000_000)}, own_prefix="kafkron.")
RUN_ID = run_id_for("s", T0 + MINUTE)


def _queued(records: list[OutRecord]) -> list[TargetRecord]:
    return [r for r in records if type(r) is TargetRecord]


def _cancels(records: list[OutRecord]) -> list[TargetRecord]:
    return [r for r in _queued(records) if is_cancel(r.value or b"")]


def _ours(out: Out) -> list[Result]:
    """The results of the run under test (the schedule's later occurrences are
    skipped while it is in flight: overlap skip)."""
    return [r for r in out.results if r.run_id == RUN_ID]


def _running() -> tuple[Shard, TargetRecord]:
    """A shard with attempt 1 of ``s`` out on the gpu queue's topic (4 partitions)."""
    shard = Shard()
    shard.core.set_target_topics(WITH_GPU)
    job = {"name": "test.job", "args": {}, "queue": "gpu"}
    assert not shard.send(upsert(job=job, timeout_s=600), at_ms=T0 + 5).rejected
    (run_record,) = _queued(shard.advance(T0 + MINUTE).records)
    return shard, run_record


def _grown() -> TargetTopics:
    """The gpu topic with more partitions, enough that ``s`` hashes elsewhere."""
    before = murmur2_partition(b"s", 4)
    count = next(n for n in range(5, 64) if murmur2_partition(b"s", n) != before)
    return TargetTopics(known={GPU: TargetTopic(count, 1_000_000)}, own_prefix="kafkron.")


def test_a_cancel_follows_its_attempts_partition_after_the_topic_grew() -> None:
    shard, run_record = _running()
    shard.core.set_target_topics(_grown())  # an operator added partitions meanwhile
    (cancel,) = _cancels(shard.send(command("run.cancel", run_id=RUN_ID)).records)
    assert (cancel.topic, cancel.partition) == (GPU, run_record.partition)


def test_the_attempts_partition_survives_a_restore() -> None:
    shard, run_record = _running()
    restored, _ = shard.restored(T0 + MINUTE + SECOND)
    restored.core.set_target_topics(_grown())
    (cancel,) = _cancels(restored.send(command("run.cancel", run_id=RUN_ID)).records)
    assert (cancel.topic, cancel.partition) == (GPU, run_record.partition)


def _refused() -> TargetTopics:
    return TargetTopics(
        known={GPU: TargetTopic(4, 1_000_000)},
        refused={GPU: "RecordTooLargeError: another schedule's run"},
        own_prefix="kafkron.",
    )


def test_a_cancel_owed_while_its_queue_topic_is_refused_is_written_once_the_mark_lifts() -> None:
    shard, run_record = _running()
    shard.core.set_target_topics(_refused())
    out = shard.send(command("run.cancel", run_id=RUN_ID))
    assert _queued(out.records) == []  # not tried inside the refusal: it would abort the turn
    assert out.changelog  # the owed cancel is in the changelog with the request
    (entry,) = shard.state_doc()["runs"]
    assert entry["cancel_owed"]  # when it was requested
    # Still refused at the next try: nothing written, nothing ended.
    out = shard.run_until(T0 + 3 * MINUTE)  # past any resend, before the deadline
    assert _queued(out.records) == [] and _ours(out) == []
    shard.core.set_target_topics(WITH_GPU)
    out = shard.run_until(T0 + 5 * MINUTE)
    (cancel,) = _cancels(out.records)
    assert (cancel.topic, cancel.partition) == (GPU, run_record.partition)
    assert parse_cancel(cancel.value or b"").attempt == 1
    assert _ours(out) == []  # the worker's result ends it, not the shard
    (entry,) = shard.state_doc()["runs"]
    assert "cancel_owed" not in entry and entry["cancel"]
    # Written once: later turns do not write it again.
    assert _cancels(shard.run_until(T0 + 8 * MINUTE).records) == []


def test_an_owed_cancel_is_written_by_the_next_owner() -> None:
    shard, run_record = _running()
    shard.core.set_target_topics(_refused())
    shard.send(command("run.cancel", run_id=RUN_ID))
    restored, out = shard.restored(T0 + MINUTE + SECOND)
    restored.core.set_target_topics(WITH_GPU)
    out = restored.run_until(T0 + MINUTE + 2 * SECOND)
    (cancel,) = _cancels(out.records)
    assert cancel.partition == run_record.partition


def test_an_owed_cancel_never_written_ends_cancelled_at_the_deadline() -> None:
    shard, _ = _running()
    shard.core.set_target_topics(_refused())
    shard.send(command("run.cancel", run_id=RUN_ID))
    out = shard.run_until(T0 + MINUTE + 700 * SECOND)  # deadline 600 s plus the margin
    assert _queued(out.records) == []
    assert [(r.status, r.attempt) for r in _ours(out)] == [("cancelled", 1)]
    state = shard.core.schedule("s")
    assert state is not None and RUN_ID not in state.runs  # ended


def test_an_owed_cancel_retried_in_vain_writes_no_changelog_record() -> None:
    # Nothing changed (the retry timer is not kept in the changelog): a topic that stays
    # unable to take the cancel must not cost a changelog record at every retry.
    shard, _ = _running()
    refused = _refused()
    stale = TargetTopics(  # a mark said to end at +15 s, in a view that stays
        known=refused.known,
        refused=refused.refused,
        own_prefix="kafkron.",
        refused_until_ms={GPU: T0 + MINUTE + 15 * SECOND},
    )
    shard.core.set_target_topics(stale)
    assert shard.send(command("run.cancel", run_id=RUN_ID), at_ms=T0 + MINUTE + SECOND).changelog
    out = shard.run_until(T0 + MINUTE + 55 * SECOND)  # retries, before the next occurrence
    assert _queued(out.records) == [] and out.changelog == []
    (entry,) = shard.state_doc()["runs"]
    assert entry["cancel_owed"]
