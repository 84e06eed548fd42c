"""The audit's judgement of one schedule over a window (pure, streaming).

Two sorted streams in, one out, in constant memory per schedule:

- **expected**: the instants the schedule owed an outcome in ``[from_ms, to_ms]``,
  walked with the very compiled spec the shard fires by (`actors.timespec.compile_spec`
  on the definition's normalised fields: spec, zone, DST policy, spread, start and
  end bounds), each from the version (`actors.audit.versions`) in effect at that
  instant. A version holds from its ``effective_ms`` (inclusive) until the next
  one's: an upsert changes the rule from its time on. A deleted or completed
  (``max_runs``, ``end``) version owes nothing (from the millisecond after its
  record: the record is written with the fire that completed it). A paused version owes its instants
  too, as ``skipped`` once the schedule is resumed (or, after a pause with
  ``until``, under its misfire policy), so they are judged like any other; while
  the schedule is still paused (its latest version is), they are ``pending``: the
  shard reports them at the resume.
- **outcomes**: the history's runs of the schedule, by scheduled instant, including
  any folded missed/skipped result whose ``covers`` range reaches into the window
  from before it.

Each expected instant is **accounted** (a run at that instant, of any status, or a
folded result whose range holds it), **pending** (a still-open pause), or a **gap**.
Runs at instants nobody expected (triggers, a new schedule's look-back) are not
the audit's concern: it proves that nothing owed is missing.

Instants before the earliest version the history knows are not judged: the walk
starts there, and the caller says so (`known_from`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from actors.timespec import CompiledSpec, compile_spec
from topics.calendar_days import CalendarDays
from topics.timefmt import parse_instant

ACCOUNTED = "accounted"
GAP = "gap"
PENDING = "pending"
WAITING = "waiting"
"""An instant owed while a calendar the schedule names was unknown, with no outcome:
the shard owed it only if the schedule had handled an instant before it began to
wait, which the history does not say (`actors.audit.calendars`)."""

DUE = "due"
PAUSED = "paused"
PAUSED_OPEN = "paused_open"


@dataclass(frozen=True, slots=True)
class Version:
    """A schedule's state from ``effective_ms`` on (a row of ``schedule_versions``)."""

    effective_ms: int
    def_key: str | None
    """None: deleted."""
    paused: bool
    completed: str | None
    created: bool = False
    waiting: bool = False
    """A calendar it names was not in effect (`actors.audit.calendars`): an instant
    without an outcome is `WAITING`, not a gap."""
    continued: bool = False
    """A piece of the previous version cut at a calendar edit (same pause, same
    definition): a still-open pause holds over every piece."""


class Outcome(NamedTuple):
    """A run of the history (a row of ``runs``, in this column order).

    Named tuples, not dataclasses, for this and `Finding`: an audit of a namespace
    makes millions, and a tuple is made in a third of the time."""

    scheduled_ms: int
    status: str
    run_id: str
    covers_to_ms: int | None = None
    task: str | None = None
    error_type: str | None = None
    schedule_id: str = ""


class Finding(NamedTuple):
    at_ms: int
    verdict: str
    """`ACCOUNTED`, `PENDING`, `WAITING` or `GAP`."""
    owed: str
    """`DUE`, `PAUSED`, `PAUSED_OPEN` or `WAITING`: what the version in effect owed."""
    outcome: Outcome | None = None
    folded: bool = False
    """Accounted by a folded result standing for a range."""


Compiler = Callable[[str], CompiledSpec]
"""The compiled spec of a definition key (for this schedule)."""

Instants = Callable[[str, int, int], Iterable[int]]
"""The instants of a definition key (for this schedule) in ``[start_ms, stop_ms)``."""


def depends_on_id(doc: Mapping[str, Any]) -> bool:
    """Whether a definition's instants are its schedule's own (Jenkins ``H``, a spread),
    as the shard decides it (`actors.shard.definition`): any "h" in a cron counts, the
    crons of an any spec's members and exclusions included (docs/DESIGN.md §5.6)."""
    return bool(doc.get("spread_window_s")) or _cron_has_h(doc["spec"])


def _cron_has_h(spec: Mapping[str, Any]) -> bool:
    cron = spec.get("cron")
    if isinstance(cron, str) and "h" in cron.lower():
        return True
    nested = [*(spec.get("any") or []), *(spec.get("exclude") or [])] if "any" in spec else []
    return any(isinstance(part, Mapping) and _cron_has_h(part) for part in nested)


def compile_definition(
    doc: Mapping[str, Any],
    schedule_id: str,
    calendars: Mapping[str, CalendarDays] | None = None,
) -> CompiledSpec:
    """The compiled spec of a normalised definition (a schedule's or a DAG's changelog
    ``def``), with the rules the shard fires by: zone, DST policy, spread, bounds;
    ``calendars``: the days of the named calendars it excludes (`actors.audit.calendars`)."""
    start, end = doc.get("start"), doc.get("end")
    return compile_spec(
        doc["spec"],
        schedule_id=schedule_id,
        dst=doc.get("dst"),
        spread_window_s=doc.get("spread_window_s") or 0,
        start_ms=None if start is None else parse_instant(start),
        end_ms=None if end is None else parse_instant(end),
        calendars=calendars,
    )


