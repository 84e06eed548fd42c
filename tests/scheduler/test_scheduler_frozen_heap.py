"""A dropped shard's state is freed although restores freeze the heap.

The scheduler freezes the heap after each restore (``gc.freeze``: a big restored
state is never scanned again). Frozen reference cycles (a run and its schedule,
the wheel's rings) are never collected while frozen, so every shard dropped at a
rebalance or a rebuild stayed in memory. The runtime now collects after a drop
(`collect_frozen_garbage`).
"""

from __future__ import annotations

import gc

from actors.scheduler.runtime import collect_frozen_garbage
from tests.kit.shard import MINUTE, T0, Shard, upsert


def test_a_dropped_shard_frozen_with_its_restore_is_freed_by_the_collection() -> None:
    shard = Shard()
    for i in range(200):
        shard.send(upsert(f"s-{i}"), at_ms=T0 + 5)
    shard.advance(T0 + MINUTE)  # runs in flight: each refers to its schedule and back
    gc.collect()
    gc.freeze()
    try:
        del shard  # what no cycle holds goes at once, by reference counting
        gc.collect()
        frozen = gc.get_freeze_count()
        gc.collect()
        assert gc.get_freeze_count() == frozen  # the rest outlives every collection
        collect_frozen_garbage()
        # The shard's cycles (its schedules and their runs): over a thousand objects.
        assert gc.get_freeze_count() < frozen - 1000
    finally:
        gc.unfreeze()
