"""Each schedule's definitions over time, read from the changelog (pure).

The audit (`actors.audit.walk`) needs the rule that was in effect at each
instant, long after the command that set it has aged out of ``{ns}.commands``. The
changelog ``{ns}.schedules`` says it, but it is compacted: only each schedule's
latest record survives. So the recorder reads it as it is written and keeps every
*version* of each schedule in the history database, with the instant it took
effect (the changelog record's timestamp, stamped by the shard's producer as it
applied the change):

- a **version** is what decides which instants a schedule owes an outcome: its
  definition (by key), whether it is paused, whether it is completed (``max_runs``
  or ``end``), or that it was deleted (a tombstone: the definition key is None).
  A changelog record that changes none of these (a fire, a result, a retry: nearly
  all of them) makes no row;
- a **definition** is kept once by its key, ``@def/`` + 32 hex digits of the
  SHA-256 of its normalised bytes (`actors.shard.state.definition_key`, the very key
  a version-2 changelog record names), from a version-1 record's inline ``def`` or
  from the definition's own ``@def/`` record.

`ChangelogTracker` turns changelog records into rows. It remembers the latest
version of every schedule (one small tuple each), seeded from the database when the
recorder starts, so a record read again (a restart before the offsets were saved,
a rebuild) is recognised by its offset and makes no row twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from actors.shard.retired import GONE_KEY_PREFIX
from actors.shard.state import DEF_KEY_PREFIX, decode_definition, definition_key


@dataclass(frozen=True, slots=True)
class DefinitionRow:
    """A definition's normalised JSON under its changelog key."""

    def_key: str
    def_json: str


@dataclass(frozen=True, slots=True)
class VersionRow:
    """A schedule's state as far as the audit cares, from ``effective_ms`` on."""

    schedule_id: str
    partition: int
    offset: int
    effective_ms: int
    def_key: str | None
    """None: the schedule was deleted (a tombstone)."""
    paused: bool
    completed: str | None
    """``max_runs`` or ``end``: nothing more is owed."""
    created: bool
    """The record reads as the schedule's first (a version-1 record that never fired
    nor let anything pass): the audit then knows it was created here, rather than
    knowing it only from here on because older records were compacted away."""

    def state(self) -> tuple[str | None, bool, str | None]:
        return (self.def_key, self.paused, self.completed)


Head = tuple[int, int, str | None, bool, str | None]
"""(partition, offset, def_key, paused, completed) of a schedule's latest version."""


class ChangelogTracker:
    """Changelog records in, the definitions and versions to keep out."""

    def __init__(self, heads: Mapping[str, Head] | None = None) -> None:
        self._heads: dict[str, Head] = dict(heads or {})

    def feed(
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
    ) -> list[DefinitionRow | VersionRow]:
        """The rows one changelog record makes (usually none).

        Raises ``ValueError`` (or ``KeyError``, ``TypeError``) for a value this
        version cannot read; the caller logs and skips it, as every history record.
        """
        if not key or key.startswith(GONE_KEY_PREFIX):
            return []  # a deleted id's floor: the tombstone already said it
        if key.startswith(DEF_KEY_PREFIX):
            if value is None:  # no schedule uses it any more; the audit still may
                return []
            return [DefinitionRow(key.decode(), decode_definition(value).decode())]
        schedule_id = key.decode()
        head = self._heads.get(schedule_id)
        if head is not None and (head[0], head[1]) >= (partition, offset):
            return []  # read again: its row, if it made one, is kept already
        rows: list[DefinitionRow | VersionRow] = []
        if value is None:
            state: tuple[str | None, bool, str | None] = (None, False, None)
            created = False
        else:
            doc = orjson.loads(value)
            if type(doc) is not dict:
                raise ValueError("a changelog value is a JSON object")
            inline = doc.get("def")
            if isinstance(inline, dict):  # version 1: the definition itself
                def_bytes = orjson.dumps(inline)
                def_key = definition_key(def_bytes)
                rows.append(DefinitionRow(def_key, def_bytes.decode()))
            elif isinstance(inline, str) and inline.startswith(DEF_KEY_PREFIX.decode()):
                def_key = inline
            else:
                raise ValueError("a changelog record without a definition")
            state = (def_key, bool(doc.get("paused")), _text_or_none(doc.get("completed")))
            created = _reads_as_created(doc)
        if head is not None and (head[2], head[3], head[4]) == state:
            self._heads[schedule_id] = (partition, offset, *state)
            return rows
        if head is None and value is None:
            return rows  # a deletion of a schedule this history never knew
        self._heads[schedule_id] = (partition, offset, *state)
        rows.append(
            VersionRow(
                schedule_id=schedule_id,
                partition=partition,
                offset=offset,
                effective_ms=timestamp_ms,
                def_key=state[0],
                paused=state[1],
                completed=state[2],
                created=created and head is None,
            )
        )
        return rows

    def feed_all(
        self, records: Iterable[tuple[int, int, bytes | None, bytes | None, int]]
    ) -> list[DefinitionRow | VersionRow]:
        out: list[DefinitionRow | VersionRow] = []
        for record in records:
            out.extend(self.feed(*record))
        return out


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _reads_as_created(doc: Mapping[str, Any]) -> bool:
    return (
        doc.get("v") == 1
        and doc.get("last_fired") is None
        and "passed" not in doc
        and not doc.get("runs")
        and not doc.get("fired_count")
        and not doc.get("dag")
    )
