"""Which shards a scheduler keeps warm, and one warm shard: the pure part of standbys.

A warm shard is a core fed a shard's changelog while another process owns the
shard, so that taking it over needs a catch-up from its position rather than a
full restore (see `actors.scheduler.standby` for why that is sound). Nothing here
does I/O; the lifecycle machine (`actors.scheduler.lifecycle`) decides with
`standby_partitions` and the executors feed `WarmShard`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from actors.shard import ShardCore

# The longest a standby may go without reaching its changelog's end, at any time
# from its tail's start to the takeover; past it the standby is started again from
# offset 0 (or, at a takeover, a full restore is done). Far below the changelog's
# delete.retention.ms (a day by default): compaction may remove a tombstone once it
# is that old, and a reader that was behind it all that while never sees it, so its
# core would keep (and fire, and write back) a deleted schedule.
MAX_STALENESS_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class Watch:
    """How fresh one standby is, as the lifecycle machine tracks it (mono ms).

    ``since_ms``: its last catch-up, or the start of its tail if it has not caught up
    since; ``caught_up``: whether it has. Every stretch between two of those instants
    is checked against the bound as it ends, so "caught up recently" also means "never
    behind for longer than the bound".
    """

    since_ms: int
    caught_up: bool = False


def standby_partitions(shard_count: int, owned: Iterable[int], max_standbys: int) -> list[int]:
    """The shards to keep warm for this assignment, in order of preference.

    The shards not owned, nearest after the owned ones in ring order, so that
    processes owning different shards tend to keep different ones warm.
    """
    if shard_count < 0 or max_standbys < 0:
        raise ValueError(
            f"shard_count and max_standbys must not be negative, got {shard_count} and"
            f" {max_standbys}"
        )
    mine = sorted(set(owned))
    if not mine:  # owning nothing (yet): every shard is as likely
        return list(range(shard_count))[:max_standbys]
    order: list[int] = []
    taken = set(mine)
    for step in range(1, shard_count):
        for p in mine:
            candidate = (p + step) % shard_count
            if candidate not in taken:
                taken.add(candidate)
                order.append(candidate)
    return order[:max_standbys]


class WarmShard:
    """One standby: a core fed the changelog of ``partition`` up to ``position``."""

    def __init__(self, partition: int, core: ShardCore) -> None:
        self.partition = partition
        self.core = core
        self.position = 0  # the next changelog offset to feed
        self.caught_up_ms: int | None = None  # last instant position reached the end

    def feed(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """One changelog record, in offset order (records below the position are
        ignored: a consumer that re-delivers after a reassignment is harmless)."""
        if offset < self.position:
            return
        if key is not None:
            self.core.restore(key, value)
        self.position = offset + 1

    def reached(self, end_offset: int, now_ms: int) -> None:
        """The consumer's position is ``end_offset``, the partition's end now."""
        self.position = max(self.position, end_offset)
        self.caught_up_ms = now_ms
