"""The state of one schedule and of its runs, and its changelog JSON.

Everything a shard knows about a schedule is in a `ScheduleState` and the
`RunState` objects it owns, and every field of them (but the wheel handles,
which are rebuilt) round-trips through the changelog record `encode_schedule`
writes to ``{ns}.schedules``. A restored shard therefore is the shard that
wrote the records, which is what makes failover exact.

The changelog value of a schedule (one record per change, key = schedule id)::

    {"v": 1, "def_bytes": 431,                  # the length of the JSON of "def", last
     "id": "invoice-nightly", "kind": "schedule",
     "paused": false,
     "next": "2026-10-11T00:00:00.000Z",        # next occurrence not yet handled; null: none
     "last_fired": "2026-10-10T00:00:00.000Z",  # latest occurrence fired (or buffered)
     "passed": "2026-10-10T01:00:00.000Z",      # latest one let pass unfired (skipped,
                                                # missed), only when later than last_fired
     "runs": [                                  # in flight (running or waiting to retry)
        {"run_id": "invoice-nightly@2026-10-10T00:00:00.000Z",   # names the occurrence
         "attempt": 2,
         "fired": "...", "deadline": "...",     # of the current attempt
         "retry_at": "...",                     # only while waiting for the next attempt
         "task": "...",                         # only for a DAG task's run
         "series_start": 3,                     # only after a dlq.replay (else 1)
         "cancel": "why",                       # only once a cancel was requested
         "queue": "gpu",                        # only for a worker queue's attempt,
         "partition": 3,                        #   with the partition it went to
         "cancel_owed": "...",                  # only while its cancel awaits its topic:
                                                #   when it was requested
         "watch": {"start_by": "...", ...},     # only under a deadline (`Watch`)
         "outcomes": [{"attempt": 1, "status": "failed", "fired_at": "...",   # first 2, last 3
                       "finished_at": "...", "worker": "w-1",
                       "error": {"type": "...", "message": "..."}}]}],
     "buffered": ["2026-10-10T01:00:00.000Z"],  # occurrences waiting for the run in flight
     "dead": {"invoice-nightly@...": 5},        # recent dead-lettered runs -> last attempt
     "dag": null,                               # DAG run state (see `ScheduleState.dag`)
     "def": {...}}                              # the normalised definition (definition.py)

``runs``, ``buffered``, ``dead``, ``dag`` and ``passed`` are left out when empty, and so are
a run's fields at their usual value (a herd writes one record per fire, so each
field costs). A deleted schedule is a tombstone (null value).

Version 2: a fire writes the state without its definition
------------------------------------------------------------
A schedule's definition changes only with a command, but its state changes at
every fire, retry and result; writing the definition (most of the record) again
each time would make a herd write and restore three times the bytes. So:

- a change made by a command (upsert, pause, ...) and every change of a DAG
  writes the full record above (``"v": 1``): self-contained, as before;
- any other change (a fire, a result, a retry, a timeout) writes the record
  without ``def`` and ``def_bytes``, with ``"v": 2`` and the key of the
  definition's own record in ``def``::

    {"v": 2, "id": "invoice-nightly", "def": "@def/6f1c...",  "paused": false,
     "next": "...", "last_fired": "...", "runs": [...], ...}  # as version 1

- the definition's own record, under key ``@def/`` + 32 hex digits of the
  SHA-256 of its bytes (``@`` is never in a schedule id, so the keys never
  clash), is written before the first version-2 record that refers to it, and
  shared by every schedule of the shard with the same definition::

    {"v": 2, "kind": "definition", "def": {...}}

  The shard counts the schedules that use each definition and writes a
  tombstone for it when none does any more (see `ShardCore`), so compaction
  removes it.

A restore reads both versions (a changelog written before version 2 holds only
version-1 records, and still restores); `decode_schedule` leaves a version-2
state's definition as its key until the caller resolves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from hashlib import sha256
from typing import Any, ClassVar

import orjson

from actors.shard.backfill_state import BackfillState
from actors.shard.dag_book import DagBook, book_json, book_of
from actors.shard.definition import Definition
from actors.shard.restored import restored_definition
from actors.wheel import Node
from topics.timefmt import format_ms, parse_instant

# How many dead-lettered runs a schedule remembers for `dlq.replay` (oldest forgotten).
DEAD_MEMORY = 64

# Bound of the small caches below (emptied when full; they only hold pure values).
_CACHE_MAX = 100_000


class Watch:
    """A run's deadlines (epoch ms, None: no such deadline), the start the shard has
    learnt of, and which alerts are written (`actors.shard.deadlines`). In the run's
    changelog entry as ``"watch": {"start_by", "finish_by", "started", "alerted",
    "done"}`` (the last two lists of ``start``/``finish``; empty ones left out)."""

    __slots__ = ("finish_due_ms", "flags", "start_due_ms", "started_ms")

    _ALERTED: ClassVar[dict[str, int]] = {"start": 1, "finish": 4}
    _DONE: ClassVar[dict[str, int]] = {"start": 2, "finish": 8}

    def __init__(self, start_due_ms: int | None, finish_due_ms: int | None) -> None:
        self.start_due_ms = start_due_ms
        self.finish_due_ms = finish_due_ms
        self.started_ms: int | None = None
        self.flags = 0

    def due_ms(self, kind: str) -> int | None:
        return self.start_due_ms if kind == "start" else self.finish_due_ms

    def alerted(self, kind: str) -> bool:
        return bool(self.flags & self._ALERTED[kind])

    def done(self, kind: str) -> bool:
        return bool(self.flags & self._DONE[kind])

    def mark_alerted(self, kind: str) -> None:
        self.flags |= self._ALERTED[kind]

    def mark_done(self, kind: str) -> None:
        self.flags |= self._DONE[kind]

    def check_ms(self) -> int | None:
        """The earliest deadline still waiting for a judgement by silence, or None."""
        found: int | None = None
        for kind in ("start", "finish"):
            due_ms = self.due_ms(kind)
            if due_ms is not None and not self.flags & (self._ALERTED[kind] | self._DONE[kind]):
                found = due_ms if found is None else min(found, due_ms)
        return found

    def wire(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "start_by": None if self.start_due_ms is None else instant_text(self.start_due_ms),
            "finish_by": None if self.finish_due_ms is None else instant_text(self.finish_due_ms),
        }
        if self.started_ms is not None:
            entry["started"] = instant_text(self.started_ms)
        alerted = [kind for kind in ("start", "finish") if self.alerted(kind)]
        if alerted:
            entry["alerted"] = alerted
        done = [kind for kind in ("start", "finish") if self.done(kind)]
        if done:
            entry["done"] = done
        return entry

    @classmethod
    def from_wire(cls, entry: Mapping[str, Any]) -> Watch:
        start, finish = entry.get("start_by"), entry.get("finish_by")
        watch = cls(
            None if start is None else instant_ms(start),
            None if finish is None else instant_ms(finish),
        )
        started = entry.get("started")
        watch.started_ms = None if started is None else instant_ms(started)
        for kind in entry.get("alerted") or ():
            watch.mark_alerted(kind)
        for kind in entry.get("done") or ():
            watch.mark_done(kind)
        return watch


class RunState(Node):
    """One run in flight: an occurrence (or a DAG task of one) and its current attempt.

    A run is *running* while ``retry_ms`` is None (its timer is the deadline plus
    a margin) and *waiting* otherwise (its timer is the retry instant). Attempts
    of one run keep its ``run_id``; ``series_start`` is the first attempt number
    of the current series (1, or the attempt after the last one before a
    ``dlq.replay``), so the retry budget restarts on a replay while attempt
    numbers keep increasing and (run_id, attempt) stays unique.

    It is its own timer in the shard's wheel (`actors.wheel.Node`): the deadline
    (running) or the retry (waiting), pending while armed.
    """

    __slots__ = (
        "attempt",
        "cancel_reason",
        "deadline_ms",
        "fired_ms",
        "outcomes",
        "placed",
        "retry_ms",
        "run_id",
        "schedule",
        "scheduled_ms",
        "series_start",
        "task",
        "watch",
    )

    def __init__(
        self,
        schedule: ScheduleState,
        run_id: str,
        scheduled_ms: int,
        task: str | None,
        attempt: int,
        series_start: int,
    ) -> None:
        self.schedule = schedule
        self.run_id = run_id
        self.scheduled_ms = scheduled_ms
        self.task = task
        self.attempt = attempt
        self.series_start = series_start
        self.fired_ms = 0
        self.deadline_ms = 0
        self.retry_ms: int | None = None
        # Every failed attempt, JSON-ready; a shared empty tuple until the first (a
        # herd's runs mostly never fail: no list each).
        self.outcomes: Sequence[Mapping[str, Any]] = ()
        self._next = None  # not in the wheel yet (see `Node`)
        # Set once a cancel record for the current attempt was written (run.cancel,
        # overlap cancel_other): its result ends the run whatever it says, no retry.
        self.cancel_reason: str | None = None
        # Where the current attempt was written on a worker queue's topic, None for the
        # default queue (`topics.queues`): its cancel record must follow it there
        # (§6.6, §8.1), whatever the definition or the topic's partition count says
        # by then (a DAG task may have been removed, partitions added).
        self.placed: Placed | None = None
        # Its deadlines and the alerts written for them, under a ``deadline``
        # (`actors.shard.deadlines`); None for a schedule without (the herd's runs).
        self.watch: Watch | None = None

    @property
    def queue(self) -> str | None:
        """The worker queue of the current attempt, None for the default queue."""
        placed = self.placed
        return None if placed is None else placed.queue

    @property
    def failures_in_series(self) -> int:
        return self.attempt - self.series_start + 1


class Placed:
    """Where a worker queue's attempt went: one object only for a queued attempt, so a
    run of the default queue (a herd's) costs one empty slot (docs/DESIGN.md §8.1)."""

    __slots__ = ("cancel_owed", "partition", "queue")

    def __init__(self, queue: str, partition: int | None, cancel_owed: int | None = None) -> None:
        self.queue = queue
        # None only for an attempt restored from a record written before partitions
        # were kept: its cancel goes where the key hashes now, as it did then.
        self.partition = partition
        # When a cancel was requested that the queue topic could not take then (epoch
        # ms), else None; it is written as soon as the topic can (`RunBook.queue_cancel`),
        # until the attempt's deadline.
        self.cancel_owed = cancel_owed


class Aside:
    """What few schedules hold, kept beside a `ScheduleState` only once one of them
    is set: one slot in each of a million schedules instead of three (see
    `ScheduleState`)."""

    __slots__ = (
        "backfill",
        "buffered",
        "completed",
        "dead",
        "fired_count",
        "passed_ms",
        "pause",
        "waiting",
    )

    def __init__(self) -> None:
        self.buffered: list[int] | None = None
        self.dead: dict[str, int] | None = None
        self.passed_ms: int | None = None
        # Occurrences fired so far, counted only for a definition with max_runs.
        self.fired_count = 0
        # Why it fires nothing more ("max_runs", "end"), once it never will again.
        self.completed: str | None = None
        # A pause's note, end and author (`PauseInfo`), or one waiting for the run
        # in flight to end (``pending``).
        self.pause: PauseInfo | None = None
        # Its backfill, running or the last one ended (`actors.shard.backfill`).
        self.backfill: BackfillState | None = None
        # The named calendar it waits for (it names one the shard does not know, so
        # it fires nothing until it comes: `actors.shard.calendars`).
        self.waiting: str | None = None

    def passed_to_spell(self, last_fired_ms: int | None) -> int | None:
        """The ``passed`` a record spells: only while it is later than the last fired."""
        passed_ms = self.passed_ms
        if passed_ms is None or (last_fired_ms is not None and passed_ms <= last_fired_ms):
            return None
        return passed_ms

    def spells(self, last_fired_ms: int | None) -> bool:
        """Whether a record of its schedule spells any of it (not the herd's shape)."""
        return bool(
            self.buffered
            or self.dead
            or self.passed_to_spell(last_fired_ms) is not None
            or self.fired_count
            or self.completed is not None
            or self.pause is not None
            or self.backfill is not None
            or self.waiting is not None
        )


class PauseInfo:
    """What a ``schedule.pause`` said beyond stopping: shown by ``ls``, and ``until``
    armed on the wheel so the schedule resumes by itself exactly once."""

    __slots__ = ("at_ms", "by", "note", "pending", "resumed", "resumed_as_of_ms", "until_ms")

    def __init__(
        self,
        *,
        at_ms: int,
        note: str | None = None,
        until_ms: int | None = None,
        by: str | None = None,
        pending: bool = False,
        resumed: bool = False,
        resumed_as_of_ms: int | None = None,
    ) -> None:
        self.at_ms = at_ms  # when the command was applied
        self.note = note
        self.until_ms = until_ms
        self.by = by
        self.pending = pending  # after_current: waits for the run in flight to end
        # A ``schedule.resume`` applied at ``until_ms`` while the calendars the
        # schedule names were known only as of earlier: it completes (what came due
        # while paused reported skipped) once they are known as of then (§5.7).
        self.resumed = resumed
        # A kept resume this pause replaced: its instant. What came due while paused
        # up to it was the resume's to report skipped, so when this pause ends it is
        # reported so first (never fired by the misfire policy of a pause's end).
        self.resumed_as_of_ms = resumed_as_of_ms

    def says_more(self) -> bool:
        """Anything beyond a bare pause (else no `PauseInfo` is kept)."""
        return (
            self.note is not None
            or self.until_ms is not None
            or self.by is not None
            or self.pending
            or self.resumed_as_of_ms is not None
        )

    def json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"at": instant_text(self.at_ms)}
        if self.note is not None:
            doc["note"] = self.note
        if self.until_ms is not None:
            doc["until"] = instant_text(self.until_ms)
        if self.by is not None:
            doc["by"] = self.by
        if self.pending:
            doc["pending"] = True
        if self.resumed:
            doc["resumed"] = True
        if self.resumed_as_of_ms is not None:
            doc["resumed_as_of"] = instant_text(self.resumed_as_of_ms)
        return doc

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> PauseInfo:
        until = doc.get("until")
        as_of = doc.get("resumed_as_of")
        return cls(
            at_ms=instant_ms(doc["at"]),
            note=doc.get("note"),
            until_ms=None if until is None else instant_ms(until),
            by=doc.get("by"),
            pending=bool(doc.get("pending", False)),
            resumed=bool(doc.get("resumed", False)),
            resumed_as_of_ms=None if as_of is None else instant_ms(as_of),
        )


