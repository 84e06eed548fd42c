"""What one call of the shard core writes: the batch every part of the core fills.

`Batch` is the one place the parts of `ShardCore` (`schedule_commands`, `runs`,
`dag_shard`, `cancel`, `trim`) write into, each handed it in its constructor:

- ``out``: the records to write, in the order they were decided;
- ``dirty``: the schedules changed in this batch, each to its state (or None for a
  tombstone), whose changelog records `ShardCore._flush` writes at its end, one
  per schedule;
- ``late_ms``: how late each occurrence fired in this batch, which the flush adds
  to the lateness window;
- ``counts``: the shard's counters (cumulative, read by `ShardCore.stats`).

The containers live as long as the core: a flush hands the records over and empties
them, never replaces them, so a part may keep a container (or its ``append``) in an
attribute of its own and reach it with one attribute lookup on the herd's path.

`Definitions` is the changelog's book of definitions' own records (see `state`):
how many schedules use each definition, which have their record in the changelog,
and which changed in this batch (a tombstone is due if no schedule uses it any more).
"""

from __future__ import annotations

from actors.shard.state import ScheduleState, definition_key
from topics.messages import rejected_value
from topics.names import TopicKind
from topics.records import InRecord, OutRecord

__all__ = ["COUNTERS", "Batch", "Definitions"]

COUNTERS = (
    "fired_total",
    "late_fired_total",
    "calendar_held_total",
    "missed_total",
    "skipped_total",
    "retries_total",
    "timed_out_total",
    "dead_total",
    "cancelled_total",
    "cancel_requested_total",
    "rejected_total",
    "forwarded_total",
    "results_applied_total",
    "results_ignored_total",
    "errors_total",
    "target_delivered_total",
    "target_refused_total",
    "queue_refused_total",
    "backfill_ranges_total",
    "backfill_fired_total",
    "backfill_passed_total",
    "backfill_cancelled_total",
    "backfills_ended_total",
    "deadline_missed_total",
    "deadline_recovered_total",
    "late_starts_total",
)
"""The counters of `ShardCore.stats`, in the order it lists them."""

_SCHEDULES = TopicKind.SCHEDULES
_REJECTED = TopicKind.REJECTED


class Batch:
    """The records, changed schedules, lateness and counters of shard ``partition``."""

    __slots__ = ("counts", "dirty", "late_ms", "namespace", "out", "partition")

    def __init__(self, *, namespace: str, partition: int) -> None:
        self.namespace = namespace
        self.partition = partition
        self.out: list[OutRecord] = []
        self.dirty: dict[str, ScheduleState | None] = {}
        self.late_ms: list[int] = []
        self.counts: dict[str, int] = dict.fromkeys(COUNTERS, 0)

    def topic(self, kind: TopicKind) -> str:
        return f"{self.namespace}.{kind.value}"

    def reject(self, record: InRecord, reason: str) -> None:
        """A ``{ns}.rejected`` record for an input record the shard did not apply."""
        self.out.append(
            OutRecord(
                _REJECTED,
                record.key,
                rejected_value(
                    reason=reason,
                    original=record.value,
                    topic=self.topic(record.topic),
                    partition=record.partition,
                    offset=record.offset,
                ),
            )
        )
        self.counts["rejected_total"] += 1

    def rejected_changelog(self, key: bytes, reason: str) -> OutRecord:
        """A ``{ns}.rejected`` record about the shard's own changelog record ``key``
        (one it could not restore, or one it trimmed); counted, not appended."""
        self.counts["rejected_total"] += 1
        return OutRecord(
            _REJECTED,
            key,
            rejected_value(
                reason=reason,
                original=None,
                topic=self.topic(_SCHEDULES),
                partition=self.partition,
                offset=-1,
            ),
        )


class Definitions:
    """Definitions' own changelog records: their users, which are written, which changed."""

    __slots__ = ("changed", "refs", "written")

    def __init__(self) -> None:
        self.refs: dict[bytes, int] = {}  # definition bytes -> how many schedules use it
        self.written: set[bytes] = set()  # those whose record is in the changelog
        self.changed: dict[bytes, None] = {}  # this batch's (a dict: ordered, deterministic)

    def use(self, def_bytes: bytes) -> None:
        self.refs[def_bytes] = self.refs.get(def_bytes, 0) + 1

    def drop(self, def_bytes: bytes) -> None:
        self.refs[def_bytes] = self.refs.get(def_bytes, 0) - 1
        self.changed[def_bytes] = None

    def tombstones(self, out: list[OutRecord], partition: int) -> None:
        """Tombstones of the written definitions no schedule uses any more."""
        refs = self.refs
        written = self.written
        for def_bytes in self.changed:
            if refs.get(def_bytes, 0) <= 0:
                refs.pop(def_bytes, None)
                if def_bytes in written:
                    written.discard(def_bytes)
                    key = definition_key(def_bytes).encode()
                    out.append(OutRecord(_SCHEDULES, key, None, partition))
        self.changed = {}
