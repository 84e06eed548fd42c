"""The runs a worker core holds for a slot, highest priority first (docs/DESIGN.md §8.4).

`WorkerCore` keeps its queued runs in a plain deque, in delivery order, as long as
every run it has received is of priority 0 (a herd costs nothing more); its first run
of another priority replaces the deque by a `Waiting`, which offers the same few
operations the core uses, ordered by priority (highest first) and, within a priority,
in the order the deque would have them. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from topics.messages import Run
from topics.priority import MAX_PRIORITY

RunKey = tuple[int, int, int]  # (partition, offset, lease): as `actors.worker.core.RunKey`
Item = tuple[RunKey, Run]


class Waiting:
    """Queued runs by priority: a deque per priority, the highest served first."""

    __slots__ = ("_lanes", "_size")

    def __init__(self, items: Iterable[Item] = ()) -> None:
        self._lanes: list[deque[Item]] = [deque() for _ in range(MAX_PRIORITY + 1)]
        self._size = 0
        for item in items:
            self.append(item)

    def append(self, item: Item) -> None:
        self._lanes[item[1].job.priority].append(item)
        self._size += 1

    def popleft(self) -> Item:
        """The first run of the highest priority waiting."""
        for lane in reversed(self._lanes):
            if lane:
                self._size -= 1
                return lane.popleft()
        raise IndexError("pop from an empty Waiting")

    def extendleft(self, items: Iterable[Item]) -> None:
        """Put ``items`` back in front of their priorities (as `deque.extendleft`: the
        last given ends up first)."""
        for item in items:
            self._lanes[item[1].job.priority].appendleft(item)
            self._size += 1

    def remove(self, item: Item) -> None:
        self._lanes[item[1].job.priority].remove(item)
        self._size -= 1

    def __delitem__(self, index: int) -> None:
        """Delete the ``index``-th run in iteration order."""
        for lane in reversed(self._lanes):
            if index < len(lane):
                del lane[index]
                self._size -= 1
                return
            index -= len(lane)
        raise IndexError("Waiting index out of range")

    def __iter__(self) -> Iterator[Item]:
        for lane in reversed(self._lanes):
            yield from lane

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def top_priority(self) -> int | None:
        """The highest priority waiting, None if none."""
        for priority in range(MAX_PRIORITY, -1, -1):
            if self._lanes[priority]:
                return priority
        return None
