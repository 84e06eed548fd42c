"""Warm standbys: shards this process may take over, restored ahead of time.

At a takeover the new owner restores the shard from its changelog before it can
fire; for a large shard that is most of the failover's delay. Kafka Streams'
answer is the standby replica: a process keeps tailing the changelogs of tasks
it does not own, so that taking one over only means catching up the last few
records. The same works here because `ShardCore.restore` is a pure function of
the records fed so far (the last record of each key wins), and nothing is armed
until `ShardCore.finish_restore`: a core fed the changelog for an hour and then
finished is the core a fresh restore would build (tests/scheduler/test_standby.py).

Fencing still decides. A standby never writes; at a takeover the runtime first
fences the previous owner (``init_transactions``, which also settles its open
transaction), and only then reads the changelog from the standby's position to
its end, so nothing can be committed behind what the core has seen. A standby
that fell behind therefore catches up before it fires, however far behind it is.

Which shards to keep warm and what a takeover does are the lifecycle machine's
decisions (`actors.scheduler.lifecycle`: ``Tail``, ``Untail``, ``CatchUp``; the
pure parts in `actors.scheduler.warm`). This module is the executor's part:
`StandbyTailer`, the thin loop that feeds the warm shards from one
read_committed consumer and reports each one that reached its end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, TopicPartition

from actors.scheduler.warm import MAX_STALENESS_MS, WarmShard

__all__ = ["MAX_STALENESS_MS", "StandbyTailer", "WarmShard"]


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