def spec_instants(compiled: Compiler) -> Instants:
    """`Instants` walked with ``compiled``'s ``next_after``, one by one."""

    def instants(def_key: str, start_ms: int, stop_ms: int) -> Iterator[int]:
        spec = compiled(def_key)
        at = spec.next_after(start_ms - 1)
        while at is not None and at < stop_ms:
            yield at
            at = spec.next_after(at)

    return instants


def expected(
    versions: Sequence[Version], from_ms: int, to_ms: int, instants: Instants
) -> Iterator[tuple[int, str]]:
    """``(instant, owed)`` for every instant owed in ``[from_ms, to_ms]``, ascending.

    ``instants`` walks a definition over a span: `spec_instants` of a `Compiler`, or a
    caller's that shares the walk of a span among the many schedules of one
    definition, as shards share compiled specs (`actors.history.audit`)."""
    last = len(versions) - 1
    open_from = last  # the latest version's pieces (calendar edits cut it) all hold it
    while open_from > 0 and versions[open_from].continued:
        open_from -= 1
    for i, version in enumerate(versions):
        if version.def_key is None or version.completed is not None:
            continue
        end_ms = None if i == last else _span_end(versions[i + 1])  # exclusive
        start_ms = max(version.effective_ms, from_ms)
        stop_ms = to_ms + 1 if end_ms is None else min(end_ms, to_ms + 1)
        if stop_ms <= start_ms:
            continue
        owed = DUE
        if version.waiting:
            owed = WAITING
        elif version.paused:
            owed = PAUSED_OPEN if i >= open_from else PAUSED
        for at in instants(version.def_key, start_ms, stop_ms):
            yield at, owed


def _span_end(following: Version) -> int:
    """Where a version's span ends (exclusive): at the next version's instant, but for
    a completion, which is written with the fire that completed it, so an instant at
    that very millisecond was still the previous version's (and fired)."""
    if following.completed is not None and following.def_key is not None:
        return following.effective_ms + 1
    return following.effective_ms


def match(expected_: Iterable[tuple[int, str]], outcomes: Iterable[Outcome]) -> Iterator[Finding]:
    """Each expected instant with its outcome; both streams ascending by instant."""
    runs = iter(outcomes)
    current = next(runs, None)
    cover: Outcome | None = None  # the folded result reaching furthest so far
    for at, owed in expected_:
        same: Outcome | None = None
        while current is not None and current.scheduled_ms <= at:
            to_ms = current.covers_to_ms
            if to_ms is not None and (cover is None or to_ms > (cover.covers_to_ms or 0)):
                cover = current
            if current.scheduled_ms == at and (same is None or same.task is not None):
                same = current  # a DAG's own run (task None) over any of its tasks'
            current = next(runs, None)
        if same is not None:
            yield Finding(at, ACCOUNTED, owed, same)
        elif cover is not None and (cover.covers_to_ms or 0) >= at:
            yield Finding(at, ACCOUNTED, owed, cover, folded=True)
        elif owed == PAUSED_OPEN:
            yield Finding(at, PENDING, owed)
        elif owed == WAITING:
            yield Finding(at, WAITING, owed)
        else:
            yield Finding(at, GAP, owed)


@dataclass(slots=True)
class Tally:
    """What `match` would say of each instant, counted rather than listed."""

    counts: dict[str, int]
    """Each accounted instant's run status, and `PENDING` and `GAP`."""
    gaps: list[int]
    folded: int


def tally(expected_: Iterable[tuple[int, str]], outcomes: Iterable[Outcome]) -> Tally:
    """`match`, counted: the same rules, without a `Finding` per instant (an audit of a
    namespace judges millions; `tests/history/test_audit_walk.py` holds the two equal)."""
    counts: dict[str, int] = {}
    gaps: list[int] = []
    folded = 0
    runs = iter(outcomes)
    current = next(runs, None)
    cover_to_ms = -1  # the furthest a folded result reaches so far
    cover_status = ""
    for at, owed in expected_:
        same: Outcome | None = None
        while current is not None and current[0] <= at:
            to_ms = current[3]
            if to_ms is not None and to_ms > cover_to_ms:
                cover_to_ms, cover_status = to_ms, current[1]
            if current[0] == at and (same is None or same[4] is not None):
                same = current
            current = next(runs, None)
        if same is not None:
            key = same[1]
        elif cover_to_ms >= at:
            key = cover_status
            folded += 1
        elif owed == PAUSED_OPEN:
            key = PENDING
        elif owed == WAITING:
            key = WAITING
        else:
            key = GAP
            gaps.append(at)
        counts[key] = counts.get(key, 0) + 1
    return Tally(counts, gaps, folded)


def known_from(versions: Sequence[Version]) -> tuple[int | None, bool]:
    """From when the history knows the schedule, and whether that is its creation
    (else older versions were compacted away before the recorder read them)."""
    if not versions:
        return None, False
    return versions[0].effective_ms, versions[0].created
