"""When a shard's transaction gives up on a Kafka target's batch (`target_acks.verdict`)."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import CorruptRecordException

from actors.scheduler.target_acks import (
    FAILED,
    LANDED,
    PENDING,
    Failed,
    GiveUp,
    Landed,
    Wait,
    check_deadline,
    verdict,
)
from actors.scheduler.writer import (
    SentBatch,
    TargetDest,
    TargetUnacknowledged,
    WritePlan,
    acknowledged,
    leaderless,
    leaderless_after_refresh,
)
from topics.names import TopicKind

OWN, TARGET = False, True


def test_everything_acknowledged_commits() -> None:
    assert verdict([(OWN, LANDED), (TARGET, LANDED)], 0.5, 10.0) == Landed()
    assert verdict([], 0.0, 10.0) == Landed()


def test_the_first_failed_batch_fails_the_transaction_whatever_is_pending() -> None:
    states = [(OWN, PENDING), (TARGET, FAILED), (OWN, FAILED)]
    assert verdict(states, 0.0, 10.0) == Failed(1)
    assert verdict([(TARGET, PENDING), (OWN, FAILED)], 99.0, 10.0) == Failed(1)


def test_a_pending_target_batch_is_waited_for_until_its_deadline() -> None:
    assert verdict([(OWN, LANDED), (TARGET, PENDING)], 4.0, 10.0) == Wait(6.0, own_only=False)
    assert verdict([(OWN, PENDING), (TARGET, PENDING)], 0.0, 10.0) == Wait(10.0, own_only=False)


def test_past_its_deadline_a_target_batch_is_given_up_once_kafkrons_own_have_landed() -> None:
    states = [(OWN, LANDED), (TARGET, LANDED), (TARGET, PENDING), (TARGET, PENDING)]
    assert verdict(states, 10.0, 10.0) == GiveUp(2)


def test_past_its_deadline_with_kafkrons_own_pending_the_broker_is_away_not_the_target() -> None:
    # A broker restart: nothing is acknowledged. The commit timeout judges it, and the
    # rebuilt shard fires the occurrences again; the target topic is not blamed.
    states = [(OWN, PENDING), (TARGET, PENDING)]
    assert verdict(states, 30.0, 10.0) == Wait(None, own_only=True)
    assert verdict([(OWN, LANDED), (TARGET, PENDING)], 30.0, 10.0) == GiveUp(1)


def test_only_kafkrons_own_batches_pending_has_no_deadline_here() -> None:
    assert verdict([(OWN, PENDING), (TARGET, LANDED)], 99.0, 10.0) == Wait(None, own_only=True)


def test_the_deadline_ends_before_the_commit_timeout() -> None:
    check_deadline(10.0, 15.0)
    for bad in (0.0, -1.0, 15.0, 20.0):
        with pytest.raises(ValueError, match="below the commit timeout"):
            check_deadline(bad, 15.0)


def test_a_target_partition_known_to_have_no_leader_is_kept_out_of_the_transaction() -> None:
    plan = WritePlan()
    plan.groups[(TopicKind.RUNS, 0)] = []
    plan.groups[(TargetDest("orders.due"), 0)] = []
    plan.groups[(TargetDest("orders.due"), 1)] = []
    plan.groups[(TargetDest("orders.new"), 0)] = []
    leaders = {("orders.due", 0): 2, ("orders.due", 1): -1}  # orders.new: not known yet
    assert leaderless(plan, lambda topic, p: leaders.get((topic, p))) == ("orders.due", 1)
    leaders[("orders.due", 1)] = 3
    assert leaderless(plan, lambda topic, p: leaders.get((topic, p))) is None


async def test_a_cached_no_leader_is_refreshed_before_the_partition_is_kept_out() -> None:
    # The producer's cache said "no leader" when the leader left; nothing refreshes it
    # while the partition is kept out of every transaction, so the writer asks once.
    plan = WritePlan()
    plan.groups[(TargetDest("orders.due"), 1)] = []
    leaders = {("orders.due", 1): -1}
    refreshes = []

    async def refresh() -> bool:
        refreshes.append(1)
        leaders[("orders.due", 1)] = 2  # the broker's answer: the leader is back
        return True

    found = await leaderless_after_refresh(plan, lambda t, p: leaders.get((t, p)), refresh)
    assert found is None and refreshes == [1]


async def test_a_partition_still_without_a_leader_after_the_refresh_is_kept_out() -> None:
    plan = WritePlan()
    plan.groups[(TargetDest("orders.due"), 1)] = []
    plan.groups[(TargetDest("orders.due"), 0)] = []
    leaders = {("orders.due", 1): -1, ("orders.due", 0): 3}
    calls = []

    async def refresh() -> bool:
        calls.append(1)
        return True

    found = await leaderless_after_refresh(plan, lambda t, p: leaders.get((t, p)), refresh)
    assert found == ("orders.due", 1) and calls == [1]
    leaders[("orders.due", 1)] = 1
    calls.clear()
    assert await leaderless_after_refresh(plan, lambda t, p: leaders.get((t, p)), refresh) is None
    assert calls == []  # every leader known: no metadata request


async def test_the_writer_gives_up_on_a_silent_target_once_its_own_batches_landed() -> None:
    loop = asyncio.get_running_loop()
    own: asyncio.Future[None] = loop.create_future()
    silent: asyncio.Future[None] = loop.create_future()
    sent = [SentBatch(TopicKind.RUNS, 0, 3, own), SentBatch("orders.due", 1, 2, silent)]
    loop.call_soon(own.set_result, None)
    refusal = await acknowledged(sent, 0.05)
    assert refusal is not None and refusal.batch is sent[1]
    assert isinstance(refusal.error, TargetUnacknowledged)
    assert "orders.due[1]" in str(refusal.error) and not silent.done()


async def test_the_writer_reports_a_refused_batch_and_commits_when_all_landed() -> None:
    loop = asyncio.get_running_loop()
    landed: asyncio.Future[None] = loop.create_future()
    landed.set_result(None)
    refused_future: asyncio.Future[None] = loop.create_future()
    refused_future.set_exception(CorruptRecordException())
    ok = [SentBatch(TopicKind.RUNS, 0, 1, landed), SentBatch("orders.due", 0, 1, landed)]
    assert await acknowledged(ok, 10.0) is None
    bad = [ok[0], SentBatch("orders.due", 0, 1, refused_future)]
    refusal = await acknowledged(bad, 10.0)
    assert refusal is not None and isinstance(refusal.error, CorruptRecordException)
