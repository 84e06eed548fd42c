"""Concurrency keys on the worker: which runs of each key hold a slot here, and what a
run of a key at its limit does (docs/DESIGN.md §8.2). Pure: no I/O, no clock.

Every run of a key is written to one partition of its queue's topic (the shard routes
it by the key), so the owner of that partition sees all of them and decides alone.
A run of a key counts from its start until its job has *exited*: a job asked to stop
(a cancel, a timeout, a revocation, a lost lease) still runs until then, so it still
counts, whatever its result already says.

What the next owner inherits: the runs the previous owner had not finished are the
open offsets of its last commit, delivered again to the next owner, which runs them
under the same limit. What it cannot see is whether the previous owner's jobs have
stopped: so a partition's keyed runs start only once the previous owner's longest
hold of its lease has passed since its adoption (`WorkerCore.assign`:
``LeaseRules.adoption_wait_ms``, the longest of ``lease_loss_ms``, ``rebalance_hold_ms`` and
``sync_hold_ms``), by when the previous owner has stopped its jobs
on the revocation, or at its lease's end if it lost the group or never got the
rebalance's answer.
"""

from __future__ import annotations

from collections.abc import Iterator

from topics.concurrency import Concurrency
from topics.messages import Run

RunKey = tuple[int, int, int]  # (partition, offset, lease): as `actors.worker.core.RunKey`


class KeySlots:
    """The running runs of each (partition, concurrency key), oldest first."""

    __slots__ = ("_running",)

    def __init__(self) -> None:
        self._running: dict[tuple[int, str], dict[RunKey, Run]] = {}

    def count(self, partition: int, key: str) -> int:
        found = self._running.get((partition, key))
        return 0 if found is None else len(found)

    def oldest(self, partition: int, key: str) -> Iterator[tuple[RunKey, Run]]:
        """The key's running runs on ``partition``, in the order they started."""
        yield from list(self._running.get((partition, key), {}).items())

    def started(self, run_key: RunKey, concurrency: Concurrency, run: Run) -> None:
        self._running.setdefault((run_key[0], concurrency.key), {})[run_key] = run

    def exited(self, run_key: RunKey, concurrency: Concurrency) -> None:
        slot = (run_key[0], concurrency.key)
        found = self._running.get(slot)
        if found is not None:
            found.pop(run_key, None)
            if not found:
                del self._running[slot]

    def keys(self) -> list[tuple[int, str, int]]:
        """(partition, key, running) of every key with a run here (a view)."""
        return [(p, k, len(runs)) for (p, k), runs in self._running.items()]