class ScheduleState(Node):
    """One schedule of the shard: its definition, where it is in time, its runs.

    A shard holds a million of these, most of them idle, so each is kept small:
    ``runs``, ``buffered`` and ``dead`` exist only once used (the properties make
    them on first access; the shard's hot paths read the slots, None when
    empty), the rarely set ones (``buffered``, ``dead``, ``passed_ms``) share one
    `Aside`, and the key and the id's JSON are derived from the id when needed.
    It is its own timer in the shard's wheel (`actors.wheel.Node`), pending while
    its next fire is armed: no second object per schedule.
    """

    __slots__ = (
        "_aside",
        "_definition",
        "_runs",
        "dag",
        "def_bytes",
        "id",
        "last_fired_ms",
        "next_ms",
        "paused",
    )

    def __init__(self, schedule_id: str, def_bytes: bytes, definition: Definition | None) -> None:
        self.id = schedule_id
        self.def_bytes = def_bytes  # normalised definition JSON, spliced into each record
        self._definition = definition  # built from def_bytes on first use after a restore
        self.paused = False
        self.next_ms: int | None = None
        self.last_fired_ms: int | None = None
        self._runs: dict[str, RunState] | None = None
        self._aside: Aside | None = None  # buffered, dead and passed_ms, once one is set
        # --- DAG run state -------------------------------------------------------
        # Reserved for dag.upsert: per DAG run, the state of its tasks. Task runs
        # are ordinary `RunState`s (with ``task`` set) in ``runs``, so attempts,
        # retries, deadlines and the DLQ work for them unchanged; what belongs here
        # is only what a DAG adds (which tasks are done, failed, upstream_failed).
        # It is written to the changelog as "dag" (`dag_book`).
        self.dag: DagBook | None = None
        self._next = None  # not in the wheel yet (see `Node`)

    @property
    def key(self) -> bytes:
        """The key of its records: the id in UTF-8."""
        return self.id.encode()

    @property
    def runs(self) -> dict[str, RunState]:
        """Runs in flight by run id (running, or waiting for their next attempt)."""
        found = self._runs
        if found is None:
            found = self._runs = {}
        return found

    @runs.setter
    def runs(self, runs: dict[str, RunState]) -> None:
        self._runs = runs

    def _aside_made(self) -> Aside:
        aside = self._aside
        if aside is None:
            aside = self._aside = Aside()
        return aside

    @property
    def buffered(self) -> list[int]:
        """Occurrences waiting for the run in flight, oldest first."""
        aside = self._aside_made()
        found = aside.buffered
        if found is None:
            found = aside.buffered = []
        return found

    @buffered.setter
    def buffered(self, buffered: list[int]) -> None:
        self._aside_made().buffered = buffered

    @property
    def buffered_or_none(self) -> list[int] | None:
        """`buffered` if anything was ever buffered, without making one."""
        aside = self._aside
        return None if aside is None else aside.buffered

    @property
    def dead(self) -> dict[str, int]:
        """Recently dead-lettered runs -> their last attempt, oldest first."""
        aside = self._aside_made()
        found = aside.dead
        if found is None:
            found = aside.dead = {}
        return found

    @dead.setter
    def dead(self, dead: dict[str, int]) -> None:
        self._aside_made().dead = dead

    @property
    def dead_or_none(self) -> dict[str, int] | None:
        """`dead` if anything was ever dead-lettered, without making one."""
        aside = self._aside
        return None if aside is None else aside.dead

    @property
    def passed_ms(self) -> int | None:
        """The latest occurrence handled without firing it (skipped or missed; for
        an id created again, its predecessor's latest, see `retired`): with
        ``last_fired_ms``, the floor below which a re-upsert never goes (a run id
        that was reported skipped must not fire later, nor be reported twice)."""
        aside = self._aside
        return None if aside is None else aside.passed_ms

    @passed_ms.setter
    def passed_ms(self, passed_ms: int | None) -> None:
        if passed_ms is None and self._aside is None:
            return  # nothing to forget: no aside made for it
        self._aside_made().passed_ms = passed_ms

    @property
    def pause(self) -> PauseInfo | None:
        """What the pause said (note, until, author), or a pause waiting for the run
        in flight (``pending``); None without either."""
        aside = self._aside
        return None if aside is None else aside.pause

    @pause.setter
    def pause(self, pause: PauseInfo | None) -> None:
        if pause is None and self._aside is None:
            return
        self._aside_made().pause = pause

    @property
    def backfill(self) -> BackfillState | None:
        """Its backfill, running or the last one ended; None if it never had one."""
        aside = self._aside
        return None if aside is None else aside.backfill

    @backfill.setter
    def backfill(self, backfill: BackfillState | None) -> None:
        if backfill is None and self._aside is None:
            return
        self._aside_made().backfill = backfill

    def backfill_running(self) -> list[str] | None:
        """The run ids of its backfill in flight (None: none): they are not the live
        schedule's, so its overlap policy does not count them."""
        aside = self._aside
        if aside is None or aside.backfill is None or not aside.backfill.running:
            return None
        return aside.backfill.running

    @property
    def completed(self) -> str | None:
        """Why it fires nothing more ("max_runs", "end"), or None."""
        aside = self._aside
        return None if aside is None else aside.completed

    @completed.setter
    def completed(self, why: str | None) -> None:
        if why is None and self._aside is None:
            return
        self._aside_made().completed = why

    @property
    def fired_count(self) -> int:
        """Occurrences fired so far (counted for a definition with ``max_runs`` only)."""
        aside = self._aside
        return 0 if aside is None else aside.fired_count

    @fired_count.setter
    def fired_count(self, count: int) -> None:
        if count == 0 and self._aside is None:
            return
        self._aside_made().fired_count = count

    @property
    def waiting(self) -> str | None:
        """The named calendar it waits for (`actors.shard.calendars`), if any."""
        aside = self._aside
        return None if aside is None else aside.waiting

    @property
    def definition(self) -> Definition:
        found = self._definition
        if found is None:
            found = self._definition = restored_definition(self.id, self.def_bytes)
        return found

    def id_json(self) -> str:
        """The id as a JSON string (quotes included), as orjson writes it."""
        schedule_id = self.id
        if schedule_id.isprintable() and '"' not in schedule_id and "\\" not in schedule_id:
            return f'"{schedule_id}"'  # nothing to escape (orjson writes non-ASCII raw)
        return orjson.dumps(schedule_id).decode()

    def set_definition(self, def_bytes: bytes, definition: Definition) -> None:
        self.def_bytes = def_bytes
        self._definition = definition

    def let_pass(self, scheduled_ms: int) -> None:
        """The occurrence at ``scheduled_ms`` was handled without firing it."""
        passed_ms = self.passed_ms
        if passed_ms is None or scheduled_ms > passed_ms:
            self.passed_ms = scheduled_ms

    def handled_ms(self) -> int | None:
        """The latest occurrence handled (fired, buffered, skipped or missed), if any."""
        last_ms, passed_ms = self.last_fired_ms, self.passed_ms
        if passed_ms is None:
            return last_ms
        return passed_ms if last_ms is None else max(last_ms, passed_ms)

    def grace_ms(self) -> int:
        """Its misfire grace; 0 if its definition cannot be built (a zone the zone
        database lost): a delete of such a schedule must still go through."""
        try:
            return self.definition.grace_ms
        except Exception:
            return 0

    def remember_dead(self, run_id: str, last_attempt: int) -> None:
        dead = self.dead
        dead.pop(run_id, None)
        dead[run_id] = last_attempt
        while len(dead) > DEAD_MEMORY:
            del dead[next(iter(dead))]


