"""Warm standbys: shards this process may take over, restored ahead of time.

At a takeover the new owner restores the shard from its changelog before it can
fire; for a large shard that is most of the failover's delay. Kafka Streams'
answer is the standby replica: a process keeps tailing the changelogs of tasks
it does not own, so that taking one over only means catching up the last few
records. The same works here because `ShardCore.restore` is a pure function of
the records fed so far (the last record of each key wins), and nothing is armed
until `ShardCore.finish_restore`: a core fed the changelog for an hour and then
finished is the core a fresh restore would build (tests/test_standby.py).

Fencing still decides. A standby never writes; at a takeover the runtime first
fences the previous owner (``init_transactions``, which also settles its open
transaction), and only then reads the changelog from the standby's position to
its end, so nothing can be committed behind what the core has seen. A standby
that fell behind therefore catches up before it fires, however far behind it is.

Pure part (no I/O, time comes in): `StandbyPlan` decides which shards to keep
warm as the group's assignment changes, and what a takeover does with a warm
shard (`CatchUp`) or without one (`FullRestore`); `WarmShard` is one standby
core and its position. Executor: `StandbyTailer` is the thin loop that feeds
the warm shards from one read_committed consumer.

How the runtime uses it (`actors.scheduler.runtime`):

- after each assignment: ``plan.on_assignment(owned, now_ms)``, then
  ``tailer.follow(plan.tailing())`` (the tailer assigns its consumer to those
  changelog partitions, from each warm shard's position);
- when a shard is taken on (after the fence): ``plan.take_over(p, now_ms)``;
  on `CatchUp`, ``read_to_end(restore_consumer, tp, action.core.restore,
  start_offset=action.from_offset)`` and ``action.core.finish_restore(now_ms)``
  replace the full restore into a fresh core; on `FullRestore`, the full restore
  as today.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from actors.scheduler.warm import MAX_STALENESS_MS, WarmShard, standby_partitions
from actors.shard import ShardCore

__all__ = [
    "MAX_STALENESS_MS",
    "CatchUp",
    "FullRestore",
    "StandbyPlan",
    "StandbyTailer",
    "WarmShard",
]


@dataclass(frozen=True, slots=True)
class CatchUp:
    """Take the shard over with this core: feed it from ``from_offset`` to the end
    (after the fence), then ``finish_restore``."""

    core: ShardCore
    from_offset: int


@dataclass(frozen=True, slots=True)
class FullRestore:
    """No usable standby: restore a fresh core from the beginning, as without standbys."""

    why: str


class StandbyPlan:
    """Which shards this process keeps warm, and what a takeover does.

    ``max_standbys`` bounds the memory: a warm shard holds its whole state (about
    300 bytes per schedule). The shards kept are the ones this process does not
    own, nearest after the ones it owns in ring order, so that processes owning
    different shards tend to keep different ones warm.
    """

    def __init__(
        self,
        partitions: int,
        new_core: Callable[[int, int], ShardCore],
        max_standbys: int,
        max_staleness_ms: int = MAX_STALENESS_MS,
    ) -> None:
        if partitions <= 0 or max_standbys < 0:
            raise ValueError(
                f"partitions must be positive and max_standbys not negative, got "
                f"{partitions} and {max_standbys}"
            )
        self._partitions = partitions
        self._new_core = new_core  # (partition, now_ms) -> an empty core
        self._max = max_standbys
        self._max_staleness_ms = max_staleness_ms
        self._warm: dict[int, WarmShard] = {}

    def wanted(self, owned: Iterable[int]) -> list[int]:
        """The shards to keep warm for this assignment, in order of preference."""
        return standby_partitions(self._partitions, owned, self._max)

    def on_assignment(self, owned: Iterable[int], now_ms: int) -> None:
        """Start warm shards that are now wanted, forget those that are not."""
        wanted = self.wanted(owned)
        for p in list(self._warm):
            if p not in wanted:
                del self._warm[p]
        for p in wanted:
            if p not in self._warm:
                self._warm[p] = WarmShard(p, self._new_core(p, now_ms))

    def tailing(self) -> list[WarmShard]:
        return [self._warm[p] for p in sorted(self._warm)]

    def take_over(self, partition: int, now_ms: int) -> CatchUp | FullRestore:
        """This process now owns ``partition`` (and fenced its previous owner)."""
        warm = self._warm.pop(partition, None)
        if warm is None:
            return FullRestore("no standby of this shard was kept")
        if warm.caught_up_ms is None:
            return FullRestore("its standby never caught up with the changelog")
        if now_ms - warm.caught_up_ms > self._max_staleness_ms:
            return FullRestore(
                f"its standby last caught up {(now_ms - warm.caught_up_ms) // 1000} s ago, "
                f"more than {self._max_staleness_ms // 1000} s"
            )
        return CatchUp(warm.core, warm.position)


class StandbyTailer:
    """Feeds the warm shards from one consumer (read_committed, assign only)."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        topic: str,
        clock: Callable[[], int],
        on_reached: Callable[[int], None] | None = None,
    ) -> None:
        self._consumer = consumer
        self._topic = topic
        self._clock = clock
        # Told the partition of each warm shard that reached its end (the machine's
        # ``standby_caught_up``).
        self._on_reached = on_reached
        self._warm: dict[TopicPartition, WarmShard] = {}

    def follow(self, warm: list[WarmShard]) -> None:
        """Tail exactly these warm shards, each from its own position."""
        self._warm = {TopicPartition(self._topic, w.partition): w for w in warm}
        self._consumer.assign(list(self._warm))
        for tp, shard in self._warm.items():
            self._consumer.seek(tp, shard.position)

    async def run_once(self, timeout_ms: int = 500) -> int:
        """One fetch: feed what arrived, mark the shards that reached their end.

        Returns the number of records fed (the caller loops, and yields between).
        """
        if not self._warm:
            await asyncio.sleep(timeout_ms / 1000)
            return 0
        batches = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=5_000)
        fed = 0
        for tp, records in batches.items():
            shard = self._warm.get(tp)
            if shard is None:
                continue
            for record in records:
                shard.feed(record.offset, record.key, record.value)
                fed += 1
        # `follow` may change the shards during any await below: work on a snapshot and
        # judge only the shards still followed (a shard handed to a takeover is not).
        warm = dict(self._warm)
        ends = await self._consumer.end_offsets(list(warm))
        now_ms = self._clock()
        for tp, followed in warm.items():
            if not self._follows(tp, followed):
                continue
            position = await self._consumer.position(tp)
            if self._follows(tp, followed) and position >= ends[tp]:
                followed.reached(position, now_ms)
                if self._on_reached is not None:
                    self._on_reached(followed.partition)
        return fed

    def _follows(self, tp: TopicPartition, shard: WarmShard) -> bool:
        return self._warm.get(tp) is shard
