"""Broken variants of the worker's membership rules (test-only, ``--break``).

Each undoes one rule of `actors.worker.membership` in the machine the simulated
executor builds, so a checker must catch the rule missing (docs/DESIGN.md §8, §10.3).
"""

from __future__ import annotations

from actors.worker.membership import BACKOFF, LIVE, Action, LeaseRules, WorkerMachine


class NoSyncHold(LeaseRules):
    """``no-sync-hold``: an assignment holds the lease from its SyncGroup's send by
    the heartbeat rule alone, not for the session the coordinator restarted: a
    follower answered late for a slow leader finds its lease lost at the assignment."""

    @property
    def sync_hold_ms(self) -> int:
        return 0


class AdoptionOutlivesLease(WorkerMachine):
    """``adoption-outlives-lease``: the tick ends the lease only through the core's
    ``LeaseLost``, which it reports only while it holds a live partition; partitions
    being adopted, read or backed off outlive the lease, and a backed-off one is
    retried, its ``init_transactions`` fencing whoever the group gave it to."""

    def tick(self, now_ms: int) -> list[Action]:
        core = self.core
        if core.lease_holds(now_ms) or core.assigned:
            return super().tick(now_ms)  # the same tick: the core reports the loss
        actions: list[Action] = list(core.advance(now_ms))
        for p, slot in sorted(self._slots.items()):
            if slot.state == BACKOFF and slot.since_ms <= now_ms:
                actions.extend(self._adopt(p, slot))
        return self._settle(actions, now_ms)

    def next_wake_ms(self, *, lease: bool = True) -> int | None:
        # No wake-up at the lease's end for the partitions in adoption: this tick
        # would do nothing with them then, again and again.
        due = self.core.next_due_ms(lease=lease)
        for slot in self._slots.values():
            at = None
            if slot.state == BACKOFF:
                at = slot.since_ms
            elif slot.state == LIVE and slot.write_after_ms:
                at = slot.write_after_ms
            if at is not None and (due is None or at < due):
                due = at
        return due