def _passed_to_spell(state: ScheduleState) -> int | None:
    """The ``passed`` its record spells (`Aside.passed_to_spell`)."""
    aside = state._aside
    return None if aside is None else aside.passed_to_spell(state.last_fired_ms)


def encode_schedule(state: ScheduleState) -> bytes:
    """The changelog value of ``state`` (see the module docstring).

    A herd writes one per fire, so the usual shape (nothing buffered, dead or
    DAG, runs that are plain first attempts) is spelled directly, byte for byte
    what orjson writes for it; any other state goes through orjson.
    """
    aside = state._aside
    if state.dag is not None or (aside is not None and aside.spells(state.last_fired_ms)):
        return _encode_general(state)
    id_json = state.id_json()
    runs_json = ""
    if state._runs:
        runs_json = _runs_json(state, id_json)
        if not runs_json:
            return _encode_general(state)
    def_bytes = state.def_bytes
    next_ms = state.next_ms
    last_ms = state.last_fired_ms
    next_json = "null" if next_ms is None else f'"{instant_text(next_ms)}"'
    last_json = "null" if last_ms is None else f'"{instant_text(last_ms)}"'
    paused_json = "true" if state.paused else "false"
    head = (
        f'{{"v":1,"def_bytes":{len(def_bytes)},"id":{id_json},"kind":"schedule",'
        f'"paused":{paused_json},"next":{next_json},"last_fired":{last_json}{runs_json},"def":'
    )
    return head.encode() + def_bytes + b"}"


