"""`kafkron audit`: every instant a window owed, and what became of it, from the history.

Reads the recorder's database read-only with the standard library's ``sqlite3``
(one thread, cursors streamed: an audit of a whole namespace keeps one schedule's
rows at a time, and the definitions' compiled specs, shared as the shard shares them).
The judgement itself is `actors.audit.walk`.

Two ordered streams are merged by schedule id: the schedules' versions
(``schedule_versions``) and their runs in the window (``runs``, read from the
covering ``runs_by_schedule_status`` index alone), plus the few folded results that
reach into the window from before it (the ``runs_folded`` partial index).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from actors.audit.calendars import KEY_SEPARATOR, parse_key, split_by_calendars, unknown_names
from actors.audit.walk import (
    GAP,
    Finding,
    Instants,
    Outcome,
    Version,
    compile_definition,
    depends_on_id,
    expected,
    known_from,
    match,
    spec_instants,
    tally,
)
from actors.history.audit_calendars import RecordedCalendars

# SloReport is re-exported: its readers import it from here, with `slo`.
from actors.history.slo_query import SloReport as SloReport
from actors.history.slo_query import slo_of
from actors.history.store import HistoryError
from actors.timespec import CompiledSpec
from topics.calendar_days import calendar_names

# Bounds of the caches of compiled specs and of walked spans (emptied when full: they
# only hold pure values, so refilling changes nothing but time).
_CACHE_MAX = 65_536
_SPANS_MAX = 256

# How many gaps an audit lists (all are counted): a broken namespace must not print
# a million lines.
GAPS_LISTED_MAX = 10_000


@dataclass(slots=True)
class ScheduleAudit:
    """One schedule's account of the window."""

    schedule_id: str
    known_from_ms: int | None
    created: bool
    findings: list[Finding] = field(default_factory=list)
    """Every finding (kept only when asked: an audit by id lists each instant)."""
    counts: Counter[str] = field(default_factory=Counter)
    """``gap``, ``pending``, and each status of the accounted instants."""
    gaps: list[int] = field(default_factory=list)
    folded: int = 0
    unknown_calendars: list[str] = field(default_factory=list)
    """Calendars it names of which the history holds no record: instants that needed
    them are not judged."""


@dataclass(slots=True)
class AuditReport:
    from_ms: int
    to_ms: int
    schedules: int = 0
    expected: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    folded: int = 0
    gaps: list[tuple[str, int]] = field(default_factory=list)
    gap_count: int = 0
    known_late: list[tuple[str, int]] = field(default_factory=list)
    """Schedules whose history starts inside the window (not at their creation): the
    instants before are not judged."""
    unknown: list[str] = field(default_factory=list)
    """Ids asked for (or with runs in the window) of which no definition is recorded."""
    unknown_calendars: list[tuple[str, str]] = field(default_factory=list)
    """(schedule id, calendar name): a calendar it names that the history never saw."""
    audits: list[ScheduleAudit] = field(default_factory=list)


_OUTCOME_COLUMNS = "scheduled_ms, status, run_id, covers_to_ms, task, error_type, schedule_id"


