"""Simulated consumer groups: membership is the lease.

A member joins and is assigned partitions by the range assignor (what the
scheduler runtime configures; the workers get the same here). A member that stops
heartbeating (crashed, paused, cut off) keeps its partitions until its session
expires; then it is removed and its partitions move at the rebalance. The member
does not know: a paused process finds out only when it polls again and sees a
newer generation without itself in it, then rejoins (which is one more rebalance).

Eager protocol, as aiokafka: every rebalance is a new generation, and a member that
sees a new generation treats its whole assignment as revoked and re-assigned.
While the broker is unavailable no session expires (the coordinator is down too);
when it returns, silent members get a fresh session from that instant.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Member:
    member_id: str
    silent_since_ms: int | None = None  # None: heartbeating


class Group:
    def __init__(self, name: str, partitions: int, session_timeout_ms: int) -> None:
        self.name = name
        self.partitions = partitions
        self.session_timeout_ms = session_timeout_ms
        self.members: dict[str, Member] = {}
        self.generation = 0
        self.assignment: dict[str, frozenset[int]] = {}
        self._next_member = 0
        self._expiry_ms: int | None = None  # cached next_expiry_ms; recomputed on change

    def join(self, node: str) -> str:
        """A new member (a process that starts, or rejoins after being removed)."""
        self._next_member += 1
        member_id = f"{node}#{self._next_member}"
        self.members[member_id] = Member(member_id)
        self._rebalance()
        return member_id

    def leader(self) -> str | None:
        """The member that computes the assignment: the oldest one (members keep
        their joining order), as a broker keeps its leader while it stays."""
        return next(iter(self.members), None)

    def leave(self, member_id: str) -> None:
        """A clean leave (consumer.stop()): the partitions move at once."""
        if self.members.pop(member_id, None) is not None:
            self._rebalance()

    def silent(self, member_id: str, now_ms: int) -> None:
        member = self.members.get(member_id)
        if member is not None and member.silent_since_ms is None:
            member.silent_since_ms = now_ms
            self._recompute()

    def heard(self, member_id: str) -> None:
        member = self.members.get(member_id)
        if member is not None and member.silent_since_ms is not None:
            member.silent_since_ms = None
            self._recompute()

    def next_expiry_ms(self) -> int | None:
        return self._expiry_ms

    def _recompute(self) -> None:
        times = [
            m.silent_since_ms + self.session_timeout_ms
            for m in self.members.values()
            if m.silent_since_ms is not None
        ]
        self._expiry_ms = min(times) if times else None

    def expire(self, now_ms: int) -> list[str]:
        """Remove members silent for a whole session; the ids removed."""
        gone = [
            m.member_id
            for m in self.members.values()
            if m.silent_since_ms is not None
            and now_ms - m.silent_since_ms >= self.session_timeout_ms
        ]
        for member_id in gone:
            del self.members[member_id]
        if gone:
            self._rebalance()
        return gone

    def broker_back(self, now_ms: int) -> None:
        for member in self.members.values():
            if member.silent_since_ms is not None:
                member.silent_since_ms = now_ms
        self._recompute()

    def assigned(self, member_id: str) -> frozenset[int] | None:
        """The member's partitions in the current generation (None: not a member)."""
        if member_id not in self.members:
            return None
        return self.assignment.get(member_id, frozenset())

    def _rebalance(self) -> None:
        self._recompute()
        self.generation += 1
        ids = sorted(self.members)
        assignment: dict[str, frozenset[int]] = {}
        if ids:
            per, extra = divmod(self.partitions, len(ids))
            start = 0
            for index, member_id in enumerate(ids):
                count = per + (1 if index < extra else 0)
                assignment[member_id] = frozenset(range(start, start + count))
                start += count
        self.assignment = assignment