def _encode_general(state: ScheduleState) -> bytes:
    next_ms = state.next_ms
    last_ms = state.last_fired_ms
    def_bytes = state.def_bytes
    doc: dict[str, Any] = {
        "v": 1,
        # The definition goes last and its length first, so a restore can parse the
        # small rest of the record and slice the definition's bytes off its tail
        # (parsing the definition would cost most of a restore, for nothing).
        "def_bytes": len(def_bytes),
        "id": state.id,
        "kind": "schedule",
        "paused": state.paused,
        "next": None if next_ms is None else instant_text(next_ms),
        "last_fired": None if last_ms is None else instant_text(last_ms),
    }
    _spell_state(doc, state)
    doc["def"] = orjson.Fragment(def_bytes)
    return orjson.dumps(doc)


def _encode_run(run: RunState) -> dict[str, Any]:
    # Fields at their usual value are left out: a herd writes one of these per fire.
    entry: dict[str, Any] = {
        "run_id": run.run_id,
        "attempt": run.attempt,
        "fired": instant_text(run.fired_ms),
        "deadline": instant_text(run.deadline_ms),
    }
    if run.task is not None:
        entry["task"] = run.task
    if run.series_start != 1:
        entry["series_start"] = run.series_start
    if run.retry_ms is not None:
        entry["retry_at"] = instant_text(run.retry_ms)
    if run.outcomes:
        entry["outcomes"] = run.outcomes
    if run.cancel_reason is not None:
        entry["cancel"] = run.cancel_reason
    placed = run.placed
    if placed is not None:
        entry["queue"] = placed.queue
        if placed.partition is not None:
            entry["partition"] = placed.partition
        if placed.cancel_owed is not None:
            entry["cancel_owed"] = instant_text(placed.cancel_owed)
    if run.watch is not None:
        entry["watch"] = run.watch.wire()
    return entry