def _outcome_row(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Outcome:
    return Outcome._make(row)


_COUNTED_COLUMNS = "scheduled_ms, status, NULL, covers_to_ms, task, NULL, schedule_id"
_SCHEDULE_OF = itemgetter(6)  # an `Outcome`'s schedule_id, named or not


class AuditSource:
    """The history database, opened read-only for an audit."""

    def __init__(self, path: Path | str) -> None:
        path = Path(path)
        if not path.exists():
            raise HistoryError(
                f"no history database at {path}; run `kafkron recorder` to build one, "
                "or pass --db (env KAFKRON_HISTORY_DB) to point at it"
            )
        self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master")}
        if not {"schedule_versions", "runs_by_schedule_status", "runs_folded"} <= tables:
            raise HistoryError(
                f"{path} has no schedule definitions yet: run this version's "
                "`kafkron recorder` on it (it adds the tables and reads the changelog)"
            )
        self._defs: dict[str, dict[str, Any]] = {}
        self._specs: dict[tuple[str, str | None], CompiledSpec] = {}
        self._spans: dict[tuple[str, int, int], tuple[int, ...]] = {}
        self._names: dict[str, tuple[str, ...]] = {}  # def key -> the calendars it names
        self._calendars = RecordedCalendars(self._db, "calendar_versions" in tables)

    @property
    def connection(self) -> sqlite3.Connection:
        """The read-only connection (`actors.history.alerts.read_sync` reads through it)."""
        return self._db

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> AuditSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------- definitions

    def _doc(self, schedule_id: str, def_key: str) -> dict[str, Any]:
        if KEY_SEPARATOR in def_key:  # a piece bound to calendar versions
            def_key = parse_key(def_key)[0]
        doc = self._defs.get(def_key)
        if doc is None:
            row = self._db.execute(
                "SELECT def FROM definitions WHERE def_key = ?", (def_key,)
            ).fetchone()
            if row is None:
                raise HistoryError(f"definition {def_key} of {schedule_id!r} is not recorded")
            doc = self._defs[def_key] = orjson.loads(row[0])
        return doc

    def _owner(self, schedule_id: str, def_key: str) -> str | None:
        return schedule_id if depends_on_id(self._doc(schedule_id, def_key)) else None

    def compiled(self, schedule_id: str, def_key: str) -> CompiledSpec:
        """``def_key``: a definition's key, or a piece's bound to calendar versions
        (`actors.audit.calendars.compound_key`)."""
        owner = self._owner(schedule_id, def_key)
        spec = self._specs.get((def_key, owner))
        if spec is None:
            doc = self._doc(schedule_id, def_key)
            names = calendar_names(doc.get("spec") or {})
            offsets = parse_key(def_key)[1]
            if len(offsets) != len(names):  # `split_by_calendars` binds every piece
                raise HistoryError(f"{schedule_id!r}: {def_key!r} is not bound to its calendars")
            calendars = {
                name: self._calendars.days(o) for name, o in zip(names, offsets, strict=True)
            }
            spec = self._specs[(def_key, owner)] = compile_definition(
                doc, schedule_id, calendars or None
            )
            if len(self._specs) > _CACHE_MAX:
                self._specs.clear()  # a bound, not a reuse: pure values, refilled at need
        return spec

    # ------------------------------------------------------------- calendars

    def names_of(self, schedule_id: str, def_key: str) -> tuple[str, ...]:
        """The named calendars a definition excludes (looked at once per definition)."""
        names = self._names.get(def_key)
        if names is None:
            names = self._names[def_key] = calendar_names(
                self._doc(schedule_id, def_key).get("spec") or {}
            )
        return names

    def _with_calendars(self, sid: str, versions: list[Version]) -> tuple[list[Version], list[str]]:
        """``versions`` cut at the edits of the calendars they name, and the names the
        history never saw (`actors.audit.calendars`); unchanged when they name none."""
        named = {
            name
            for v in versions
            if v.def_key is not None
            for name in self.names_of(sid, v.def_key)
        }
        if not named:
            return versions, []
        history = self._calendars.history()
        pieces = split_by_calendars(versions, lambda key: self.names_of(sid, key), history)
        return pieces, unknown_names(sorted(named), history)

    def instants(self, schedule_id: str) -> Instants:
        """A schedule's `Instants`: a span of a definition shared by many schedules (no
        ``H``, no spread) is walked once and its instants kept, as a shard keeps one
        compiled spec for them (most schedules of a namespace say the same thing)."""
        walk = spec_instants(lambda key: self.compiled(schedule_id, key))

        def instants(def_key: str, start_ms: int, stop_ms: int) -> Iterable[int]:
            if self._owner(schedule_id, def_key) is not None:
                return walk(def_key, start_ms, stop_ms)
            key = (def_key, start_ms, stop_ms)
            found = self._spans.get(key)
            if found is None:
                if len(self._spans) >= _SPANS_MAX:
                    self._spans.clear()
                found = self._spans[key] = tuple(walk(def_key, start_ms, stop_ms))
            return found

        return instants

    # --------------------------------------------------------------- streams

    def _versions(self, ids: Sequence[str] | None) -> Iterator[tuple[str, list[Version]]]:
        columns = "schedule_id, effective_ms, def_key, paused, completed, created"
        if ids is None:
            cursor = self._db.execute(
                f"SELECT {columns} FROM schedule_versions ORDER BY schedule_id, partition, offset"
            )
            rows: Iterator[Any] = iter(cursor)
        else:
            rows = (
                row
                for sid in sorted(set(ids))
                for row in self._db.execute(
                    f"SELECT {columns} FROM schedule_versions WHERE schedule_id = ? "
                    "ORDER BY partition, offset",
                    (sid,),
                )
            )
        for sid, group in groupby(rows, key=lambda r: r[0]):
            yield (
                str(sid),
                [Version(int(e), d, bool(p), c, bool(cr)) for _, e, d, p, c, cr in group],
            )

    def _outcomes(
        self, from_ms: int, to_ms: int, ids: Sequence[str] | None, named: bool
    ) -> Iterator[tuple[str, list[Outcome]]]:
        """Each schedule's runs in the window. ``named``: as `Outcome`s with their run
        ids; else as the plain tuples the cursor makes, in `Outcome`'s column order,
        without the run id (a namespace's audit counts, and lists only gaps, which
        have no run), read from the covering index alone (`schema`): `tally` reads
        them by position, and a named tuple per row would cost a third of the audit."""
        columns = _OUTCOME_COLUMNS if named else _COUNTED_COLUMNS
        if ids is None:
            rows: Iterator[Outcome] = self._rows(
                f"SELECT {columns} FROM runs INDEXED BY runs_by_schedule_status "
                "WHERE scheduled_ms >= ? AND scheduled_ms <= ? ORDER BY schedule_id, scheduled_ms",
                (from_ms, to_ms),
                named,
            )
        else:
            rows = (
                row
                for sid in sorted(set(ids))
                for row in self._rows(
                    f"SELECT {columns} FROM runs WHERE schedule_id = ? "
                    "AND scheduled_ms >= ? AND scheduled_ms <= ? ORDER BY scheduled_ms",
                    (sid, from_ms, to_ms),
                    named,
                )
            )
        for sid, group in groupby(rows, key=_SCHEDULE_OF):
            yield sid, list(group)

    def _rows(self, sql: str, params: tuple[Any, ...], named: bool = True) -> Iterator[Outcome]:
        cursor = self._db.cursor()
        if named:
            cursor.row_factory = _outcome_row
        return iter(cursor.execute(sql, params))

    def _folded_before(self, from_ms: int) -> dict[str, list[Outcome]]:
        """Folded results that start before the window and reach into it (few)."""
        found: dict[str, list[Outcome]] = {}
        for outcome in self._rows(
            f"SELECT {_OUTCOME_COLUMNS} FROM runs INDEXED BY runs_folded "
            "WHERE covers_to_ms >= ? AND scheduled_ms < ? ORDER BY schedule_id, scheduled_ms",
            (from_ms, from_ms),
        ):
            found.setdefault(outcome.schedule_id, []).append(outcome)
        return found

    def schedule_ids(self) -> list[str]:
        """Every schedule the history holds a definition of, in order."""
        return [
            str(sid)
            for (sid,) in self._db.execute(
                "SELECT DISTINCT schedule_id FROM schedule_versions ORDER BY schedule_id"
            )
        ]

    def start_within_ms(self, schedule_id: str) -> int | None:
        """The start deadline of the schedule's latest recorded definition, if any."""
        row = self._db.execute(
            "SELECT d.def FROM schedule_versions v JOIN definitions d ON d.def_key = v.def_key "
            "WHERE v.schedule_id = ? ORDER BY v.partition DESC, v.offset DESC LIMIT 1",
            (schedule_id,),
        ).fetchone()
        if row is None:
            return None
        try:
            deadline = orjson.loads(row[0]).get("deadline")
        except (orjson.JSONDecodeError, AttributeError):
            return None
        start = deadline.get("start_within_s") if isinstance(deadline, dict) else None
        return start * 1000 if isinstance(start, int) else None

    # ----------------------------------------------------------------- audit

    def audit(
        self,
        from_ms: int,
        to_ms: int,
        ids: Sequence[str] | None = None,
        *,
        keep_findings: bool = False,
    ) -> AuditReport:
        """Judge every instant of ``[from_ms, to_ms]`` of ``ids`` (None: every schedule)."""
        report = AuditReport(from_ms, to_ms)
        before = self._folded_before(from_ms)
        outcomes = self._outcomes(from_ms, to_ms, ids, keep_findings)
        pending_out = next(outcomes, None)
        seen: set[str] = set()
        for sid, versions in self._versions(ids):
            seen.add(sid)
            runs: list[Outcome] = []
            while pending_out is not None and pending_out[0] <= sid:
                if pending_out[0] == sid:
                    runs = pending_out[1]
                elif len(report.unknown) < GAPS_LISTED_MAX:
                    report.unknown.append(pending_out[0])
                pending_out = next(outcomes, None)
            one = self._judge(
                sid, versions, before.get(sid, []) + runs, from_ms, to_ms, keep_findings
            )
            if one is None:
                continue
            self._add(report, one, keep_findings)
        while pending_out is not None:
            if len(report.unknown) < GAPS_LISTED_MAX:
                report.unknown.append(pending_out[0])
            pending_out = next(outcomes, None)
        if ids is not None:
            report.unknown = sorted(set(report.unknown) | (set(ids) - seen))
        return report

    def _judge(
        self,
        sid: str,
        versions: list[Version],
        runs: list[Outcome],
        from_ms: int,
        to_ms: int,
        keep_findings: bool,
    ) -> ScheduleAudit | None:
        if versions[0].effective_ms > to_ms:
            return None  # born (or known) after the window
        first_ms, created = known_from(versions)
        one = ScheduleAudit(sid, first_ms, created)
        versions, one.unknown_calendars = self._with_calendars(sid, versions)
        owed = expected(versions, from_ms, to_ms, self.instants(sid))
        if not keep_findings:
            counted = tally(owed, runs)
            one.counts.update(counted.counts)
            one.gaps, one.folded = counted.gaps, counted.folded
            return one
        for finding in match(owed, runs):
            outcome = finding.outcome
            if outcome is not None:
                one.counts[outcome.status] += 1
                one.folded += finding.folded
            else:
                one.counts[finding.verdict] += 1
                if finding.verdict == GAP:
                    one.gaps.append(finding.at_ms)
            one.findings.append(finding)
        return one

    @staticmethod
    def _add(report: AuditReport, one: ScheduleAudit, keep_findings: bool) -> None:
        report.schedules += 1
        report.expected += one.counts.total()
        report.counts.update(one.counts)
        report.folded += one.folded
        report.gap_count += len(one.gaps)
        for at in one.gaps:
            if len(report.gaps) < GAPS_LISTED_MAX:
                report.gaps.append((one.schedule_id, at))
        report.unknown_calendars += [(one.schedule_id, n) for n in one.unknown_calendars]
        known_ms = one.known_from_ms
        if not one.created and known_ms is not None and known_ms > report.from_ms:
            report.known_late.append((one.schedule_id, known_ms))
        if keep_findings:
            report.audits.append(one)


def slo(
    db: sqlite3.Connection | AuditSource,
    from_ms: int,
    to_ms: int,
    within_ms: int,
    ids: Sequence[str] | None = None,
) -> SloReport:
    """`actors.history.slo_query.slo_of` on an audit's database (or a connection)."""
    conn = db._db if isinstance(db, AuditSource) else db
    return slo_of(conn, from_ms, to_ms, within_ms, ids)
