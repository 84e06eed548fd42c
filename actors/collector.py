"""How a kafkron process sets CPython's cyclic garbage collector for throughput.

A scheduler or worker allocates many short-lived objects per run (records, tasks,
futures, actions) beside a heap of long-lived ones (modules, clients, a shard's
state). With CPython's default young-generation threshold (700 allocations) the
collector runs thousands of times a second and its older generations walk the
long-lived heap again and again: measured on a worker draining no-op runs, a fifth
of its CPU went to the collector. Reference counting frees almost everything these
processes drop; the collector is only there for cycles, which are rare and small.

`tune_for_throughput` raises the young threshold to `YOUNG_THRESHOLD` and freezes
what is alive at the call (``gc.freeze``: moved to the permanent generation, never
scanned, still freed by reference counting). Call it once the process has loaded
what it keeps (imports, the job registry). A cycle among frozen objects is never
collected until the heap is unfrozen: the scheduler unfreezes to collect a dropped
shard's state (`actors.scheduler.runtime`).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000
"""Allocations between young-generation collections (CPython's default is 700)."""


def tune_for_throughput() -> None:
    """Raise the young threshold, keep the older ones, freeze the heap as it is now."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    gc.freeze()