DEF_KEY_PREFIX = b"@def/"  # "@" is never in a schedule id: no key of a schedule starts so
_DEF_HEAD = b'{"v":2,"kind":"definition","def":'
_def_keys: dict[bytes, str] = {}


def definition_key(def_bytes: bytes) -> str:
    """The changelog key of the record of the definition ``def_bytes`` (as text)."""
    found = _def_keys.get(def_bytes)
    if found is None:
        if len(_def_keys) >= _CACHE_MAX:
            _def_keys.clear()
        found = _def_keys[def_bytes] = DEF_KEY_PREFIX.decode() + sha256(def_bytes).hexdigest()[:32]
    return found


def encode_definition(def_bytes: bytes) -> bytes:
    """The changelog value of a definition's own record."""
    return _DEF_HEAD + def_bytes + b"}"


def decode_definition(value: bytes) -> bytes:
    """The definition's bytes from its own record (sliced, not parsed).

    Raises ``ValueError`` on a record this version did not write.
    """
    if value.startswith(_DEF_HEAD) and value.endswith(b"}"):
        return intern_bytes(value[len(_DEF_HEAD) : -1])
    doc = orjson.loads(value)
    if type(doc) is not dict or doc.get("v") != 2 or doc.get("kind") != "definition":
        raise ValueError("not a definition record of version 2")
    return intern_bytes(orjson.dumps(doc["def"]))


def is_definition_key(key: bytes) -> bool:
    return key.startswith(DEF_KEY_PREFIX)


FireMiddles = dict[tuple[bytes, bool, int | None, int | None], str]
"""`encode_fire`'s memo for one batch: the text between a record's id and its runs
(definition key, paused, next and last fire), by what it is made of."""


def encode_fire(state: ScheduleState, middles: FireMiddles | None = None) -> bytes:
    """The version-2 changelog value of ``state``: its state without its definition.

    The usual shape is spelled directly, byte for byte what orjson writes for it
    (as `encode_schedule`); any other state goes through orjson. A herd writes one
    per fire, so the instants' texts are looked up in `instant_text`'s cache inline.

    ``middles``: a memo shared by the records of one batch (`ShardCore`'s changelog
    pass). A herd's schedules fired in one turn share their definition and their
    instants, so the text between the id and the runs is spelled once for the batch
    and looked up for each record, rather than spelled again by every fire.
    """
    aside = state._aside
    if state.dag is not None or (aside is not None and aside.spells(state.last_fired_ms)):
        return _encode_fire_general(state)
    id_json = state.id_json()
    runs = state._runs
    runs_json = ""
    if runs:
        if len(runs) == 1:  # a herd's fire: one plain run, as `_runs_json` spells it
            for run in runs.values():
                if (
                    run.task is None
                    and run.series_start == 1
                    and run.retry_ms is None
                    and not run.outcomes
                    and run.cancel_reason is None
                    and run.placed is None
                    and run.watch is None
                ):
                    tail = _run_tail(run.attempt, run.fired_ms, run.deadline_ms)
                    runs_json = (
                        f',"runs":[{{"run_id":{id_json[:-1]}{run.run_id[len(state.id) :]}{tail}'
                    )
        if not runs_json:
            runs_json = _runs_json(state, id_json)
            if not runs_json:
                return _encode_fire_general(state)
    if middles is None:
        middle = _middle(state.def_bytes, state.paused, state.next_ms, state.last_fired_ms)
    else:
        made_of = (state.def_bytes, state.paused, state.next_ms, state.last_fired_ms)
        found = middles.get(made_of)
        if found is None:
            found = middles[made_of] = _middle(*made_of)
        middle = found
    return f'{{"v":2,"id":{id_json},{middle}{runs_json}}}'.encode()


def _middle(def_bytes: bytes, paused: bool, next_ms: int | None, last_ms: int | None) -> str:
    """What a version-2 record spells between its id and its runs."""
    texts = _texts
    next_text = None if next_ms is None else texts.get(next_ms) or instant_text(next_ms)
    last_text = None if last_ms is None else texts.get(last_ms) or instant_text(last_ms)
    next_json = "null" if next_text is None else f'"{next_text}"'
    last_json = "null" if last_text is None else f'"{last_text}"'
    return (
        f'"def":"{_def_keys.get(def_bytes) or definition_key(def_bytes)}",'
        f'"paused":{"true" if paused else "false"},"next":{next_json},'
        f'"last_fired":{last_json}'
    )


_last_tail: list[Any] = [None, None]  # (attempt, fired, deadline), its text


def _run_tail(attempt: int, fired_ms: int, deadline_ms: int) -> str:
    """What a herd's one-run record spells after the run id: the same for every run
    a tick fires with one timeout, so the last one is kept."""
    key = (attempt, fired_ms, deadline_ms)
    if _last_tail[0] == key:
        tail: str = _last_tail[1]
        return tail
    texts = _texts
    tail = (
        f'","attempt":{attempt},'
        f'"fired":"{texts.get(fired_ms) or instant_text(fired_ms)}",'
        f'"deadline":"{texts.get(deadline_ms) or instant_text(deadline_ms)}"}}]'
    )
    _last_tail[0], _last_tail[1] = key, tail
    return tail


