"""A refused read of {ns}.calendars is reported as a denial, and does not keep a new
owner from going live (DESIGN §5.7)."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import KafkaConnectionError, TopicAuthorizationFailedError

from actors.scheduler.calendar_follower import CalendarFollower, read_failure


def test_a_refused_read_of_the_calendars_is_named_as_a_denial() -> None:
    why = read_failure(TopicAuthorizationFailedError("ns.calendars"), "ns")
    assert why.startswith("denied: ") and "ns.calendars" in why and "Read" in why


def test_any_other_failure_is_reported_as_itself() -> None:
    why = read_failure(KafkaConnectionError("down"), "ns")
    assert not why.startswith("denied") and "KafkaConnectionError" in why and "down" in why


class _Consumer:
    """What the follower asks of its consumer; ``end``: the topic's end, or an error
    to raise (a refused Read), or None to never answer (an offline partition)."""

    def __init__(self, end: int | Exception | None, position: int) -> None:
        self.end = end
        self.at = position

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if isinstance(self.end, Exception):
            raise self.end
        if self.end is None:
            await asyncio.sleep(3600)
        assert isinstance(self.end, int)
        return {tps[0]: self.end}


class _Core:
    def __init__(self) -> None:
        self.calendar_cursor = 0
        self.learnt: list[tuple[str, int | None]] = []
        self.fresh: list[int] = []

    def learn_calendar(
        self, name: str, value: bytes | None, now_ms: int, written_ms: int | None = None
    ) -> None:
        self.learnt.append((name, written_ms))

    def calendars_fresh(self, fresh_ms: int) -> None:
        self.fresh.append(fresh_ms)


def _follower(consumer: _Consumer) -> CalendarFollower:
    follower = CalendarFollower(consumer, "ns.calendars", clock_ms=lambda: 5_000)  # type: ignore[arg-type]
    follower.log = [("uk", b"{}", 1_000)]  # read before the refusal
    follower.position = consumer.at
    follower.fresh_ms = 2_000
    return follower


@pytest.mark.parametrize(
    "end",
    [TopicAuthorizationFailedError("ns.calendars"), None, 7],  # refused, no answer, behind
    ids=["refused", "offline", "lagging"],
)
async def test_a_new_owner_goes_live_with_what_was_read_when_the_end_is_out_of_reach(
    end: int | Exception | None,
) -> None:
    # The restore decision (DESIGN §5.7): a shard whose schedules name a calendar is
    # not kept from going live (its plain schedules must fire): it is told what the
    # follower read, fresh as of when it last read the end, and those schedules wait.
    follower = _follower(_Consumer(end, position=1))
    core = _Core()
    started = time.monotonic()
    failure = await follower.tell_for_restore(core, now_ms=6_000, timeout_s=0.3)
    assert time.monotonic() - started < 2
    assert failure is not None
    assert core.learnt == [("uk", 1_000)] and core.calendar_cursor == 1
    assert core.fresh == [2_000]  # not fresher than the follower knows


async def test_a_new_owner_is_told_the_calendars_to_their_end_when_they_can_be_read() -> None:
    follower = _follower(_Consumer(1, position=1))
    core = _Core()
    assert await follower.tell_for_restore(core, now_ms=6_000, timeout_s=0.3) is None
    assert core.learnt == [("uk", 1_000)] and core.fresh == [5_000]  # fresh as of the ask
