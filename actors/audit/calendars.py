"""Named calendars over time, for the audit (pure; docs/DESIGN.md §9.1, §5.7).

A schedule whose spec names calendars (``"exclude": ["uk"]``) owes the instants of
its spec bound to the calendars *in effect at each instant*: the shard re-arms every
user of a calendar from the edit's record timestamp on (`actors.shard.calendars`), so
an edit changes the rule from its time on, exactly as an upsert does. The recorder
keeps every record of ``{ns}.calendars`` with that timestamp (`CalendarRow`, made by
`calendar_row`), and `split_by_calendars` cuts each version of such a schedule
(`actors.audit.walk.Version`) at the edits of the calendars it names, so the walk
judges each piece by the calendars then in effect.

A piece's definition key names the calendar versions it was bound to:
``{def_key}\\x00{offset}\\x00{offset}...`` (one offset of ``{ns}.calendars`` per name,
in the spec's order; a name has no control character), so pieces bound to the same
versions share one compiled spec and one walk across schedules.

**A calendar not known at an instant** (not created yet, deleted, or older than the
first record the recorder read of it): the shard holds the schedule ("waiting") and,
when the calendar comes, re-arms it from what it had handled, so what came due
meanwhile is reported through its misfire policy, by the calendar that came; unless
it had handled nothing yet, in which case nothing before is owed. Which case held is
not in the history, so such a piece is judged by the version that ended the wait (or,
for a deleted calendar never recreated, the last one it had) and marked ``waiting``:
an instant with an outcome is accounted, one without is counted ``waiting``, never a
gap. A name of which the history holds no record at all owes nothing (the walk has
no days to go by); `unknown_names` lists it for the report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import orjson

from actors.audit.walk import Version
from topics.calendar_commands import decode_calendar_value

KEY_SEPARATOR = "\x00"


@dataclass(frozen=True, slots=True)
class CalendarRow:
    """One record of ``{ns}.calendars``: a calendar's days from ``effective_ms`` on
    (``calendar_json`` None: deleted)."""

    name: str
    offset: int
    effective_ms: int
    calendar_json: str | None


def calendar_row(
    offset: int, key: bytes | None, value: bytes | None, timestamp_ms: int
) -> CalendarRow | None:
    """The row of one ``{ns}.calendars`` record; None for an unkeyed one (not a
    calendar). Raises ``ValueError`` (or a ``SpecError``, one of them) for a value
    this version cannot read: the caller logs and skips it."""
    if not key:
        return None
    name = key.decode("utf-8")
    if value is None:
        return CalendarRow(name, offset, timestamp_ms, None)
    decode_calendar_value(value, name)  # the shard's own check
    calendar = orjson.loads(value)["calendar"]
    return CalendarRow(name, offset, timestamp_ms, orjson.dumps(calendar).decode())


@dataclass(frozen=True, slots=True)
class CalendarVersion:
    """A calendar's state from ``effective_ms`` on; ``known`` False: deleted."""

    effective_ms: int
    offset: int
    known: bool


History = Mapping[str, Sequence[CalendarVersion]]
"""Each calendar's versions, ascending by offset (the topic's order)."""


def compound_key(def_key: str, offsets: Sequence[int]) -> str:
    return KEY_SEPARATOR.join((def_key, *map(str, offsets)))


def parse_key(key: str) -> tuple[str, tuple[int, ...]]:
    """A piece's definition key back into the definition's and the calendar offsets."""
    def_key, *offsets = key.split(KEY_SEPARATOR)
    return def_key, tuple(int(o) for o in offsets)


def unknown_names(names: Sequence[str], history: History) -> list[str]:
    """The names of which the history holds no upsert at all."""
    return [n for n in names if not any(v.known for v in history.get(n, ()))]


def split_by_calendars(
    versions: Sequence[Version],
    names_of: Callable[[str], tuple[str, ...]],
    history: History,
) -> list[Version]:
    """``versions`` with each one whose definition names calendars cut at those
    calendars' edits; every piece's ``def_key`` is a `compound_key` (None: nothing
    known to judge by, owes nothing). Versions that name none come back unchanged."""
    out: list[Version] = []
    for i, version in enumerate(versions):
        def_key = version.def_key
        names = () if def_key is None or version.completed is not None else names_of(def_key)
        if not names:
            out.append(version)
            continue
        assert def_key is not None
        end_ms = versions[i + 1].effective_ms if i + 1 < len(versions) else None
        start_ms = version.effective_ms
        cuts = sorted(
            {
                v.effective_ms
                for name in names
                for v in history.get(name, ())
                if start_ms < v.effective_ms and (end_ms is None or v.effective_ms < end_ms)
            }
        )
        previous: tuple[str | None, bool] | None = None
        for j, at_ms in enumerate([start_ms, *cuts]):
            piece = _bound_at(def_key, names, history, at_ms)
            if piece == previous:
                continue  # the same calendars (a re-upsert of the same days, say)
            previous = piece
            key, waiting = piece
            out.append(
                replace(
                    version,
                    effective_ms=at_ms,
                    def_key=key,
                    created=version.created and j == 0,
                    waiting=waiting,
                    continued=j > 0,
                )
            )
    return out


def _bound_at(
    def_key: str, names: Sequence[str], history: History, at_ms: int
) -> tuple[str | None, bool]:
    """The key of the calendars in effect at ``at_ms`` and whether one is waited for."""
    offsets: list[int] = []
    waiting = False
    for name in names:
        found = _in_effect(history.get(name, ()), at_ms)
        if found is None:
            return None, True
        offset, in_effect = found
        offsets.append(offset)
        waiting = waiting or not in_effect
    return compound_key(def_key, offsets), waiting


def _in_effect(versions: Sequence[CalendarVersion], at_ms: int) -> tuple[int, bool] | None:
    """The offset of the calendar version to judge ``at_ms`` by, and whether it was in
    effect then (False: waited for, see the module docstring); None: no upsert at all.
    ``versions`` ascend by offset and by ``effective_ms`` (`monotone`)."""
    current: CalendarVersion | None = None
    last_known: CalendarVersion | None = None
    for v in versions:
        if v.effective_ms > at_ms:
            if current is None or not current.known:
                if v.known:
                    return v.offset, False  # the one that ended the wait
                continue
            break
        current = v
        if v.known:
            last_known = v
    if current is not None and current.known:
        return current.offset, True
    if last_known is not None:
        return last_known.offset, False  # deleted and never recreated: its last days
    return None


def monotone(rows: Sequence[CalendarRow]) -> dict[str, list[CalendarVersion]]:
    """Each calendar's versions from its rows (ascending by offset). The shards that
    write a calendar stamp its records with their own clocks, so two edits a moment
    apart may carry timestamps out of the topic's order; the topic's order is the one
    every shard applies them in, so an instant is never earlier than its predecessor's
    (a running maximum)."""
    found: dict[str, list[CalendarVersion]] = {}
    for row in sorted(rows, key=lambda r: r.offset):
        versions = found.setdefault(row.name, [])
        at_ms = row.effective_ms
        if versions and versions[-1].effective_ms > at_ms:
            at_ms = versions[-1].effective_ms
        versions.append(CalendarVersion(at_ms, row.offset, row.calendar_json is not None))
    return found