def full_size(fire_value: bytes, def_bytes: bytes) -> int:
    """The length of `encode_schedule` of the state whose `encode_fire` is ``fire_value``.

    Both spell the same fields in the same order, but for the head and the
    definition: version 1 has ``"def_bytes":N,`` and ``"kind":"schedule",`` and
    ends with ``,"def":`` and the definition; version 2 has ``"def":"@def/`` and
    32 hex digits and ``",`` (46 bytes).
    """
    n = len(def_bytes)
    return len(fire_value) - 46 + (12 + len(str(n)) + 1) + 18 + 7 + n


def _spell_state(doc: dict[str, Any], state: ScheduleState) -> None:
    """Add what a general record spells after its instants (both versions alike)."""
    passed_ms = _passed_to_spell(state)
    if passed_ms is not None:
        doc["passed"] = instant_text(passed_ms)
    if state._runs:
        doc["runs"] = [_encode_run(run) for run in state._runs.values()]
    buffered, dead = state.buffered_or_none, state.dead_or_none
    if buffered:
        doc["buffered"] = [instant_text(o) for o in buffered]
    if dead:
        doc["dead"] = dead
    if state.dag is not None:
        doc["dag"] = book_json(state.dag)
    aside = state._aside
    if aside is not None:
        if aside.fired_count:
            doc["fired_count"] = aside.fired_count
        if aside.completed is not None:
            doc["completed"] = aside.completed
        if aside.pause is not None:
            doc["pause"] = aside.pause.json()
        if aside.backfill is not None:
            doc["backfill"] = aside.backfill.json()
        if aside.waiting is not None:
            doc["waiting"] = aside.waiting


def _encode_fire_general(state: ScheduleState) -> bytes:
    next_ms = state.next_ms
    last_ms = state.last_fired_ms
    doc: dict[str, Any] = {
        "v": 2,
        "id": state.id,
        "def": definition_key(state.def_bytes),
        "paused": state.paused,
        "next": None if next_ms is None else instant_text(next_ms),
        "last_fired": None if last_ms is None else instant_text(last_ms),
    }
    _spell_state(doc, state)
    return orjson.dumps(doc)


def _runs_json(state: ScheduleState, id_json: str) -> str:
    """``,"runs":[...]`` of plain first-series runs, spelled directly; "" if one is not.

    ``id_json`` is ``state.id_json()``.
    """
    run_prefix = id_json[:-1]  # a run id is the id, "@" and an instant: nothing to escape
    at = len(state.id)
    texts = _texts
    entries = []
    for run in state.runs.values():
        if (
            run.task is not None
            or run.series_start != 1
            or run.retry_ms is not None
            or run.outcomes
            or run.cancel_reason is not None
            or run.placed is not None
            or run.watch is not None
        ):
            return ""
        fired_ms = run.fired_ms
        deadline_ms = run.deadline_ms
        entries.append(
            f'{{"run_id":{run_prefix}{run.run_id[at:]}","attempt":{run.attempt},'
            f'"fired":"{texts.get(fired_ms) or instant_text(fired_ms)}",'
            f'"deadline":"{texts.get(deadline_ms) or instant_text(deadline_ms)}"}}'
        )
    return f',"runs":[{",".join(entries)}]'


def decode_schedule(
    value: bytes, definitions: Mapping[bytes, bytes] | None = None
) -> ScheduleState:
    """A schedule from its changelog value (either version), without timers.

    A version-2 record names its definition's record: with ``definitions`` (key
    -> the definition's bytes, as `decode_definition` returns them) it is looked
    up there; without, the state's ``def_bytes`` is left as that key (starting
    with `DEF_KEY_PREFIX`, never the start of a definition's JSON) for the caller
    to resolve, as `ShardCore.finish_restore` does once every record is read.

    Raises ``ValueError`` (or ``KeyError``/``TypeError``) on a record this version
    did not write, or a version-2 record whose definition is not in ``definitions``.
    """
    if value.startswith(_HEAD):  # version 1 as `encode_schedule` lays it out
        doc, def_bytes = _split(value)
        version = doc.get("v")
    else:
        doc = orjson.loads(value)
        if type(doc) is not dict:
            raise ValueError("not a schedule record: not a JSON object")
        version = doc.get("v")
        def_bytes = orjson.dumps(doc["def"]) if version == 1 else b""
    if version == 2 and "kind" not in doc:
        key = doc["def"].encode()
        if not key.startswith(DEF_KEY_PREFIX):
            raise ValueError(f"def: not the key of a definition record: {key!r}")
        if definitions is None:
            def_bytes = intern_bytes(key)
        else:
            found = definitions.get(key)
            if found is None:
                raise ValueError(f"its definition record {key.decode()} is missing")
            def_bytes = found
    elif version == 1 and doc.get("kind") == "schedule":
        def_bytes = intern_bytes(def_bytes)
    else:
        raise ValueError(f"not a schedule record of version 1 or 2: v={version!r}")
    state = ScheduleState(doc["id"], def_bytes, None)
    state.paused = doc["paused"]
    text = doc["next"]
    state.next_ms = None if text is None else instant_ms(text)
    text = doc["last_fired"]
    state.last_fired_ms = None if text is None else instant_ms(text)
    runs = doc.get("runs")
    if runs:
        at = len(state.id) + 1  # the scheduled instant is spelled inside the run id
        for entry in runs:
            run_id = entry["run_id"]
            if len(entry) == _PLAIN_RUN_FIELDS:  # the four every run has, nothing else
                run = RunState(
                    state, run_id, instant_ms(run_id[at : at + 24]), None, entry["attempt"], 1
                )
                run.fired_ms = instant_ms(entry["fired"])
                run.deadline_ms = instant_ms(entry["deadline"])
                state.runs[run_id] = run
                continue
            run = RunState(
                state,
                run_id,
                instant_ms(run_id[at : at + 24]),
                entry.get("task"),
                entry["attempt"],
                entry.get("series_start", 1),
            )
            run.fired_ms = instant_ms(entry["fired"])
            run.deadline_ms = instant_ms(entry["deadline"])
            retry_at = entry.get("retry_at")
            run.retry_ms = None if retry_at is None else instant_ms(retry_at)
            run.outcomes = entry.get("outcomes") or ()
            run.cancel_reason = entry.get("cancel")
            queue = entry.get("queue")
            if queue is not None:
                owed = entry.get("cancel_owed")
                run.placed = Placed(
                    queue, entry.get("partition"), None if owed is None else instant_ms(owed)
                )
            watch = entry.get("watch")
            if watch is not None:
                run.watch = Watch.from_wire(watch)
            state.runs[run_id] = run
    if not _RARE_FIELDS.isdisjoint(doc):
        _decode_rare_fields(doc, state)
    return state


