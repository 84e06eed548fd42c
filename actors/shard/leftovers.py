"""What a bounded `ShardCore.advance` found due but left for its next calls.

A call bounded by ``max_fires`` handles part of what is due and leaves the rest, in
the order it would have taken it, for the next calls. Between two calls the shard
applies commands and results, which may re-arm, remove or end what was left; such
an entry no longer stands. Judging every entry at every call cost each call the
whole backlog: a herd of a million due at one instant, 5,000 per call, is 200 calls
over a list of up to a million (measured with 200k due, 5,000 per call: three times
the unbounded call's cost per fire). Here a call looks only at what it takes:

- each entry carries a mark (`actors.wheel.park`) that arming its node again
  erases, so an entry whose node was re-armed since it was left (a command moved
  it; the wheel may even have handed it back meanwhile) is void unlooked-at;
- `take` judges entries from the front until it holds as many standing ones as the
  call could handle (each handled item costs at least one of the call's budget):
  a mark intact and the caller's ``still_due`` (its schedule or run still exists),
  judged before the call's wheel advance, as one unbounded call would find them;
- `order` puts the wheel's newly due items after the leftovers when they sort at or
  after them (the usual case: what became due later is due later), so the queue is
  never rebuilt; one that sorts earlier (armed in the past by a command) is placed
  by bisection, or handled in this call if it sorts before what the call took;
  ties keep the leftovers first, as one unbounded call would have ordered them;
- `leave` puts back at the front what the call took but did not handle;
- schedules go by `admit` and `pop` instead: the newly due join the queue in key
  order and the call takes from the queue one at a time, judging each as it is reached, so a
  saturated shard (each schedule several occurrences behind, so a turn's budget
  ends after a few hundred schedules) judges only what it handles.

Entries are kept sorted by ``key`` (a schedule's due; an attempt's due and run id).
A node re-armed after it was left and then disarmed again (re-upserted, then paused)
is void here, where judging only at call boundaries would have kept it: its old due
was replaced, so handling it for that due would be wrong either way.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from actors.wheel import Node, park, parked

N = TypeVar("N", bound=Node)

_COMPACT_AT = 4_096  # entries gone at the front before the list is copied down


class Leftovers(Generic[N]):
    """The queue of timers due but left, in the order a call takes them."""

    __slots__ = ("_entries", "_head", "_key")

    def __init__(self, key: Callable[[N], Any]) -> None:
        self._key = key
        # (node, its key, its mark, its due when left); entries before _head are gone.
        self._entries: list[tuple[N, Any, Node, int]] = []
        self._head = 0

    def __len__(self) -> int:
        """Entries left; void ones count until a call reaches them."""
        return len(self._entries) - self._head

    def __iter__(self) -> Iterator[N]:
        """The standing entries' nodes, in order (their mark intact), for inspection."""
        for node, _, mark, _ in self._entries[self._head :]:
            if parked(node, mark):
                yield node

    def first_due_ms(self) -> int | None:
        """The due of the front entry when it was left (in the past: due now), or None."""
        if self._head < len(self._entries):
            return self._entries[self._head][3]
        return None

    def take(self, budget: int, still_due: Callable[[N], bool]) -> list[N]:
        """Up to ``budget`` standing entries from the front, in order, removed."""
        taken: list[N] = []
        entries = self._entries
        head, end = self._head, len(entries)
        while head < end and len(taken) < budget:
            node, _, mark, _ = entries[head]
            head += 1
            if parked(node, mark) and still_due(node):
                taken.append(node)
        if head == end:
            self._entries, self._head = [], 0
        else:
            self._head = head
        return taken

    def order(self, taken: list[N], due: list[N]) -> list[N]:
        """What the call handles, in order: ``taken`` (from `take`, before the wheel's
        advance) and the wheel's newly ``due`` (sorted by key), ties keeping
        ``taken`` first. With entries still queued behind ``taken``, the call's
        budget ends within ``taken``: what of ``due`` sorts at or after its last joins
        the queue (`_insert`), and only what sorts before it is handled now."""
        if not due:
            return taken
        key = self._key
        if self._head < len(self._entries):
            last = key(taken[-1])
            early = [node for node in due if key(node) < last]
            self._insert([node for node in due if key(node) >= last])
            return sorted(taken + early, key=key) if early else taken
        if taken and key(due[0]) < key(taken[-1]):
            return sorted(taken + due, key=key)
        return taken + due

    def admit(self, due: list[N]) -> None:
        """With entries left: the wheel's newly ``due`` join the queue in key order
        (ties after what is queued), and the call takes everything from the queue
        (`pop`), judged as it is reached.

        Judging as reached is what one unbounded call would judge only where
        nothing a call does before reaching an entry changes whether it stands: so
        for schedules (no handling deletes one, and a standing entry is not on the
        wheel, so its advance cannot hand it back), not for attempts (a DAG task's
        end may end another task), which go by `take`, `order` and `leave`.
        """
        self._insert(due)

    def pop(self, still_due: Callable[[N], bool]) -> N | None:
        """The next standing entry's node, removed; None when none is left."""
        entries = self._entries
        head, end = self._head, len(entries)
        while head < end:
            node, _, mark, _ = entries[head]
            head += 1
            if parked(node, mark) and still_due(node):
                if head == end:
                    self._entries, self._head = [], 0
                else:
                    self._head = head
                return node
        self._entries, self._head = [], 0
        return None

    def leave(self, nodes: list[N]) -> None:
        """Put ``nodes`` (what the call did not handle, in order) at the queue's front.

        A node armed again meanwhile (by another node's handling) is on the wheel
        again, whose next advance hands it back: it is not kept here.
        """
        mark = Node()
        key = self._key
        front = []
        for node in nodes:
            if not node.pending:
                park(node, mark)
                front.append((node, key(node), mark, node.due_ms))
        if not front:
            return
        head = self._head
        if head >= len(front):  # the room left by what the call took
            self._entries[head - len(front) : head] = front
            self._head = head - len(front)
        else:
            self._entries = front + self._entries[head:]
            self._head = 0

    def _insert(self, nodes: list[N]) -> None:
        """Queue ``nodes`` (just handed back by the wheel, so detached) by key, each
        after the entries of an equal key: appended when it sorts last (the usual
        case: what became due later is due later), else placed by bisection (a node
        armed in the past by a command), which moves the list's tail but judges and
        copies nothing."""
        if not nodes:
            return
        mark = Node()
        key = self._key
        entries = self._entries
        if self._head >= _COMPACT_AT and self._head * 2 >= len(entries):
            del entries[: self._head]
            self._head = 0
        for node in nodes:
            park(node, mark)
            entry = (node, key(node), mark, node.due_ms)
            if len(entries) <= self._head or entry[1] >= entries[-1][1]:
                entries.append(entry)
            else:
                insort(entries, entry, lo=self._head, key=_key_of)


def _key_of(entry: tuple[Any, Any, Node, int]) -> Any:
    return entry[1]
