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
``until`` is how long an upsert's look-back could reach ``handled``: two grace
periods (`UPSERT_LOOKBACK_GRACES`) of the deleted definition's misfire grace, or
of the default grace if that is longer (a re-created schedule usually has the
default). A record survives a failover like any other changelog record.
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

# The default misfire grace (``misfire.grace_s``, 300 s): the least a record is kept.
_DEFAULT_GRACE_MS = 300_000

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

    __slots__ = ("_expiry", "_floors", "_out", "_partition")

    def __init__(self, out: list[OutRecord], partition: int) -> None:
        self._out = out  # the batch's records (`Batch.out`)
        self._partition = partition
        self._floors: dict[str, tuple[int, int]] = {}
        self._expiry: list[tuple[int, str]] = []  # (until, id), a heap; stale ones skipped

    def __len__(self) -> int:
        return len(self._floors)

    def retire(self, schedule_id: str, handled_ms: int | None, grace_ms: int, now_ms: int) -> None:
        """Schedule ``schedule_id`` is deleted at ``now_ms``, having handled up to
        ``handled_ms`` (None: nothing)."""
        if handled_ms is None:
            return
        until_ms = handled_ms + UPSERT_LOOKBACK_GRACES * max(grace_ms, _DEFAULT_GRACE_MS)
        if until_ms < now_ms:
            return  # no look-back can reach it any more
        self._keep(schedule_id, handled_ms, until_ms)
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
        if value is None:
            self._floors.pop(schedule_id, None)
            return
        handled_ms, until_ms = decode_gone(value)
        self._keep(schedule_id, handled_ms, until_ms)

    def _keep(self, schedule_id: str, handled_ms: int, until_ms: int) -> None:
        self._floors[schedule_id] = (handled_ms, until_ms)
        heapq.heappush(self._expiry, (until_ms, schedule_id))
