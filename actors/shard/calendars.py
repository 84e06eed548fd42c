"""Named calendars in one shard: the calendars it knows, who names them, re-arming.

A part of `ShardCore` (same rules: pure, no I/O). docs/DESIGN.md §5.7.

- **The book.** The shard knows a calendar by being told of each record of the
  compacted ``{ns}.calendars`` topic (`learn`): the runtime tells every core of a
  scheduler each record, and a new owner is told the whole topic, to its end, before
  `ShardCore.finish_restore`, so nothing that names a calendar is armed (nor fired)
  before the calendars are known. A calendar is small (at most 5,000 dates and
  1,000 ranges); the book keeps its days, parsed once.
- **The index.** ``calendar name -> ids of the schedules that name it``, kept on
  upsert, delete and restore: an edit re-arms exactly those schedules, never a scan
  of the shard. A spec that names no calendar costs one dict lookup at upsert and
  nothing at restore (its definition's bytes are checked once, not per schedule).
- **Binding.** A schedule that names calendars gets its own `Definition` (a copy of
  the shared one) whose spec is compiled with the book's days (`compile_spec(...,
  calendars=)`); the shared caches of `actors.shard.definition` never hold a spec
  bound to one shard's book (two owners of one schedule, in the simulation's one
  process, may know different versions of a calendar).
- **An unknown name: the schedule waits, visibly.** A schedule naming a calendar the
  shard does not know (never created, deleted, or not yet read) fires nothing, and
  its record says ``"waiting": NAME`` (``kafkron ls``, the console). When the
  calendar comes, it is re-armed from what it had handled, and what came due while
  it waited goes through its misfire policy, as after a takeover. Not a rejection:
  the calendar is written by another shard's transaction and read by this one a
  moment later, so "is it known?" at the instant an upsert is applied depends on
  timing, and a rejection would make the same commands mean different things on
  two owners. The front ends refuse a name they cannot find and a delete of a
  calendar in use (naming its users), from what they read; the shard's rule is the
  one that cannot race.
- **Re-arming** (`_rearm`, after an edit, a restore, or the end of a wait): the next
  occurrence is the first fire of the bound spec after the later of what the schedule
  handled and min(now, its old next) - 1, as a re-upsert: nothing handled fires again,
  nothing before now that was not due fires late, and an instant still allowed stays
  where it was. An edit's re-arm leaves a ``next`` that was due before the edit was
  written where it is (held until the calendars were known that fresh, it was the
  previous version's to fire: the audit judges it so, docs/DESIGN.md §9.1), and
  binds the schedule to a spliced spec (`Spliced`): the backlog up to the edit's
  commit is walked by the days in effect at each of its instants (the book keeps
  the latest `HISTORY_MAX` versions of each calendar, with when each holds from, so
  a backlog spanning several edits splits at each), what follows by the new ones. A
  schedule an edit ended (``completed: "end"``: no day left) is re-armed too, from
  now, so an edit that gives days back revives it; only ``max_runs`` is final.
  Applied again with the same book and the same ``written`` it changes nothing, so a
  new owner, which applies it with the latest record's timestamp of the calendars a
  schedule names (`restored`), keeps the ``next`` the live owner kept or re-armed. An
  upsert keeps its floor as handled (`ScheduleCommands.upsert`), so a re-arm from an
  edit committed before it never reaches back before the schedule. Each re-armed schedule is written
  to the changelog in the same batch.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from actors.shard.batch import Batch
from actors.shard.calendar_history import CalendarHistory
from actors.shard.dag_definition import DagDefinition
from actors.shard.definition import Definition, depends_on_id
from actors.shard.spliced import Spliced
from actors.shard.state import RunState, ScheduleState
from actors.timespec import CompiledSpec, UnknownCalendar, compile_spec
from actors.wheel import TimingWheel
from topics.calendar_days import CalendarDays, calendar_names
from topics.timefmt import parse_instant

_CACHE_MAX = 4096  # bound specs kept (keyed by definition, owner and calendar versions)


class _Never:
    """The spec of a schedule waiting for a calendar: nothing comes."""

    kind = "any"

    def next_after(self, after_ms: int) -> int | None:
        return None


_NEVER = _Never()


class ShardCalendars:
    """The named calendars of one shard (see the module docstring)."""

    def __init__(
        self,
        batch: Batch,
        schedules: dict[str, ScheduleState],
        wheel: TimingWheel[ScheduleState | RunState],
    ) -> None:
        self._dirty = batch.dirty
        self._schedules = schedules
        self._wheel = wheel
        self.book: dict[str, CalendarDays] = {}
        self._versions: dict[str, int] = {}  # name -> edits seen (a cache key)
        # name -> the latest record's timestamp (its commit), when told: a restore
        # re-arms by it, as the live owner did when it heard that record.
        self._written_ms: dict[str, int] = {}
        # The latest versions of each calendar: the backlog edits heard late left is
        # walked by the days in effect at each of its instants (`Spliced`).
        self._history = CalendarHistory()
        self._users: dict[str, dict[str, None]] = {}  # name -> ids (ordered: deterministic)
        self._names_by_id: dict[str, tuple[str, ...]] = {}
        # Ids bound to a spliced spec now (an edit's backlog not yet walked): empty but
        # for a moment after an edit heard late, so a fire asks `walked` only then.
        self.spliced: set[str] = set()
        self._names_of_def: dict[bytes, tuple[str, ...]] = {}
        self._bound: dict[tuple[Any, ...], Definition] = {}
        self._docs: dict[bytes, tuple[Mapping[str, Any], bool]] = {}
        # Everything committed to {ns}.calendars before this instant was learnt (the
        # runtime says so every turn, `ShardCore.calendars_fresh`); None: not told,
        # the book is taken as complete (a core driven without a follower).
        self.fresh_ms: int | None = None

    # --- the book ------------------------------------------------------------------

    def learn(
        self, name: str, days: CalendarDays | None, now_ms: int, written_ms: int | None = None
    ) -> int:
        """A record of ``{ns}.calendars`` (None: deleted); re-arms its users. Returns
        how many schedules it re-armed. ``written_ms``: the record's timestamp (its
        commit); the re-arm floor counts from it, not from when it was heard, so
        what came due in between goes through each schedule's misfire policy."""
        since_ms = now_ms if written_ms is None else min(now_ms, written_ms)
        if written_ms is not None:
            self._written_ms[name] = written_ms
        if days is None:
            if self.book.pop(name, None) is None:
                return 0
        else:
            self.book[name] = days
        version = self._versions[name] = self._versions.get(name, 0) + 1
        self._history.record(name, version, since_ms, days)
        users = self._users.get(name)
        if not users:
            return 0
        schedules = self._schedules
        for schedule_id in list(users):
            state = schedules.get(schedule_id)
            if state is not None:
                self._refresh(state, self._names_by_id[schedule_id], since_ms, written_ms)
        return len(users)

    def users(self, name: str) -> list[str]:
        """The ids of this shard's schedules that name calendar ``name``."""
        return list(self._users.get(name, ()))

    # --- schedules -------------------------------------------------------------------

    def upserted(
        self, state: ScheduleState, names: tuple[str, ...], kept_ms: int | None = None
    ) -> bool:
        """A schedule was upserted whose spec names ``names`` (maybe none). Binds its
        definition and keeps the index; False when it must wait for a calendar (its
        definition's spec then fires nothing). ``kept_ms``: a due ``next`` the upsert
        keeps; older than the latest edit of those calendars, it is that edit's backlog
        and is bound with the split, as `_refresh` binds it (else an identical re-upsert
        while the backlog is held would walk it by the new days and lose it)."""
        old = self._names_by_id.get(state.id)
        if old is not None and old != names:
            self.forget(state.id)
        if not names:
            if state._aside is not None:
                state._aside.waiting = None  # it waits for nothing any more
            return True
        self._index(state.id, names)
        written = [self._written_ms[n] for n in names if n in self._written_ms]
        if kept_ms is not None and written and kept_ms < max(written):
            return self._bind(state, names, kept_ms)
        return self._bind(state, names)

    def walked(self, state: ScheduleState) -> None:
        """After a live fire: a schedule whose ``next`` is past its splice (the backlog
        before the edit walked) is bound without it, as a new owner binds it, so the
        two agree on every instant (a DAG's data intervals included)."""
        definition = state._definition
        if definition is None:
            return
        compiled = definition.compiled
        if not isinstance(compiled, Spliced):
            return
        names = self._names_by_id.get(state.id)
        next_ms = state.next_ms
        if names is not None and (next_ms is None or next_ms >= compiled.split_ms):
            self._bind(state, names)

    def fire_limit_ms(self, state: ScheduleState) -> int | None:
        """The latest instant this schedule may fire now: `fresh_ms` when it names a
        calendar (a backlog of several instants stops there: every instant fired is
        judged by calendars known as of it, not only the first), else None."""
        fresh_ms = self.fresh_ms
        if fresh_ms is None or state.id not in self._names_by_id:
            return None
        return fresh_ms

    def named(self, schedule_id: str) -> bool:
        """Did this schedule name calendars (so its re-upsert must unbind it)?"""
        return schedule_id in self._names_by_id

    def forget(self, schedule_id: str) -> None:
        """A schedule deleted, or no longer naming calendars."""
        names = self._names_by_id.pop(schedule_id, None)
        self.spliced.discard(schedule_id)
        for name in names or ():
            users = self._users.get(name)
            if users is not None:
                users.pop(schedule_id, None)
                if not users:
                    del self._users[name]

    def restored(self, now_ms: int, definitions: Iterable[bytes]) -> None:
        """After a restore (every calendar already learnt): bind and re-arm each
        schedule that names a calendar. ``definitions``: the distinct definitions of
        the restored schedules, each checked once, so a shard whose schedules name no
        calendar pays nothing per schedule."""
        naming = {d for d in definitions if self.names_of(d)}
        if not naming:
            return
        for state in list(self._schedules.values()):
            if state.def_bytes in naming:
                names = self.names_of(state.def_bytes)
                self._index(state.id, names)
                # The edit rule, as the live owner applied it when it heard the latest
                # of these records (idempotent for one ``written``): a ``next`` due
                # before that edit was written keeps its place here too.
                written = [self._written_ms[n] for n in names if n in self._written_ms]
                written_ms = max(written) if written else None
                since_ms = now_ms
                if written_ms is not None and state.handled_ms() is not None:
                    since_ms = min(now_ms, written_ms)
                # else nothing bounds it below (a record from before upserts kept
                # their floor, never fired): from the record's commit it could reach
                # back before the schedule existed, so from now, as before.
                self._refresh(state, names, since_ms, written_ms)

    def names_of(self, def_bytes: bytes) -> tuple[str, ...]:
        found = self._names_of_def.get(def_bytes)
        if found is not None:
            return found
        if b'"exclude"' not in def_bytes:
            return ()
        spec = orjson.loads(def_bytes).get("spec")
        names = calendar_names(spec) if isinstance(spec, Mapping) else ()
        self._names_of_def[def_bytes] = names
        return names

    def _index(self, schedule_id: str, names: tuple[str, ...]) -> None:
        self._names_by_id[schedule_id] = names
        for name in names:
            self._users.setdefault(name, {})[schedule_id] = None

    def _refresh(
        self,
        state: ScheduleState,
        names: tuple[str, ...],
        now_ms: int,
        written_ms: int | None = None,
    ) -> None:
        """Bind and re-arm; written to the changelog only if something it spells
        changed (a restore that finds every ``next`` right writes nothing)."""
        aside = state._aside
        before = (state.next_ms, state.completed, state.passed_ms, aside and aside.waiting)
        old_next = state.next_ms
        kept_ms = None
        if written_ms is not None and old_next is not None and old_next < written_ms:
            kept_ms = old_next  # a backlog before the edit: by the days then
        self._bind(state, names, kept_ms)
        self._rearm(state, now_ms, written_ms)
        aside = state._aside
        if (state.next_ms, state.completed, state.passed_ms, aside and aside.waiting) != before:
            self._dirty[state.id] = state

    def _bind(
        self, state: ScheduleState, names: tuple[str, ...], kept_ms: int | None = None
    ) -> bool:
        """Give ``state`` a definition compiled with the book; False (and a
        definition that fires nothing) when a calendar it names is unknown.
        ``kept_ms``: a kept ``next`` older than an edit's commit (`Spliced`)."""
        missing = next((name for name in names if name not in self.book), None)
        shared = state.definition
        if missing is not None:
            waiting = copy.copy(shared)
            waiting.compiled = _NEVER
            if isinstance(waiting, DagDefinition):  # a DAG's data intervals too
                waiting.unbounded = _NEVER
            state._definition = waiting
            state._aside_made().waiting = missing
            self.spliced.discard(state.id)
            return False
        doc, by_id = self._doc_of(state.def_bytes)
        owner = state.id if by_id else None
        versions = tuple(self._versions.get(n, 0) for n in names)
        days = {n: self.book[n] for n in names}
        bound = self._bound_to(state, doc, owner, versions, days)
        if kept_ms is not None:
            bound = self._spliced(state, doc, owner, names, versions, bound, kept_ms)
        state._definition = bound
        if isinstance(bound.compiled, Spliced):
            self.spliced.add(state.id)
        else:
            self.spliced.discard(state.id)
        if state._aside is not None:
            state._aside.waiting = None
        return True

    def _bound_to(
        self,
        state: ScheduleState,
        doc: Mapping[str, Any],
        owner: str | None,
        versions: tuple[int, ...],
        days: Mapping[str, CalendarDays],
    ) -> Definition:
        """The shared definition compiled with ``days`` (cached by its versions)."""
        key = (state.def_bytes, owner, versions)
        bound = self._bound.get(key)
        if bound is None:
            bound = copy.copy(state.definition)
            bound.compiled = self._compile(state.id, doc, days)
            if isinstance(bound, DagDefinition):  # its data intervals walk the days too
                bound.unbounded = self._compile(state.id, doc, days, bounded=False)
            self._keep(key, bound)
        return bound

    def _spliced(
        self,
        state: ScheduleState,
        doc: Mapping[str, Any],
        owner: str | None,
        names: tuple[str, ...],
        versions: tuple[int, ...],
        bound: Definition,
        kept_ms: int,
    ) -> Definition:
        """``bound`` from the latest edit after ``kept_ms`` on; before it, each stretch
        between two edits by the versions in effect then. ``bound`` itself when no
        version before the edits is known (the schedule waited for a calendar then;
        or a record compaction removed, on a new owner, or one `HISTORY_MAX` dropped):
        the stretches before the latest unknown one go by the one after it."""
        parts = self._history.stretches(names, kept_ms)
        if not parts:
            return bound
        key = (state.def_bytes, owner, versions, tuple((p[0], p[1]) for p in parts))
        spliced = self._bound.get(key)
        if spliced is None:
            befores = [(e, self._bound_to(state, doc, owner, v, d)) for e, v, d in parts]
            spliced = copy.copy(bound)
            spliced.compiled = Spliced([(e, d.compiled) for e, d in befores], bound.compiled)
            if isinstance(spliced, DagDefinition):
                assert isinstance(bound, DagDefinition)
                unbounded = []
                for end_ms, before in befores:
                    assert isinstance(before, DagDefinition)
                    unbounded.append((end_ms, before.unbounded))
                spliced.unbounded = Spliced(unbounded, bound.unbounded)
            self._keep(key, spliced)
        return spliced

    def _keep(self, key: tuple[Any, ...], bound: Definition) -> None:
        if len(self._bound) >= _CACHE_MAX:
            self._bound.clear()
        self._bound[key] = bound

    def _doc_of(self, def_bytes: bytes) -> tuple[Mapping[str, Any], bool]:
        """A definition's JSON and whether its spec depends on the schedule's id
        (parsed once per definition: an edit re-binds thousands that share one)."""
        found = self._docs.get(def_bytes)
        if found is None:
            doc = orjson.loads(def_bytes)
            found = (doc, depends_on_id(doc["spec"], doc["spread_window_s"]))
            if len(self._docs) >= _CACHE_MAX:
                self._docs.clear()
            self._docs[def_bytes] = found
        return found

    def _compile(
        self,
        schedule_id: str,
        doc: Mapping[str, Any],
        days: Mapping[str, CalendarDays],
        bounded: bool = True,
    ) -> CompiledSpec:
        start, end = (doc["start"], doc["end"]) if bounded else (None, None)
        try:
            return compile_spec(
                doc["spec"],
                schedule_id=schedule_id,
                dst=doc["dst"],
                spread_window_s=doc["spread_window_s"],
                start_ms=None if start is None else parse_instant(start),
                end_ms=None if end is None else parse_instant(end),
                calendars=days,
            )
        except UnknownCalendar:  # checked by the caller: cannot happen
            raise AssertionError("a named calendar vanished while binding") from None

    def _rearm(self, state: ScheduleState, now_ms: int, written_ms: int | None = None) -> None:
        """See "Re-arming" in the module docstring. ``written_ms``: the edit's record
        timestamp, when an edit re-arms (its users' instants before it were the
        previous version's)."""
        old_next = state.next_ms
        if state.completed == "max_runs":
            return  # fired all it may: nothing to re-arm (its timers, if any, stay)
        wheel = self._wheel
        wheel.cancel(state)
        handled_ms = state.handled_ms()
        aside = state._aside
        if aside is not None and aside.waiting is not None:
            # Waits: what it had not handled waits with it (handled up to the floor).
            if old_next is not None:
                state.let_pass(min(now_ms, old_next) - 1)
            state.next_ms = None
        else:
            if old_next is None and state.completed == "end":
                # An edit left it no day: an edit may give days back (as a re-upsert).
                floor_ms = now_ms - 1
            elif old_next is None:  # its wait is over
                floor_ms = now_ms - 1 if handled_ms is None else handled_ms
            else:
                floor_ms = min(now_ms, old_next) - 1
            anchor_ms = floor_ms if handled_ms is None else max(floor_ms, handled_ms)
            if written_ms is not None and old_next is not None and old_next < written_ms:
                # Due before the edit was written (held until the calendars were known
                # that fresh, or not yet fired): the version then in effect allowed it,
                # so it keeps its place; only what follows goes by the edit.
                state.next_ms = old_next
            else:
                state.next_ms = state.definition.compiled.next_after(anchor_ms)
            if state.next_ms is None and state.last_fired_ms is not None:
                state.completed = "end"
            elif state.next_ms is not None:
                state.completed = None  # it fires again
        pause = state.pause
        if not state.paused and state.next_ms is not None:
            wheel.arm(state, state.next_ms)
        elif state.paused and pause is not None and pause.until_ms is not None:
            wheel.arm(state, pause.until_ms)