# A run's fields besides run_id, attempt, fired and deadline, and a schedule's besides
# v, id, def, paused, next, last_fired and runs, are each set by a capability most
# schedules never use (a retry, a queue, a deadline, a pause, max_runs, a backfill, a
# calendar). A record without any is decoded without looking each one up.
_PLAIN_RUN_FIELDS = 4
_RARE_FIELDS = frozenset(
    {"passed", "buffered", "dead", "dag", "fired_count", "completed", "pause"}
    | {"backfill", "waiting"}
)


def _decode_rare_fields(doc: dict[str, Any], state: ScheduleState) -> None:
    """`decode_schedule`'s part for the fields in `_RARE_FIELDS` (each absent one left
    at the fresh state's default)."""
    text = doc.get("passed")
    state.passed_ms = None if text is None else instant_ms(text)
    buffered = doc.get("buffered")
    if buffered:
        state.buffered = [instant_ms(text) for text in buffered]
    dead = doc.get("dead")
    if dead:
        state.dead = dead
    dag = doc.get("dag")
    if dag is not None:
        state.dag = book_of(dag)
    state.fired_count = doc.get("fired_count", 0)
    state.completed = doc.get("completed")
    pause = doc.get("pause")
    if pause is not None:
        state.pause = PauseInfo.of(pause)
    backfill = doc.get("backfill")
    if backfill is not None:
        state._aside_made().backfill = BackfillState.of(backfill)
    waiting = doc.get("waiting")
    if waiting is not None:
        state._aside_made().waiting = waiting


_V2_ID = b'{"v":2,"id":"'
_V2_DEF = b'","def":"@def/'
_V2_IDLE = b'","paused":false,"next":"'
_V2_LAST = b'","last_fired":"'
_V2_NEVER = b'","last_fired":null}'
# Offsets after the id's closing quote's start (the end of the key), as `encode_fire` lays
# out an idle record: the definition's key (5 + 32 bytes), the next instant (24 bytes),
# then either the last instant and '"}' or ``null}``.
_IDLE_DEF_AT = 9  # "@def/..." starts 9 bytes into _V2_DEF
_IDLE_PAUSED_AT = 46  # len(_V2_DEF) + 32 hex digits
_IDLE_NEXT_AT = 71  # + len(_V2_IDLE)
_IDLE_TAIL_AT = 95  # + 24
_IDLE_FIRED_SIZE = 137  # _IDLE_TAIL_AT + len(_V2_LAST) + 24 + 2
_IDLE_NEVER_SIZE = 115  # _IDLE_TAIL_AT + len(_V2_NEVER)
# A herd's record with its one plain run in flight (`encode_fire`'s inline spelling):
# the idle record's last instant, then the run, whose id is the key, "@" and 24 bytes.
_V2_RUNS = b'","runs":[{"run_id":"'
_RUN_AT = _IDLE_TAIL_AT + 40 + 21  # the run id: after the last instant and _V2_RUNS
_RUN_ATTEMPT = b'","attempt":'
_RUN_FIRED = b',"fired":"'
_RUN_DEADLINE = b'","deadline":"'
_RUN_END = b'"}]}'
_new_state = object.__new__


def decode_idle(key: bytes, value: bytes) -> ScheduleState | None:
    """`decode_schedule` of the commonest records of a restore, without a JSON parser:
    version 2, not paused, nothing buffered, dead or let pass, id equal to the key
    with nothing to escape, and nothing in flight or one plain run (a first series,
    not waiting to retry, no outcomes, no cancel: a herd's fire record, which the
    parser read at 9.6 us and this at 4). None for anything else (then use
    `decode_schedule`).

    A million idle schedules are a million of these, so every test is a
    ``startswith`` at an offset (no slice is built to be compared), the instants
    come from the cache of `_instant_ms_of` when there, and the state is built
    without calling ``__init__`` (the same slots, set here).
    """
    at = 13 + len(key)  # the end of the id: 13 is len(_V2_ID)
    size = len(value) - at
    one_run = size > _IDLE_FIRED_SIZE and value.startswith(_V2_RUNS, at + _IDLE_TAIL_AT + 40)
    if size == _IDLE_FIRED_SIZE or one_run:
        if not value.startswith(_V2_LAST, at + _IDLE_TAIL_AT):
            return None
        if not (value.endswith(_RUN_END) if one_run else value.endswith(b'"}')):
            return None
        text = value[at + _IDLE_TAIL_AT + 16 : at + _IDLE_TAIL_AT + 40]
        last_ms = _instants_of.get(text) or _instant_ms_of(text)
        if last_ms is None:
            return None
    elif size == _IDLE_NEVER_SIZE:
        if not value.endswith(_V2_NEVER):
            return None
        last_ms = None
    else:
        return None
    if not (
        value.startswith(_V2_ID)
        and value.startswith(key, 13)
        and value.startswith(_V2_DEF, at)
        and value.startswith(_V2_IDLE, at + _IDLE_PAUSED_AT)
    ):
        return None
    text = value[at + _IDLE_NEXT_AT : at + _IDLE_TAIL_AT]
    next_ms = _instants_of.get(text) or _instant_ms_of(text)
    if next_ms is None:
        return None
    def_key = value[at + _IDLE_DEF_AT : at + _IDLE_PAUSED_AT]
    state: ScheduleState = _new_state(ScheduleState)
    state.id = key.decode()
    state.def_bytes = _interned.get(def_key) or intern_bytes(def_key)
    state._definition = None
    state.paused = False
    state.next_ms = next_ms
    state.last_fired_ms = last_ms
    state._runs = state._aside = state.dag = state._next = None
    if one_run and not _one_run(state, key, value, at + _RUN_AT):
        return None
    return state


