"""Following ``{ns}.calendars`` for every shard of one scheduler process.

The topic has one partition and is compacted (docs/DESIGN.md §5.7): the latest record
of each name is that calendar, a tombstone deletes it. One consumer (no group,
read_committed: a record of a shard's aborted transaction is never seen) reads it
from the beginning for the life of the process and keeps every record it read in
order, in `log`; each core holds a cursor into it (`ShardCore.calendar_cursor`) and
is told what it has not heard yet (`tell`), by the runtime's turn, under its lock.

The ordering a failover needs: a new owner's core is told the topic *to its end*,
its end read after the shard's fence, before ``finish_restore`` (`tell_to_end`).
Whatever the previous owner had learnt was committed before it could read it, so it
is below that end: the new owner knows every calendar version the old one fired by,
or a later one, before it arms anything that names a calendar. A follower that
cannot get there within `RESTORE_WAIT_S` (refused, offline) does not keep the shard
from going live (`tell_for_restore`): the freshness rule below holds what names a
calendar, the rest fires.

Firing by what was read (§5.7): a live shard fires by what its process's follower
has read, so the follower says how fresh that is. `fresh_ms` is the wall time taken
just before an end-offset request (read_committed: the last stable offset) that the
follower had already read up to: every calendar edit committed before it was read.
Each turn tells each core that instant (`ShardCore.calendars_fresh`); a schedule
naming a calendar fires no instant later, so a follower that is refused, a calendars
partition offline, or an open transaction holding the last stable offset makes those
schedules wait (``calendar_held_total``), never fire by stale days. Each record's
timestamp (its commit) goes with it, so an edit heard late re-arms from when it was
written, and what came due meanwhile goes through the misfire policy.

The log grows with edits, not with time: a calendar is edited a few times a year.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from aiokafka import AIOKafkaConsumer, TopicPartition

from topics.acl_plan import Operation
from topics.closing import within
from topics.refusals import from_error

log = logging.getLogger("kafkron.scheduler.calendars")

POLL_MS = 500
# How long a new owner whose schedules name calendars waits for the follower to
# reach the topic's end before it goes live anyway (a healthy follower gets there in
# a poll or two; a refused one never would, and the shard's other schedules must fire).
RESTORE_WAIT_S = 5.0


@runtime_checkable
class CalendarLearner(Protocol):
    """What the follower needs of a core (`actors.shard.ShardCore`)."""

    calendar_cursor: int

    def learn_calendar(
        self, name: str, value: bytes | None, now_ms: int, written_ms: int | None = None
    ) -> None: ...

    def calendars_fresh(self, fresh_ms: int) -> None: ...


def read_failure(exc: BaseException, namespace: str) -> str:
    """What a failed read of ``{ns}.calendars`` says in the log: a refused Read is
    named as the denial it is (the role, the ACL), anything else as itself."""
    denied = from_error(exc, namespace, Operation.READ)
    if denied is not None:
        return f"denied: {denied}"
    return f"{type(exc).__name__}: {exc}"


def _wall_ms() -> int:
    return int(time.time() * 1000)


class CalendarFollower:
    """Reads ``{ns}.calendars`` into `log`; see the module docstring."""

    def __init__(
        self, consumer: AIOKafkaConsumer, topic: str, clock_ms: Callable[[], int] = _wall_ms
    ) -> None:
        self._consumer = consumer
        self._tp = TopicPartition(topic, 0)
        self._clock_ms = clock_ms
        self.log: list[tuple[str, bytes | None, int | None]] = []  # name, value, written
        self.position = 0  # the next offset to read
        # Every edit committed before this wall time was read (0: not yet known).
        self.fresh_ms = 0
        self.end_offset_seen = 0  # the last end (last stable offset) the broker gave
        self._started_ms = clock_ms()
        self._moved = asyncio.Event()
        self._started = False

    async def run_once(self, timeout_ms: int = POLL_MS) -> int:
        """Read what is there (waiting up to ``timeout_ms``); records appended."""
        consumer, tp = self._consumer, self._tp
        if not self._started:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            self._started = True
        batches = await consumer.getmany(tp, timeout_ms=timeout_ms, max_records=1000)
        added = 0
        for record in batches.get(tp, ()):
            if record.key is None:
                continue  # not a calendar (every record is keyed by its name)
            try:
                name = record.key.decode("utf-8")
            except UnicodeDecodeError:
                continue
            written_ms = record.timestamp if record.timestamp and record.timestamp > 0 else None
            self.log.append((name, record.value, written_ms))
            added += 1
        self.position = await consumer.position(tp)
        asked_ms = self._clock_ms()  # before the end is asked: edits before it are below it
        if self.position >= await self.end_offset():
            self.fresh_ms = max(self.fresh_ms, asked_ms)
        self._moved.set()
        self._moved = asyncio.Event()
        return added

    async def end_offset(self) -> int:
        ends = await self._consumer.end_offsets([self._tp])
        self.end_offset_seen = end = int(ends[self._tp])
        return end

    def figures(self) -> dict[str, int]:
        """How far behind the follower is, for metrics (`actors.observe.collectors`):
        ``calendars_lag_records``, records below the last end it was given and not yet
        read (stale while the broker refuses it: see the age), and
        ``calendars_fresh_age_ms``, how long ago the calendars were last known fresh
        (since the process started, if never): what calendar-naming schedules wait for,
        whatever the cause (a refused read, an offline partition, an open transaction)."""
        now_ms = self._clock_ms()
        fresh_ms = self.fresh_ms or self._started_ms
        return {
            "calendars_lag_records": max(0, self.end_offset_seen - self.position),
            "calendars_fresh_age_ms": max(0, now_ms - fresh_ms),
        }

    async def reach(self, end_offset: int, timeout_s: float) -> None:
        """Return once the follower has read up to ``end_offset``; `TimeoutError` past
        ``timeout_s`` (the build step fails and is retried)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.position < end_offset:
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError(
                    f"the calendars were read to offset {self.position}, not {end_offset}"
                )
            try:
                await within(self._moved.wait(), left)
            except TimeoutError:
                continue  # the loop's test says how far it got

    def tell(self, core: CalendarLearner, now_ms: int) -> None:
        """Tell ``core`` the records it has not heard yet, in order, and how fresh
        they are."""
        cursor = core.calendar_cursor
        entries = self.log
        if cursor < len(entries):
            for name, value, written_ms in entries[cursor:]:
                core.learn_calendar(name, value, now_ms, written_ms)
            core.calendar_cursor = len(entries)
        core.calendars_fresh(self.fresh_ms)

    async def tell_to_end(self, core: CalendarLearner, now_ms: int, timeout_s: float) -> None:
        """Tell a new owner's core the topic up to its end (read now: after the fence)."""
        asked_ms = self._clock_ms()
        await self.reach(await self.end_offset(), timeout_s)
        self.fresh_ms = max(self.fresh_ms, asked_ms)
        self.tell(core, now_ms)

    async def tell_for_restore(
        self, core: CalendarLearner, now_ms: int, timeout_s: float = RESTORE_WAIT_S
    ) -> Exception | None:
        """A new owner's core whose restored schedules name calendars: told the topic
        to its end (`tell_to_end`) if the follower gets there within ``timeout_s``;
        else told what was read so far and how fresh that is, and the shard goes live
        anyway (None: told to the end; else why not). Safe: a schedule naming a
        calendar fires no instant later than `fresh_ms`, and every edit committed
        before that was read, so it waits for the follower; the shard's other
        schedules fire at once. What it re-arms by a book that lacks a later edit is
        re-armed again when the edit is heard, by the edit's commit (§5.7)."""
        try:
            await within(self.tell_to_end(core, now_ms, timeout_s), timeout_s)
        except Exception as exc:  # refused, offline, too slow: go live on what was read
            self.tell(core, now_ms)
            return exc
        return None
