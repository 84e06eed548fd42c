"""The schedule actor's behaviour for one shard: a pure state machine.

Rules of this package
---------------------
Everything that decides what a shard writes lives in this package, and nothing
in it does I/O: no Kafka, no asyncio, no clock. Time comes in as ``now_ms``,
records come in as `InRecord`, and the three entry points return the
`OutRecord`\\ s to write::

    apply(record, now_ms)   a record of {ns}.commands[p] or {ns}.results[p]
    advance(now_ms)         what came due: fires, retries, timeouts
    restore(key, value)     one record of {ns}.schedules[p], in offset order,
    finish_restore(now_ms)  ... then this once, before anything else

The runtime writes the returned records and the consumed offsets in ONE Kafka
transaction, so a crash between two calls loses nothing and repeats nothing:
the next owner restores exactly the state that emitted what the topics hold.
Nothing raises out of `apply` or `advance`: a command that cannot be applied,
for whatever reason (including a bug here), becomes a ``{ns}.rejected`` record
and the partition moves on.

Theory of operation
-------------------
The shard owns the schedules whose id murmur2-hashes to its partition
(`routing`); other commands are forwarded there. Each schedule is a
`ScheduleState` (see `state` for the fields and their changelog JSON): its
definition, the next occurrence not yet handled (``next_ms``), the last one
fired, whether it is paused, its runs in flight with their attempts and
deadlines, the occurrences buffered behind them, and recently dead runs.

One hierarchical timing wheel holds every instant the shard waits for: each
schedule's next occurrence (item: the `ScheduleState`), each running attempt's
deadline plus `TIMEOUT_MARGIN_MS`, and each retry (item: the `RunState`). Each
item is its own timer (`actors.wheel.Node`): no second object per schedule or run.
`advance` pops what is due and acts:

- an occurrence fires (`misfire` decides what happens to a backlog beyond the
  grace period, `overlap` what happens while a run is in flight); run id
  ``{id}@{scheduled_at}``, attempt 1, deadline ``fired + timeout_s``; never
  before its scheduled instant;
- a deadline passes without a result: the shard writes ``timed_out`` for the
  attempt and treats it as failed;
- a retry comes due: attempt n+1 of the same run id is emitted.

Results of attempts (from workers) end a run (``succeeded``, ``cancelled``) or
fail an attempt (``failed``, ``timed_out``): `retry` gives the backoff, or the
run goes to the DLQ with every attempt's outcome. A result whose (run_id,
attempt) is not the current attempt of a run in flight is ignored, which makes
redelivered, late and self-written results harmless.

Every change to a schedule writes its state to the changelog in the same
returned batch as the records it caused (one record per schedule per batch):
the full record (definition included, version 1) after a command, and after a
fire, a result or a retry the record without its definition (version 2), whose
definition has its own record, written before the first version-2 record that
names it and tombstoned when no schedule uses it any more (see `state`).

Within one `advance`, attempts' timers are handled before occurrences (each in
due order), so what happens never depends on the order in which timers were
added, which a restored shard cannot reproduce.

Where things are: this module is the boundary (entry points, dispatch, the
changelog's serialisation); the rest of the core is parts it composes, each a plain
object that takes the batch and its collaborators in its constructor, wired once
in `ShardCore.__init__`:

- `batch`: the `Batch` every part writes into (the records, the schedules changed,
  the lateness, the counters) and the definitions' own records (`Definitions`);
- `runs`: `RunBook`, the life of a run (firing what the wheel hands back,
  attempts, retries, timeouts, the DLQ, the results the shard writes);
- `schedule_commands`: `ScheduleCommands`, the schedule commands;
- `dag_shard`: `DagRuns`, the DAG commands and DAG runs, on the run book's runs;
- `cancel`: `RunCancels`, ``run.cancel`` and ``cancel_other``;
- `trim`: `Trimming`, the step that makes an oversized schedule's record fit.

The run book calls the DAG runs and the cancels, which build on it, through the
two small interfaces it states (`runs.DagTasks`, `runs.Cancels`; the cancels ask
the DAG runs through `cancel.DagCancel`), so the modules import downwards only.
`misfire`, `overlap`, `retry` and `routing` are the policies as pure functions;
`state` and `definition` are the data and its changelog JSON.

Bounds (a changelog record must never outgrow what the broker accepts)
-----------------------------------------------------------------------
A schedule's changelog record holds its runs in flight with their attempts'
outcomes, its buffered occurrences and its recent dead runs. A record the broker
refuses fails the transaction, and a rebuilt shard would retry the same batch
forever; so every part of it is bounded:

- runs in flight: under ``overlap: allow`` at most
  `overlap.ALLOW_MAX_IN_FLIGHT` (100), beyond which occurrences are reported
  ``skipped`` with the reason; the other policies keep one run in flight;
- buffered occurrences: at most `overlap.BUFFER_ALL_MAX` (1,000);
- outcomes per run: the first `runs.OUTCOMES_FIRST` (2) and the last
  `runs.OUTCOMES_LAST` (3) attempts (each names its attempt number), also in the
  DLQ record; an error message is cut to `runs.ERROR_TEXT_MAX_CHARS` (256), its
  type, other fields and the worker name to `runs.TEXT_MAX_CHARS` (128);
- dead runs remembered: `state.DEAD_MEMORY` (64).

The definition (up to a 256 KiB command) comes on top, so as a last line of
defence no changelog record above `CHANGELOG_MAX_BYTES` (512 KiB) is ever
written: the state is trimmed until it fits and a ``{ns}.rejected`` record says
what was given up (see `trim`: a step of its own, before the records that are
kept are serialised, which only reads state); the schedule keeps firing.

Decisions (what a Temporal or Airflow user would expect)
--------------------------------------------------------
- ``schedule.upsert`` of a new id starts from the instant the command was
  produced (the record's timestamp) when the shard applies it later, so an
  occurrence between the two is not lost silently: it fires late, or the
  misfire policy reports it ``missed``. The look-back is at most
  `schedule_commands.UPSERT_LOOKBACK_GRACES` grace periods (a producer's clock
  far behind must not replay a day); a timestamp of 0 (unknown) means now.
- ``schedule.upsert`` of an existing id keeps its runs, buffer, pause and its
  place in time: occurrences of the new definition at or before the last one
  handled (fired, or reported skipped or missed), or before now, never fire (a
  re-upsert never refires anything, nor reports an occurrence twice).
- ``schedule.pause`` stops firing; runs in flight and their retries go on.
  ``schedule.resume`` does NOT fire what came due while paused (Temporal): those
  occurrences are reported ``skipped`` (error type ``Paused``; folded like
  misfires) and firing resumes with the first occurrence after the resume.
- ``schedule.trigger`` fires once now, scheduled at the trigger instant (so the
  run id names that instant), outside the spec; the overlap policy applies, as
  for Temporal's trigger. What is due by the trigger's instant is handled
  first (as `advance` would), then a trigger at the very instant of an
  occurrence of the spec is rejected (they would share the run id; the
  occurrence is handled by its own rules, whatever the overlap policy).
- ``schedule.delete`` writes a tombstone and cancels every timer; results that
  arrive afterwards are ignored, buffered occurrences are reported ``skipped``.
  An id deleted and created again is a new schedule (EventBridge, Temporal), but
  its run ids name the same instants, so it never fires one its predecessor
  handled: the delete leaves that instant's floor for as long as the look-back
  of a definition with a grace of up to an hour could reach it (see `retired`,
  which states the limit beyond).
- ``dlq.replay`` starts the dead run again, ignoring overlap (like a retry):
  attempt numbers continue after the last one (so (run_id, attempt) stays unique
  on every topic) with a fresh budget of ``retry.max_attempts`` attempts. The
  shard remembers the last `state.DEAD_MEMORY` dead runs per schedule; others
  are rejected with a reason.
- ``run.cancel`` and ``cancel_other`` write a cancel record to ``{ns}.runs`` for
  the attempt in flight (see `cancel`); the worker stops the job and writes the
  attempt's one ``cancelled`` result, which ends the run (no retry, whatever it
  says). ``cancel_other`` starts the new run once the old one has ended.
- DAGs (``dag.upsert``, ``dag.clear``) are schedules whose occurrences start DAG
  runs; their task runs are ordinary runs of `runs`. See `dag_shard` (the run
  book calls it as `runs.DagTasks`, the core after a ``dag.upsert``) and
  `dag_run` (the run state, Kahn's algorithm).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Collection
from operator import attrgetter
from typing import Any

from actors.shard.backfill import Backfills
from actors.shard.batch import Batch, Definitions
from actors.shard.calendars import ShardCalendars
from actors.shard.cancel import RunCancels
from actors.shard.dag_shard import DagRuns
from actors.shard.deadlines import attempt_due_ms
from actors.shard.lateness import LatenessWindow
from actors.shard.leftovers import Leftovers
from actors.shard.retired import GONE_KEY_PREFIX, Retired
from actors.shard.routing import forward_target
from actors.shard.runs import TIMEOUT_MARGIN_MS, RunBook
from actors.shard.schedule_commands import ScheduleCommands
from actors.shard.state import (
    DEF_KEY_PREFIX,
    FireMiddles,
    PauseInfo,
    RunState,
    ScheduleState,
    decode_definition,
    decode_idle,
    decode_schedule,
    definition_key,
    encode_definition,
    encode_fire,
    encode_schedule,
    full_size,
)
from actors.shard.trim import CHANGELOG_MAX_BYTES, Trimming
from actors.wheel import TimingWheel
from topics.calendar_commands import CalendarDelete, CalendarUpsert, decode_calendar_value
from topics.commands import (
    BackfillCancel,
    DagClear,
    DagUpsert,
    DlqReplay,
    Rejection,
    RunCancel,
    ScheduleBackfill,
    ScheduleDelete,
    SchedulePause,
    ScheduleResume,
    ScheduleTrigger,
    ScheduleUpsert,
    decode_command,
)
from topics.messages import PROGRESS_STATUS, parse_result
from topics.names import DEFAULT_NAMESPACE, TopicKind
from topics.ratelimits import RatePause, RateResume
from topics.records import InRecord, OutRecord
from topics.targets import TargetTopics
from topics.vocabulary import SHARD_DECIDED, RunStatus

__all__ = ["CHANGELOG_MAX_BYTES", "SHARD_STATUSES", "TIMEOUT_MARGIN_MS", "ShardCore"]

# Results the shard writes itself; reading them back from {ns}.results is a no-op.
SHARD_STATUSES = SHARD_DECIDED

_COMMANDS = TopicKind.COMMANDS
_SCHEDULES = TopicKind.SCHEDULES
_RESULTS = TopicKind.RESULTS
_CALENDARS = TopicKind.CALENDARS
_RATELIMITS = TopicKind.RATELIMITS

_LATENESS_WINDOW = 1024
# An `advance` this much later than the caller was expected means the caller stalled
# (`ShardCore._stalled`).
STALL_MS = 2_000
# A stall's grace (no judgement by silence for a while) is given at most once this
# often: turns that are each slower than STALL_MS (an overloaded process) would
# otherwise put every alert and every watched run's time-out off for ever. A second
# freeze within this span of the first one is judged without a grace.
STALL_GRACE_EVERY_MS = 30_000
# A fire held for the calendars (§5.7) is tried again this much later: about the
# calendar follower's poll, so a fresh read is usually there by then.
CALENDAR_HOLD_MS = 250
_def_bytes_of = attrgetter("def_bytes")  # counts the users of each definition at a restore

Item = ScheduleState | RunState


class ShardCore:
    """The pure state machine of shard ``partition`` (of ``partitions``)."""

    def __init__(
        self,
        *,
        partition: int,
        partitions: int,
        now_ms: int,
        namespace: str = DEFAULT_NAMESPACE,
        tick_ms: int = 10,
        targets: TargetTopics | None = None,
        advance_every_ms: int | None = None,
    ) -> None:
        """``advance_every_ms``: the caller calls `advance` at least this often while it
        runs (the scheduler's turns); None: only when `next_due_ms` asks (the
        simulation, the tests). A call later than that, or than the instant asked, by
        more than `STALL_MS` means the caller stalled (`_stalled`)."""
        self.partition = partition
        self.partitions = partitions
        wheel: TimingWheel[Item] = TimingWheel(now_ms, tick_ms)
        schedules: dict[str, ScheduleState] = {}
        self._wheel = wheel
        self._schedules = schedules
        self._batch = batch = Batch(namespace=namespace, partition=partition)
        self._out = batch.out
        self._dirty = batch.dirty  # schedules changed in this batch (None: a tombstone)
        self._counts = batch.counts
        self._definitions = definitions = Definitions()  # definitions' own records
        # The parts, wired once: each takes the batch and its collaborators; the run
        # book and the cancels also call the parts built after them (`wire`).
        self._runs = runs = RunBook(batch, wheel, worker=f"shard-{partition}")
        runs.targets = targets or TargetTopics(own_prefix=f"{namespace}.")
        self._cancels = cancels = RunCancels(batch, runs)
        self._dags = dags = DagRuns(batch, schedules, runs, cancels)
        runs.wire(dags, cancels)
        cancels.wire(dags)
        self._backfills = Backfills(batch, schedules, runs, cancels, dags)
        self._retired = retired = Retired(batch.out, partition)  # deleted ids' floors
        self._calendars = calendars = ShardCalendars(batch, schedules, wheel)
        self._backfills.fire_limit = calendars.fire_limit_ms
        # How many records of the runtime's ``{ns}.calendars`` log this core was told
        # (the runtime's cursor; the core itself never reads it).
        self.calendar_cursor = 0
        # How fresh the calendars are known is `ShardCalendars.fresh_ms` (§5.7).
        self._commands = ScheduleCommands(
            batch, schedules, wheel, definitions, runs, retired, calendars
        )
        self._trimming = Trimming(batch, schedules, wheel, definitions, runs, retired)
        self._restore_errors: dict[bytes, str] = {}  # key -> why its last record was unreadable
        # Read by the scheduler's metrics at scrape time (a histogram kept beside it).
        self.lateness = self._lateness_ms = LatenessWindow(_LATENESS_WINDOW)
        self._late_ms = batch.late_ms  # this batch's, added to the window by `_flush`
        self._restored_defs: dict[bytes, bytes] = {}  # key -> bytes, until finish_restore
        # Timers due but left by a bounded `advance`, in the order it would take them.
        self._left_attempts: Leftovers[RunState] = Leftovers(_attempt_order)
        self._left_schedules: Leftovers[ScheduleState] = Leftovers(_due_of)
        self._last_error = ""
        self._advance_every_ms = advance_every_ms
        # By when the caller was expected to call `advance` again, as of its last call.
        self._expected_ms: int | None = None
        # When a stall last gave the results backlog its grace (`STALL_GRACE_EVERY_MS`).
        self._stall_grace_ms: int | None = None

    # --- the I/O boundary -------------------------------------------------------

    def set_target_topics(self, targets: TargetTopics) -> None:
        """What the runtime now knows of the allowed Kafka target topics (an input like
        time: the next fire of a Kafka target is checked against it)."""
        self._runs.targets = targets

    def restore(self, key: bytes, value: bytes | None) -> None:
        """Apply one changelog record (offset order: the last record of a key wins,
        an unreadable one included). Never raises."""
        errors = self._restore_errors
        try:
            if key.startswith(DEF_KEY_PREFIX):  # a definition's own record
                if value is None:
                    self._restored_defs.pop(key, None)
                else:
                    self._restored_defs[key] = decode_definition(value)
            elif key.startswith(GONE_KEY_PREFIX):  # a deleted schedule's floor
                self._retired.restore(key, value)
            elif value is None:
                self._schedules.pop(key.decode(), None)
            else:
                state = decode_idle(key, value) or decode_schedule(value)
                self._schedules[state.id] = state
            if errors:
                errors.pop(key, None)
        except Exception as error:
            errors[key] = f"{type(error).__name__}: {error}"
            self._schedules.pop(key.decode(errors="replace"), None)

    def restored_names_calendars(self) -> bool:
        """Before `finish_restore`: whether a restored schedule names a calendar, so the
        runtime must tell this core the calendars topic to its end first (§5.7). Each
        distinct definition is looked at once."""
        names_of = self._calendars.names_of
        defs = self._restored_defs
        seen: set[bytes] = set()
        for state in self._schedules.values():
            def_bytes = state.def_bytes
            if def_bytes in seen:
                continue
            seen.add(def_bytes)
            if names_of(defs.get(def_bytes, def_bytes)):
                return True
        return False

    def finish_restore(self, now_ms: int) -> list[OutRecord]:
        """Arm the timers of the restored state; misfires are decided by `advance`.

        Returns a ``{ns}.rejected`` record for each changelog record that could not
        be read (that schedule is not restored; re-upsert it).
        """
        in_flight = 0
        defs = self._restored_defs
        refs = self._definitions.refs
        written = self._definitions.written
        missing: list[ScheduleState] = []
        if not len(self._wheel):
            # Nothing is armed before this call, so the wheel may start now: a core
            # fed the changelog for a long time (a standby) arms from the present.
            self._wheel.restart(now_ms)
        arm = self._wheel.arm
        alerts = self._runs.alerts
        alerts.restored(now_ms)  # nothing judged by silence before the results are read
        timer_ms = alerts.timer_ms
        margin_ms = TIMEOUT_MARGIN_MS
        resolve = defs.get
        # A million schedules pass here: one dict lookup resolves a version-2 key (a
        # definition's JSON is never a key of ``defs``), and the definitions' users
        # are counted in one pass below rather than one dict update each.
        for state in self._schedules.values():
            found = resolve(state.def_bytes)
            if found is not None:
                state.def_bytes = found
            elif state.def_bytes.startswith(DEF_KEY_PREFIX):  # its definition is not there
                missing.append(state)
                continue
            next_ms = state.next_ms
            if next_ms is not None and not state.paused:
                arm(state, next_ms)
            elif state.paused and state._aside is not None:  # resumes by itself at until
                pause = state._aside.pause
                if pause is not None and pause.until_ms is not None:
                    arm(state, pause.until_ms)
            aside = state._aside
            if aside is not None and aside.backfill is not None:
                self._backfills.restored(state)
            runs = state._runs
            if runs:
                for run in runs.values():
                    if run.placed is None and run.watch is None:  # most: `attempt_due_ms`
                        retry_ms = run.retry_ms  # inline (a herd's runs in flight pass here)
                        arm(run, run.deadline_ms + margin_ms if retry_ms is None else retry_ms)
                    elif run.placed is not None and run.placed.cancel_owed is not None:
                        arm(run, now_ms)  # an owed cancel record: try it at once (§8.1)
                    else:
                        arm(run, timer_ms(run))
                in_flight += len(runs)
        for state in missing:
            del self._schedules[state.id]
            self._restore_errors[state.key] = (
                f"its definition record {state.def_bytes.decode()} is missing"
            )
        restored_defs = Counter(map(_def_bytes_of, self._schedules.values()))
        for def_bytes, users in restored_defs.items():
            refs[def_bytes] = refs.get(def_bytes, 0) + users
        # Whatever record of the changelog wrote a schedule last, its definition's own
        # record may be there (written by an earlier fire): the shard knows it is.
        # One that no schedule uses is left alone: the shard that deleted its last
        # user wrote its tombstone in the same transaction.
        written.update(found for found in defs.values() if found in refs)
        self._restored_defs = {}
        self._runs.in_flight = in_flight
        out = [
            self._batch.rejected_changelog(
                key,
                f"changelog record of {key!r} could not be restored ({why}); "
                + (
                    "the floor of that deleted id is lost: re-created, it may fire an "
                    "instant its predecessor handled within its look-back"
                    if key.startswith(GONE_KEY_PREFIX)
                    else "its schedule is gone from this shard: upsert it again"
                ),
            )
            for key, why in self._restore_errors.items()
        ]
        self._restore_errors.clear()
        # Calendars were learnt before this call (the runtime tells a new core the
        # whole calendars topic first): bind and re-arm what names one.
        self._calendars.restored(now_ms, restored_defs.keys())
        return out

    def calendars_fresh(self, fresh_ms: int) -> None:
        """Everything committed to ``{ns}.calendars`` before ``fresh_ms`` was told:
        a schedule naming a calendar fires no instant later than that (it is held
        and tried again `CALENDAR_HOLD_MS` later). Told every turn by the runtime."""
        self._calendars.fresh_ms = fresh_ms

    def learn_calendar(
        self, name: str, value: bytes | None, now_ms: int, written_ms: int | None = None
    ) -> None:
        """A record of ``{ns}.calendars`` (None: deleted), in offset order: the
        schedules that name it are re-armed, and their changelog records go out with
        the next `advance`. ``written_ms``: the record's timestamp (the re-arm floor
        counts from it). Never raises: an unreadable record counts as deleted (its
        users wait, visibly) and as an error of the shard."""
        days = None
        if value is not None:
            try:
                days = decode_calendar_value(value, name)
            except Exception as error:  # counted in errors_total
                self._failed(error)
        try:
            self._calendars.learn(name, days, now_ms, written_ms)
        except Exception as error:
            self._failed(error)

    def calendar_users(self, name: str) -> list[str]:
        """The ids of this shard's schedules that name calendar ``name``."""
        return self._calendars.users(name)

    def apply(self, record: InRecord, now_ms: int) -> list[OutRecord]:
        """Apply a command or a result; the records to write. Never raises."""
        self._out.clear()
        try:
            if record.topic == _COMMANDS:
                self._on_command(record, now_ms)
            elif record.topic == _RESULTS:
                self._on_result(record, now_ms)
            else:
                self._batch.reject(
                    record, f"the shard applies commands and results, not {record.topic}"
                )
            if self._backfills.going:  # a result freed room, a command started one
                self._backfills.pump_all(now_ms)
        except Exception as error:
            self._failed(error)
            self._batch.reject(
                record,
                f"internal error while applying this record ({self._last_error}); it was "
                "skipped, the shard went on: please report it with this record",
            )
        # A command's changes write full records: a definition changes only by one.
        return self._flush(now_ms, full=record.topic == _COMMANDS)

    def advance(self, now_ms: int, max_fires: int | None = None) -> list[OutRecord]:
        """Act on everything due at ``now_ms``; the records to write. Never raises.

        Attempts' timers (deadlines, retries) are handled before occurrences, each
        group in due order: an attempt that timed out by now no longer blocks an
        occurrence due by now, and the outcome does not depend on the order in
        which timers happened to be added (a restored shard adds them in another).

        ``max_fires`` bounds one call (a backlog of 100k due schedules after a
        takeover is written in bounded transactions, not one): once that many
        timers were handled or occurrences fired, the rest of what is due waits in
        the core's due list, in the same order, and the next call takes it up
        first (`next_due_ms` is then in the past). Nothing is lost, reordered or
        fired early: the calls together do what one unbounded call at the same
        ``now_ms`` does. (Putting the rest back on the wheel instead would cost
        each call the whole backlog: a herd of a million due at one instant,
        5,000 per call, would be handled a million times over; so would judging
        the whole due list at every call, which `actors.shard.leftovers` avoids.)
        """
        self._out.clear()
        if self._retired:  # deleted ids' floors no look-back can reach any more
            self._retired.expire(now_ms)
        if self._stalled(now_ms) and (
            self._stall_grace_ms is None or now_ms - self._stall_grace_ms >= STALL_GRACE_EVERY_MS
        ):
            # Called long after it was expected (a frozen process, a stalled loop): the
            # results that came meanwhile may be unread, so no judgement by silence
            # until they are (`deadlines`), as after a restore; at most once per
            # STALL_GRACE_EVERY_MS, so slow turns delay judgement but never stop it.
            self._stall_grace_ms = now_ms
            self._runs.alerts.restored(now_ms)
        budget = sys.maxsize if max_fires is None else max(1, max_fires)
        still_due = self._still_due
        # What earlier bounded calls left and this call may take, judged before this
        # call's advance detaches what it pops (as one unbounded call would find it);
        # only as many as the budget could handle (`actors.shard.leftovers`).
        left_attempts = self._left_attempts
        left_schedules = self._left_schedules
        taken_attempts = left_attempts.take(budget, still_due) if left_attempts else []
        # The wheel hands back the schedules and runs themselves (each is its own
        # timer), detached, each keeping the due it was armed for.
        due = self._wheel.advance(now_ms)
        attempts: list[RunState] = []
        due_schedules: list[ScheduleState] = []
        for item in due:
            if isinstance(item, ScheduleState):
                due_schedules.append(item)
            else:
                attempts.append(item)
        # The wheel orders by tick, ties by insertion; a restored shard inserts in
        # another order, so attempts due in the same tick go by (due, run id).
        attempts.sort(key=_attempt_order)
        if taken_attempts:
            attempts = left_attempts.order(taken_attempts, attempts)
        # With schedules left, the newly due join them in due order and all are taken
        # from the queue, each judged as it is reached (`Leftovers.admit`).
        from_queue = bool(left_schedules)
        if from_queue:
            left_schedules.admit(due_schedules)
        runs = self._runs
        fire_counted = self._fire_counted
        handled = 0
        for run in attempts:
            if budget <= 0:
                break
            handled += 1
            try:
                if run.watch is not None and self._watched(run, now_ms):
                    budget -= 1
                    continue  # only its deadlines were due: re-armed for the attempt
                if run.retry_ms is None:
                    runs.time_out(run, now_ms)
                else:
                    runs.next_attempt(run, now_ms)
            except Exception as error:  # one broken schedule must not stop the shard
                self._failed(error)
            budget -= 1
        if handled < len(attempts):
            left_attempts.leave(attempts[handled:])
        if from_queue:
            pop = left_schedules.pop
            while budget > 0 and (state := pop(still_due)) is not None:
                budget -= fire_counted(state, now_ms)
        else:
            handled = 0
            for state in due_schedules:
                if budget <= 0:
                    break
                handled += 1
                budget -= fire_counted(state, now_ms)
            if handled < len(due_schedules):
                left_schedules.leave(due_schedules[handled:])
        if self._backfills.going:
            try:
                self._backfills.pump_all(now_ms)
            except Exception as error:  # one broken schedule must not stop the shard
                self._failed(error)
        self._expect_next(now_ms)
        return self._flush(now_ms)

    def _stalled(self, now_ms: int) -> bool:
        """Whether this `advance` comes more than `STALL_MS` after the caller was
        expected: by the instant the last call left it to come back at (the earliest
        timer then, or the caller's own cadence), or by a timer armed since.

        Not by the earliest timer now alone: the results a thawed process applies before
        this call end the runs they speak of (an outcome takes the run's timer off the
        wheel), so the earliest timer left may be due a moment ago while the process
        was frozen for far longer, and another run's report still waits unread.
        Not by the time since the last call alone either: a caller that comes only when
        asked (the simulation) may be away for minutes, and a grace given at every such
        call would put every judgement off again and again."""
        expected_ms = self._expected_ms
        due_ms = self._wheel.next_due_ms()
        if due_ms is not None and (expected_ms is None or due_ms < expected_ms):
            expected_ms = due_ms
        return expected_ms is not None and now_ms - expected_ms > STALL_MS

    def _expect_next(self, now_ms: int) -> None:
        """Note by when the caller should call `advance` again (see `_stalled`)."""
        due_ms = self._wheel.next_due_ms()
        expected_ms = None if due_ms is None else max(due_ms, now_ms)
        every_ms = self._advance_every_ms
        if every_ms is not None and (expected_ms is None or now_ms + every_ms < expected_ms):
            expected_ms = now_ms + every_ms
        self._expected_ms = expected_ms

    def _watched(self, run: RunState, now_ms: int) -> bool:
        """A run with deadlines came due: alert what silence broke (`deadlines`); True
        when the attempt's own instant is still ahead (the run is armed again)."""
        alerts = self._runs.alerts
        if alerts.judge(run, now_ms):
            self._dirty[run.schedule.id] = run.schedule
        placed = run.placed
        if placed is not None and placed.cancel_owed is not None:
            return False  # an owed cancel's resend is due too
        if attempt_due_ms(run) <= now_ms:
            if now_ms >= alerts.silent_from_ms:
                return False  # the attempt's business is due too
            # Within a restore's grace: ending the run now would judge its start before
            # the results backlog (its start report among them) is read, and alert a
            # punctual run for good. The time-out waits out the grace (5 s at most; a
            # worker never commits past the deadline plus the margin).
            self._wheel.arm(run, alerts.silent_from_ms)
            return True
        self._wheel.arm(run, alerts.timer_ms(run))
        return True

    def _resume_held(
        self, state: ScheduleState, pause: PauseInfo, until_ms: int | None, now_ms: int
    ) -> bool:
        """A paused schedule come due: a kept resume completed, or a pause that replaced
        one ended with the resume's report, each once its calendars are known as of it
        (§5.7); True while that waits (re-armed for a later look)."""
        calendars = self._calendars
        if pause.resumed and pause.until_ms is not None:
            # A resume kept until the calendars are known as of it.
            if until_ms is not None and until_ms < pause.until_ms:
                self._counts["calendar_held_total"] += 1
                self._wheel.arm(state, now_ms + CALENDAR_HOLD_MS)
                return True
            self._commands.finish_resume(state, pause.until_ms, now_ms)
            calendars.walked(state)
        elif pause.resumed_as_of_ms is not None:
            as_of_ms = pause.resumed_as_of_ms
            if pause.until_ms is not None and pause.until_ms <= now_ms:
                # A pause that replaced a kept resume ends: the resume's report first,
                # by calendars known as of its instant.
                if until_ms is not None and until_ms < as_of_ms:
                    self._counts["calendar_held_total"] += 1
                    self._wheel.arm(state, now_ms + CALENDAR_HOLD_MS)
                    return True
                self._commands.settle_resumed(state, as_of_ms)
                calendars.walked(state)
        return False

    def _fire_counted(self, state: ScheduleState, now_ms: int) -> int:
        """`RunBook.fire_due` of one schedule; the budget it costs (its fires, at least 1)."""
        counts = self._counts
        calendars = self._calendars
        # None but for a schedule naming a calendar: then every instant it fires, not
        # only the first, is bounded by how fresh the calendars are known.
        until_ms = None if calendars.fresh_ms is None else calendars.fire_limit_ms(state)
        if state.paused:  # (a herd's schedules are not: one test)
            pause = state.pause
            if pause is not None and self._resume_held(state, pause, until_ms, now_ms):
                return 1
        if until_ms is not None:
            next_ms = state.next_ms
            if next_ms is not None and until_ms < next_ms <= now_ms:
                # Its calendars are not known as of its instant yet: never by stale days.
                counts["calendar_held_total"] += 1
                self._wheel.arm(state, now_ms + CALENDAR_HOLD_MS)
                return 1
        fired_before = counts["fired_total"]
        try:
            self._runs.fire_due(state, now_ms, until_ms)
        except Exception as error:  # one broken schedule must not stop the shard
            self._failed(error)
        if calendars.spliced:  # past an edit's backlog: bound as a new owner binds
            calendars.walked(state)
        next_ms = state.next_ms
        if until_ms is not None and next_ms is not None and next_ms <= now_ms and not state.paused:
            # Due, but later than the calendars are known: held as above.
            counts["calendar_held_total"] += 1
            self._wheel.arm(state, now_ms + CALENDAR_HOLD_MS)
        fired = counts["fired_total"] - fired_before
        return fired if fired > 0 else 1

    def _still_due(self, item: Item) -> bool:
        """Whether a timer left due by a bounded `advance` still stands: nothing
        re-armed it (a command, a result) and its schedule or run still exists."""
        if item.pending:  # armed again
            return False
        if isinstance(item, ScheduleState):
            return self._schedules.get(item.id) is item
        state = item.schedule
        return (
            self._schedules.get(state.id) is state
            and state._runs is not None
            and state._runs.get(item.run_id) is item
        )

    def _failed(self, error: Exception) -> None:
        self._counts["errors_total"] += 1
        self._last_error = f"{type(error).__name__}: {error}"

    def next_due_ms(self) -> int | None:
        """When `advance` next has work (None: nothing scheduled)."""
        found = self._wheel.next_due_ms()
        if self._backfills.going and self._backfills.due():  # room to fire: now
            return self._wheel.now_ms
        for left in (self._left_attempts, self._left_schedules):
            first = left.first_due_ms()  # due already (a bounded call left it)
            if first is not None:
                found = first if found is None else min(found, first)
        return found

    @property
    def stats(self) -> dict[str, Any]:
        lateness = sorted(self._lateness_ms)
        figures: dict[str, Any] = {
            "schedules": len(self._schedules),
            "timers": len(self._wheel) + len(self._left_attempts) + len(self._left_schedules),
            "in_flight": self._runs.in_flight,
            "backfills_going": len(self._backfills.going),
            "backfill_in_flight": self._backfills.in_flight(),
            **self._counts,
            "lateness_ms_p50": lateness[len(lateness) // 2] if lateness else None,
            "lateness_ms_p99": lateness[(len(lateness) * 99) // 100] if lateness else None,
            "lateness_ms_max": lateness[-1] if lateness else None,
            "last_error": self._last_error,
        }
        return figures

    def schedule(self, schedule_id: str) -> ScheduleState | None:
        """The state of one schedule, for inspection (tests, the CLI); do not mutate."""
        return self._schedules.get(schedule_id)

    # --- commands ---------------------------------------------------------------

    def _on_command(self, record: InRecord, now_ms: int) -> None:
        target = forward_target(
            record.key, record.value, partition=self.partition, partitions=self.partitions
        )
        if target is not None:
            key, partition = target
            # The author's timestamp travels with it: look-backs count from there.
            stamp = record.timestamp_ms if record.timestamp_ms > 0 else None
            self._out.append(OutRecord(_COMMANDS, key, record.value, partition, stamp))
            self._counts["forwarded_total"] += 1
            return
        command = decode_command(record.key, record.value, now_ms)
        commands = self._commands
        dags = self._dags
        if isinstance(command, Rejection):
            self._batch.reject(record, command.reason)
        elif isinstance(command, (CalendarUpsert, CalendarDelete)):
            self._on_calendar(record, command)
        elif isinstance(command, (RatePause, RateResume)):
            # Validated here, written to {ns}.ratelimits in this transaction; every
            # worker reads it whole (docs/DESIGN.md §8.5). No shard owns a key. A topic
            # gone or refusing (its mark, `target_table.refused_target`) is never
            # written: the broker would abort the whole transaction, again at each
            # rebuild; the command is rejected with the fix instead.
            refused = self._runs.targets.ratelimits_why_not()
            if refused is not None:
                self._batch.reject(record, refused)
            else:
                value = command.value(now_ms) if isinstance(command, RatePause) else None
                self._out.append(OutRecord(_RATELIMITS, command.id.encode(), value, 0))
        elif isinstance(command, ScheduleUpsert):
            refused = self._runs.target_refusal(command.job, self._schedules.get(command.id))
            if refused is not None:
                self._batch.reject(record, refused)
            elif not dags.kind_clash(record, command):
                commands.upsert(command, now_ms, record.timestamp_ms)
        elif isinstance(command, DagUpsert):
            if not dags.kind_clash(record, command):
                commands.upsert(command, now_ms, record.timestamp_ms)
                dags.upserted(self._schedules[command.id], now_ms)
        elif isinstance(command, DagClear):
            dags.on_clear(record, command, now_ms)
        else:
            state = self._schedules.get(command.id)
            if state is None:
                self._batch.reject(
                    record,
                    f"id: no schedule {command.id!r} exists (it was never created or was "
                    "deleted); create it with schedule.upsert first",
                )
            elif isinstance(command, ScheduleDelete):
                commands.delete(state, now_ms)
            elif isinstance(command, SchedulePause):
                commands.pause(record, state, command, now_ms)
            elif isinstance(command, ScheduleResume):
                commands.resume(state, now_ms)
                self._calendars.walked(state)  # a resume may skip past an edit's backlog
            elif isinstance(command, ScheduleTrigger):
                commands.trigger(record, state, now_ms)
            elif isinstance(command, DlqReplay):
                if state.dag is not None:  # a DAG's task run: the same as dag.clear of it
                    dags.replay(record, state, command.run_id, now_ms)
                else:
                    commands.replay(record, state, command.run_id, now_ms)
            elif isinstance(command, RunCancel):
                self._cancels.on_cancel(record, state, command, now_ms)
            elif isinstance(command, ScheduleBackfill):
                self._backfills.on_backfill(record, state, command, now_ms)
            elif isinstance(command, BackfillCancel):
                self._backfills.on_cancel(record, state, command, now_ms)

    def _on_calendar(self, record: InRecord, command: CalendarUpsert | CalendarDelete) -> None:
        """Validated here, written to ``{ns}.calendars`` in this shard's transaction;
        every shard (this one too) learns it from there (`learn_calendar`)."""
        key = command.id.encode()
        if isinstance(command, CalendarUpsert):
            self._out.append(OutRecord(_CALENDARS, key, command.value(), 0))
            return
        users = self._calendars.users(command.id)
        if users:
            shown = ", ".join(repr(u) for u in users[:10])
            more = f" and {len(users) - 10} more" if len(users) > 10 else ""
            self._batch.reject(
                record,
                f"id: calendar {command.id!r} is in use by {shown}{more} (shard"
                f" {self.partition}); take it out of their exclude first",
            )
            return
        self._out.append(OutRecord(_CALENDARS, key, None, 0))

    # --- results ----------------------------------------------------------------

    def _on_result(self, record: InRecord, now_ms: int) -> None:
        if record.value is None:
            self._batch.reject(record, "value: a result record needs a value (got a tombstone)")
            return
        key = record.key
        if key is not None:
            # A result is keyed by its schedule (that key is what brought it to this
            # shard). With no run of it in flight there is nothing it could end: not
            # parsed (~30 µs), which a Kafka target's own results, read back here at
            # every fire, made the largest cost of a target's fire.
            idle = self._schedules.get(key.decode("utf-8", "replace"))
            if idle is not None and not idle._runs:
                self._counts["results_ignored_total"] += 1
                return
        try:
            result = parse_result(record.value)
        except ValueError as error:
            self._batch.reject(record, f"{error}; results are written by kafkron workers")
            return
        state = self._schedules.get(result.schedule_id)
        run = None if state is None or state._runs is None else state._runs.get(result.run_id)
        if (
            run is not None
            and run.watch is not None
            and result.started_ms is not None
            and result.status not in SHARD_STATUSES
            and state is not None
            and self._runs.alerts.started(run, result.started_ms, now_ms)
        ):
            self._dirty[state.id] = state  # what it learnt is in the changelog
        if (
            state is None
            or run is None
            or result.status in SHARD_STATUSES
            or result.status == PROGRESS_STATUS  # a progress report: the attempt runs on
            or run.attempt != result.attempt
            or run.retry_ms is not None
        ):
            self._counts["results_ignored_total"] += 1
            return
        self._counts["results_applied_total"] += 1
        finished_ms = now_ms if result.finished_ms is None else result.finished_ms
        if (
            result.status in (RunStatus.SUCCEEDED, RunStatus.CANCELLED)
            or run.cancel_reason is not None
        ):
            # A cancelled attempt ends its run whatever it reports: never retried.
            self._runs.outcome(run, result.status, finished_ms, result.error, result.worker)
            self._runs.end_run(state, run, now_ms, finished_ms)
        else:  # failed or timed_out
            self._runs.attempt_failed(
                state, run, now_ms, result.status, result.error, result.worker
            )
        self._dirty[state.id] = state

    # --- the changelog ------------------------------------------------------------

    def _flush(self, now_ms: int, full: bool = False) -> list[OutRecord]:
        """The batch's records, then the changelog record of each schedule it changed.

        ``full``: every schedule's full record (version 1); else a version-2 record
        for every schedule but DAGs, whose state holds its definition's graph. A
        record over `CHANGELOG_MAX_BYTES` is not kept: the trim step (`trim`) makes
        its schedule fit first, and the changelog is serialised again.
        """
        out = self._out
        if self._late_ms:
            self._lateness_ms.extend_all(self._late_ms)
            self._late_ms.clear()
        dirty = self._dirty
        if dirty:
            mark = len(out)
            oversized = self._serialise(out, full, ())
            trimmed: set[str] = set()
            while oversized:  # rare: trim them, then serialise again (it all fits now)
                del out[mark:]
                for state, size in oversized:
                    if self._trimming.fit(state, size, now_ms):
                        trimmed.add(state.id)
                oversized = self._serialise(out, full, trimmed)
            dirty.clear()
            definitions = self._definitions
            if definitions.changed:  # after serialising: a trimmed schedule may drop one
                definitions.tombstones(out, self.partition)
        records = out.copy()
        out.clear()
        return records

    def _serialise(
        self, out: list[OutRecord], full: bool, trimmed: Collection[str]
    ) -> list[tuple[ScheduleState, int]]:
        """Append the changelog records of the batch's schedules to ``out``; it only
        reads their state. A record over the bound is not appended: the schedules
        whose record is (with its size) are returned, and then nothing else of this
        pass is kept (the definitions it wrote are not counted as written).
        ``trimmed``: schedules that write their full record (what trimming measured).
        """
        partition = self.partition
        written = self._definitions.written
        fresh: set[bytes] = set()  # definitions whose record this pass writes
        oversized: list[tuple[ScheduleState, int]] = []
        middles: FireMiddles = {}  # a herd's records share all but their ids and runs
        for schedule_id, state in self._dirty.items():
            key = schedule_id.encode()  # `state.key`
            if state is None:
                out.append(OutRecord(_SCHEDULES, key, None, partition))
                continue
            if full or state.dag is not None:
                value = encode_schedule(state)
                size = len(value)
                if size > CHANGELOG_MAX_BYTES:
                    oversized.append((state, size))
                    continue
                out.append(OutRecord(_SCHEDULES, key, value, partition))
                continue
            def_bytes = state.def_bytes
            if def_bytes not in written and def_bytes not in fresh:  # its definition's
                fresh.add(def_bytes)  # record, first
                out.append(
                    OutRecord(
                        _SCHEDULES,
                        definition_key(def_bytes).encode(),
                        encode_definition(def_bytes),
                        partition,
                    )
                )
            if trimmed and schedule_id in trimmed:
                out.append(OutRecord(_SCHEDULES, key, encode_schedule(state), partition))
                continue
            fire_value = encode_fire(state, middles)
            # The bound is on the full record, which a command writes: both fit.
            # (It is shorter than this sum; `full_size` is exact.)
            assert fire_value is not None
            if len(fire_value) + len(def_bytes) + 16 > CHANGELOG_MAX_BYTES:
                size = full_size(fire_value, def_bytes)
                if size > CHANGELOG_MAX_BYTES:
                    oversized.append((state, size))
                    continue
            out.append(OutRecord(_SCHEDULES, key, fire_value, partition))
        if not oversized:
            written |= fresh
        return oversized


def _due_of(state: ScheduleState) -> int:
    return state.due_ms


def _attempt_order(run: RunState) -> tuple[int, str]:
    # A run with deadlines by the instant it was armed for (they or its attempt).
    return (attempt_due_ms(run) if run.watch is None else run.due_ms), run.run_id