def _one_run(state: ScheduleState, key: bytes, value: bytes, at: int) -> bool:
    """Read the plain run whose id starts at ``at`` into ``state`` (`decode_idle`);
    False if the record is not laid out so."""
    if not (value.startswith(key, at) and value.startswith(b"@", at + len(key))):
        return False
    at += len(key) + 1  # the scheduled instant
    if not value.startswith(_RUN_ATTEMPT, at + 24):
        return False
    digits_at = at + 24 + len(_RUN_ATTEMPT)
    comma = value.find(b",", digits_at, digits_at + 10)
    if comma < 0 or not value[digits_at:comma].isdigit():
        return False
    if not (
        value.startswith(_RUN_FIRED, comma)
        and value.startswith(_RUN_DEADLINE, comma + 34)
        and len(value) == comma + 72 + len(_RUN_END)
    ):
        return False
    scheduled = value[at : at + 24]
    scheduled_ms = _instant_ms_of(scheduled)
    fired_ms = _instant_ms_of(value[comma + 10 : comma + 34])
    deadline_ms = _instant_ms_of(value[comma + 48 : comma + 72])
    if scheduled_ms is None or fired_ms is None or deadline_ms is None:
        return False
    run_id = f"{state.id}@{scheduled.decode()}"
    run = RunState(state, run_id, scheduled_ms, None, int(value[digits_at:comma]), 1)
    run.fired_ms = fired_ms
    run.deadline_ms = deadline_ms
    state._runs = {run_id: run}
    return True


_second_ms_of: dict[bytes, int] = {}
# Instants read by a restore -> ONE int object each: a herd's schedules share their
# next and last instants, and an int of that size is 32 bytes apiece otherwise.
_instants_of: dict[bytes, int] = {}
_INSTANTS_MAX = 16_384


def _instant_ms_of(text: bytes) -> int | None:
    """`instant_ms` of ``YYYY-MM-DDTHH:MM:SS.mmmZ`` as bytes; None if not that form."""
    found = _instants_of.get(text)
    if found is not None:
        return found
    if text[19:20] != b"." or text[23:24] != b"Z" or not text[20:23].isdigit():
        return None
    second = text[:19]
    base = _second_ms_of.get(second)
    if base is None:
        try:
            base = parse_instant(second.decode() + "Z")
        except ValueError:
            return None
        if len(_second_ms_of) >= _CACHE_MAX:
            _second_ms_of.clear()
        _second_ms_of[second] = base
    found = base + int(text[20:23])
    if len(_instants_of) >= _INSTANTS_MAX:
        _instants_of.clear()
    _instants_of[text] = found
    return found


_HEAD = b'{"v":1,"def_bytes":'
_DEF_KEY = b',"def":'


def _split(value: bytes) -> tuple[dict[str, Any], bytes]:
    """The record without its definition (parsed), and the definition's JSON bytes.

    The fast path reads the layout `encode_schedule` writes; any other layout of
    the same JSON (a record rewritten by a tool) is parsed whole.
    """
    if value.startswith(_HEAD):
        comma = value.find(b",", len(_HEAD))
        digits = value[len(_HEAD) : comma]
        if comma > 0 and digits.isdigit():
            start = len(value) - 1 - int(digits)
            key_at = start - len(_DEF_KEY)
            if key_at > 0 and value[key_at:start] == _DEF_KEY and value[-1:] == b"}":
                return orjson.loads(value[:key_at] + b"}"), value[start:-1]
    doc = orjson.loads(value)
    return doc, orjson.dumps(doc["def"])


_interned: dict[bytes, bytes] = {}


def intern_bytes(data: bytes) -> bytes:
    """One shared object per distinct definition: a million schedules restored from
    the changelog that say the same thing hold one copy of it, not a million."""
    found = _interned.get(data)
    if found is None:
        if len(_interned) >= _CACHE_MAX:
            _interned.clear()
        found = _interned[data] = data
    return found


_second_prefix: dict[int, str] = {}
_MILLIS = [f".{ms:03d}Z" for ms in range(1000)]


_texts: dict[int, str] = {}
# `instant_text`'s cache, for a hot path to read inline: ``get(ms) or instant_text(ms)``.
INSTANT_TEXTS = _texts


def instant_text(instant_ms: int) -> str:
    """`format_ms` with a cache: a herd fires thousands of runs per second and each
    run and changelog record carries several instants of that same second."""
    text = _texts.get(instant_ms)
    if text is not None:
        return text
    if len(_texts) >= _CACHE_MAX:
        _texts.clear()
    text = _texts[instant_ms] = _instant_text(instant_ms)
    return text


def _instant_text(instant_ms: int) -> str:
    second, ms = divmod(instant_ms, 1000)
    prefix = _second_prefix.get(second)
    if prefix is None:
        if len(_second_prefix) >= _CACHE_MAX:
            _second_prefix.clear()
        prefix = _second_prefix[second] = format_ms(second * 1000)[:19]
    return prefix + _MILLIS[ms]


_second_ms: dict[str, int] = {}


def instant_ms(text: str) -> int:
    """`parse_instant` with a fast path for the exact form `format_ms` writes.

    A restore parses an instant or two per record, mostly of the same few
    seconds; ``YYYY-MM-DDTHH:MM:SS.mmmZ`` is read as a cached second plus the
    milliseconds instead of through ``datetime.fromisoformat``.
    """
    if len(text) == 24 and text[19] == "." and text[23] == "Z":
        second = text[:19]
        base = _second_ms.get(second)
        if base is None:
            base = parse_instant(second + "Z")
            if len(_second_ms) >= _CACHE_MAX:
                _second_ms.clear()
            _second_ms[second] = base
        millis = text[20:23]
        if millis.isdigit():
            return base + int(millis)
    return parse_instant(text)
