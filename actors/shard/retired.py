"""What a shard keeps of a deleted schedule: the latest occurrence it handled.

A ``schedule.upsert`` of a new id applied later than it was produced looks back
to when it was produced (`schedule_commands`), so that what came due meanwhile
is not lost. If the id was deleted just before, that look-back can reach an
occurrence the deleted schedule already fired, or reported skipped or missed;
the re-created schedule would then emit the same run id (the id and the
instant) a second time: the same occurrence twice, under one idempotency key.
Commands sent together (a delete and the upsert that re-creates it, while the
shard is a little behind) hit it whenever an occurrence falls between them.

So a delete leaves, beside its tombstone, a small record under ``@gone/`` + the
id (``@`` is never in a schedule id, as for definitions' records)::

    {"v": 2, "kind": "gone", "handled": "2026-10-10T00:01:00.000Z",
     "until": "2026-10-10T00:11:00.000Z"}

An upsert that re-creates the id starts after ``handled`` and keeps it as its own
floor (`ScheduleState.passed_ms`, so a later re-upsert respects it too); the
record is then removed with a tombstone, as it is once ``until`` has passed.
A record survives a failover like any other changelog record.

``until`` is how long the re-created schedule could reach back to ``handled``: a
late upsert looks back two grace periods (`UPSERT_LOOKBACK_GRACES`) of the NEW
definition's misfire grace, a one-off ``at`` one. The new definition is not known
at the delete, so the record is kept for two graces of the deleted definition or
two of `COVERED_GRACE_MS` (one hour), whichever is longer. The limit, said once:
an id re-created after that, with a grace longer than both, whose own reach goes
back to an instant its predecessor handled, would name that instant's run again.
Keeping every floor for the longest grace there is (366 days, twice) would cost
every deleted id a record and memory for two years.
"""

from __future__ import annotations

import heapq

import orjson

from topics.names import TopicKind
from topics.records import OutRecord
from topics.timefmt import format_ms, parse_instant

GONE_KEY_PREFIX = b"@gone/"

# How far back (in misfire grace periods) a new schedule may start when its upsert
# is applied later than it was produced: occurrences within one grace fire late,
# those in the grace before are the misfire policy's (reported missed, or run_once).
UPSERT_LOOKBACK_GRACES = 2

# The grace a re-created definition may have (and still never reach its predecessor's
# instants): a record is kept for at least two of these. The default grace is 300 s.
COVERED_GRACE_MS = 3_600_000

_SCHEDULES = TopicKind.SCHEDULES


def gone_key(schedule_id: str) -> bytes:
    return GONE_KEY_PREFIX + schedule_id.encode()


def is_gone_key(key: bytes) -> bool:
    return key.startswith(GONE_KEY_PREFIX)


def encode_gone(handled_ms: int, until_ms: int) -> bytes:
    return orjson.dumps(
        {"v": 2, "kind": "gone", "handled": format_ms(handled_ms), "until": format_ms(until_ms)}
    )


def decode_gone(value: bytes) -> tuple[int, int]:
    """(handled, until) of a ``@gone/`` record; ``ValueError`` on any other record."""
    doc = orjson.loads(value)
    if type(doc) is not dict or doc.get("v") != 2 or doc.get("kind") != "gone":
        raise ValueError("not a deleted schedule's record of version 2")
    return parse_instant(doc["handled"]), parse_instant(doc["until"])


class Retired:
    """The ``@gone/`` records of one shard: deleted ids -> (handled, until)."""

    __slots__ = ("_expiry", "_floors", "_out", "_partition", "_unheaped")

    def __init__(self, out: list[OutRecord], partition: int) -> None:
        self._out = out  # the batch's records (`Batch.out`)
        self._partition = partition
        self._floors: dict[str, tuple[int, int]] = {}
        # (until, id), a heap; an entry whose floor went (claimed, restored over) is
        # stale and skipped, and the heap is rebuilt from the floors when stale ones
        # outnumber the live. A restore (a standby tails for days) only fills the
        # floors: the heap is built at the first `expire`.
        self._expiry: list[tuple[int, str]] = []
        self._unheaped = False

    def __len__(self) -> int:
        return len(self._floors)

    def retire(self, schedule_id: str, handled_ms: int | None, grace_ms: int, now_ms: int) -> None:
        """Schedule ``schedule_id`` is deleted at ``now_ms``, having handled up to
        ``handled_ms`` (None: nothing)."""
        if handled_ms is None:
            return
        until_ms = handled_ms + UPSERT_LOOKBACK_GRACES * max(grace_ms, COVERED_GRACE_MS)
        if until_ms < now_ms:
            return  # no look-back can reach it any more
        self._floors[schedule_id] = (handled_ms, until_ms)
        self._push(until_ms, schedule_id)
        self._out.append(
            OutRecord(
                _SCHEDULES,
                gone_key(schedule_id),
                encode_gone(handled_ms, until_ms),
                self._partition,
            )
        )

    def claim(self, schedule_id: str, now_ms: int) -> int | None:
        """Schedule ``schedule_id`` is created again: the latest occurrence its
        predecessor handled, if one is kept (its record is removed now)."""
        found = self._floors.pop(schedule_id, None)
        if found is None:
            return None
        self._out.append(OutRecord(_SCHEDULES, gone_key(schedule_id), None, self._partition))
        handled_ms, until_ms = found
        return handled_ms if now_ms <= until_ms else None

    def expire(self, now_ms: int) -> None:
        """Remove the records whose ``until`` is before ``now_ms``."""
        if self._unheaped:
            self._rebuild()
        expiry = self._expiry
        floors = self._floors
        while expiry and expiry[0][0] < now_ms:
            until_ms, schedule_id = heapq.heappop(expiry)
            found = floors.get(schedule_id)
            if found is not None and found[1] == until_ms:
                del floors[schedule_id]
                self._out.append(
                    OutRecord(_SCHEDULES, gone_key(schedule_id), None, self._partition)
                )

    def restore(self, key: bytes, value: bytes | None) -> None:
        """Apply one ``@gone/`` changelog record (raises on an unreadable one)."""
        schedule_id = key[len(GONE_KEY_PREFIX) :].decode()
        self._unheaped = True
        if value is None:
            self._floors.pop(schedule_id, None)
            return
        self._floors[schedule_id] = decode_gone(value)

    def _push(self, until_ms: int, schedule_id: str) -> None:
        if self._unheaped:
            self._rebuild()
        expiry = self._expiry
        heapq.heappush(expiry, (until_ms, schedule_id))
        if len(expiry) > 2 * len(self._floors) + 64:  # mostly stale: claimed floors
            self._rebuild()

    def _rebuild(self) -> None:
        self._expiry = [(until_ms, sid) for sid, (_, until_ms) in self._floors.items()]
        heapq.heapify(self._expiry)
        self._unheaped = False
