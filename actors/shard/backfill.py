"""Backfills: a schedule's past occurrences fired from a plan (docs/DESIGN.md §6.9).

A part of the shard core like the others (wired in `ShardCore.__init__`). The plan
comes made (``schedule.backfill``: ranges of occurrences and the attempt to fire
each at, `topics.backfill_commands`); this part executes it:

- **A cursor in the changelog.** The backfill's ranges live in the schedule's
  changelog record (`backfill_state.BackfillState`); the head range's first
  instant is the cursor. Firing an occurrence moves the cursor (the next occurrence
  by the schedule's compiled spec, or the next range) and puts the run in flight, in
  the same batch, so the run record and the new cursor are in one transaction: a
  new owner after a ``kill -9`` goes on from the cursor, repeating and skipping
  nothing.
- **At most ``max_parallel`` in flight.** The backfill's runs in flight are listed
  by run id in the same record; `pump` first forgets those that ended (no longer in
  the schedule's runs), then fires while fewer than ``max_parallel`` are. Memory is
  bounded by that, not by the range: ranges expand one occurrence at a time.
- **The live schedule keeps its timing.** A backfill's runs do not count against
  the schedule's overlap policy (`runs._live_runs`), and the backfill never fires
  an occurrence the live path owns: one at or after the changelog's ``next``, or
  after the latest handled (a command reaching there is rejected; one that gets
  there later, after a re-upsert, lets it pass), nor one whose run is in flight
  (a live run retrying), nor one dead-lettered at or after the planned attempt (the
  plan is stale), nor one a re-upsert made no occurrence of the schedule any more.
  Each let pass is counted (``passed``), never fired.
- **Waits while paused.** A paused schedule fires no backfill run either; the
  backfill goes on at the resume.
- **A re-run is the run's next attempt.** A run is started at the planned attempt
  with a fresh retry budget from there (as ``dlq.replay``), so ``(run_id,
  attempt)`` stays unique and the idempotency key is the run's.
- **Cancel.** ``schedule.backfill_cancel`` drops what is left; with ``running`` each
  run of the backfill in flight is cancelled by ``run.cancel``'s path
  (`cancel.RunCancels`, `dag_shard.DagRuns.cancel_run` for a DAG run): nothing
  starts after the cancel.
- **A DAG's backfill starts DAG runs** (`dag_shard.DagRuns.start_backfill_run`):
  each with its occurrence's logical date and data interval, its tasks from attempt
  1, its own end result at the planned attempt (a missed occurrence's result holds
  attempt 1). In flight is a DAG run still running; one the DAG's run book knows
  (running, or ended and remembered) is let pass: its tasks are ``dag.clear``'s.

The core calls `pump` for every schedule with a backfill going after each
`ShardCore.apply` and `ShardCore.advance` (results free room; commands start and
resume backfills); `due` tells `ShardCore.next_due_ms` when one can fire now.
"""

from __future__ import annotations

from collections.abc import Callable

from actors.shard.backfill_state import BackfillState
from actors.shard.batch import Batch
from actors.shard.cancel import RunCancels
from actors.shard.dag_definition import DagDefinition
from actors.shard.dag_shard import DagRuns
from actors.shard.runs import RunBook
from actors.shard.spliced import current_spec
from actors.shard.state import RunState, ScheduleState
from topics.backfill_commands import BackfillCancel, ScheduleBackfill
from topics.messages import run_id_for
from topics.records import InRecord
from topics.timefmt import format_ms

BACKFILL_RANGES_MAX = 2000
"""Ranges a schedule's backfill holds at once (about 60 bytes each in its changelog
record, which a fire rewrites: this keeps it far below the record's bound, §6.4)."""


BACKFILL_TASK_ENTRIES_MAX = 2000
"""Task entries a DAG's running runs may hold while its backfill goes:
``(max_parallel + max_active_runs) × tasks`` at most this, else the backfill command
is refused. Why this bound: every running DAG run keeps one entry per task in the
DAG's changelog record (about 65 bytes each: a 1000-task DAG at ``max_parallel`` 20
made a 1.37 MB record), beside at most `dag_run.ENDED_TASKS_MEMORY` (4000) entries
of ended runs plus the latest ended run (up to `topics.dag_graph.MAX_TASKS`). 2000
running entries keep that sum (about 7000 entries, 455 kB) under the record's bound
`trim.CHANGELOG_MAX_BYTES` (512 KiB); a 1000-task DAG with ``max_active_runs`` 1 can
still be backfilled one run at a time."""


def dag_backfill_refusal(tasks: int, max_active_runs: int, max_parallel: int) -> str | None:
    """Why a DAG of ``tasks`` tasks cannot be backfilled at ``max_parallel``, else None
    (the shard's check, which the CLI makes too before sending)."""
    entries = (max_parallel + max_active_runs) * tasks
    if entries <= BACKFILL_TASK_ENTRIES_MAX:
        return None
    fits = BACKFILL_TASK_ENTRIES_MAX // tasks - max_active_runs
    hint = (
        f"use max_parallel {fits} or less"
        if fits >= 1
        else "lower the DAG's max_active_runs or split the DAG"
    )
    return (
        f"max_parallel: (max_parallel {max_parallel} + max_active_runs {max_active_runs}) "
        f"x {tasks} tasks = {entries} running task entries, more than the "
        f"{BACKFILL_TASK_ENTRIES_MAX} a DAG's changelog record can hold beside its "
        f"ended runs; {hint}"
    )


class Backfills:
    """The backfills of one shard."""

    def __init__(
        self,
        batch: Batch,
        schedules: dict[str, ScheduleState],
        runs: RunBook,
        cancels: RunCancels,
        dags: DagRuns,
    ) -> None:
        self._batch = batch
        self._dags = dags
        self._dirty = batch.dirty
        self._counts = batch.counts
        self._schedules = schedules
        self._runs = runs
        self._cancels = cancels
        # Schedules whose backfill has something left or running (few: a backfill is
        # an operator's act); the core pumps only these.
        self.going: dict[str, ScheduleState] = {}
        # How fresh the calendars a schedule names are known (`ShardCalendars.
        # fire_limit_ms`; None: it names none, or no follower): wired by the core.
        self.fire_limit: Callable[[ScheduleState], int | None] = lambda state: None

    # --- commands ---------------------------------------------------------------

    def on_backfill(
        self, record: InRecord, state: ScheduleState, command: ScheduleBackfill, now_ms: int
    ) -> None:
        why_not = self._refusal(state, command)
        if why_not is not None:
            self._batch.reject(record, why_not)
            return
        backfill = state.backfill
        if backfill is None or not backfill.active or backfill.backfill_id != command.backfill_id:
            backfill = state.backfill = BackfillState(
                command.backfill_id, command.max_parallel, now_ms
            )
            backfill.first_ms = command.ranges[0][0]
        backfill.max_parallel = command.max_parallel
        backfill.last_ms = command.ranges[-1][1]
        backfill.ranges.extend([a, b, n] for a, b, n in command.ranges)
        self.going[state.id] = state
        self._dirty[state.id] = state
        self._counts["backfill_ranges_total"] += len(command.ranges)
        self.pump(state, now_ms)

    def _refusal(self, state: ScheduleState, command: ScheduleBackfill) -> str | None:
        waiting = _waiting_for(state)
        if waiting is not None:  # its spec is bound to no days: no instant can be checked
            return (
                f"id: schedule {state.id!r} waits for calendar {waiting!r}, which this shard "
                "does not know (not created yet, or deleted); backfill it once the calendar "
                "exists (`kafkron calendar add`)"
            )
        backfill = state.backfill
        if backfill is not None and backfill.active:
            if backfill.backfill_id != command.backfill_id:
                return (
                    f"backfill_id: schedule {state.id!r} is running backfill "
                    f"{backfill.backfill_id!r}; wait for it to end or cancel it "
                    "(schedule.backfill_cancel) first"
                )
            if backfill.ranges and command.ranges[0][0] <= backfill.ranges[-1][1]:
                return "ranges: must come after the ranges this backfill already holds"
            if len(backfill.ranges) + len(command.ranges) > BACKFILL_RANGES_MAX:
                return (
                    f"ranges: a backfill holds at most {BACKFILL_RANGES_MAX} ranges at once; "
                    "send the rest once it has fired some"
                )
        if state.dag is not None:
            definition = state.definition
            assert isinstance(definition, DagDefinition)
            why_not = dag_backfill_refusal(
                len(definition.topo_order), definition.max_active_runs, command.max_parallel
            )
            if why_not is not None:
                return why_not
        last_ms = command.ranges[-1][1]
        handled_ms = state.handled_ms()
        next_ms = state.next_ms
        if (
            handled_ms is None
            or last_ms > handled_ms
            or (next_ms is not None and last_ms >= next_ms)
        ):
            return (
                f"ranges: {format_ms(last_ms)} is not behind the live schedule (latest "
                f"handled {'none' if handled_ms is None else format_ms(handled_ms)}); the "
                "schedule fires its own future: plan again with `kafkron backfill`"
            )
        next_after = current_spec(state.definition.compiled).next_after
        for index, (first_ms, last, _) in enumerate(command.ranges):
            for end, at in (("first", first_ms), ("last", last)):
                if next_after(at - 1) != at:
                    return (
                        f"ranges[{index}]: its {end} instant {format_ms(at)} is not an "
                        f"occurrence of schedule {state.id!r} (was it changed since the plan? "
                        "plan again with `kafkron backfill`)"
                    )
        return None

    def on_cancel(
        self, record: InRecord, state: ScheduleState, command: BackfillCancel, now_ms: int
    ) -> None:
        backfill = state.backfill
        if backfill is None or backfill.backfill_id != command.backfill_id or not backfill.active:
            self._batch.reject(
                record,
                f"backfill_id: schedule {state.id!r} has no backfill {command.backfill_id!r} "
                "going (it ended, or never started)",
            )
            return
        backfill.ranges = []
        backfill.cancelled = command.reason
        if command.running:
            for run_id in list(backfill.running):
                if state.dag is not None:
                    if self._dags.running(state, run_id):
                        self._dags.cancel_run(state, run_id, command.reason, now_ms)
                    continue
                run = (state._runs or {}).get(run_id)
                if run is None:
                    continue
                if run.retry_ms is not None:
                    self._cancels.cancel_waiting(state, run, command.reason, now_ms)
                elif run.cancel_reason is None:
                    self._cancels.request_cancel(state, run, command.reason, now_ms)
        self._counts["backfill_cancelled_total"] += 1
        self._dirty[state.id] = state
        self.pump(state, now_ms)

    # --- firing -----------------------------------------------------------------

    def pump_all(self, now_ms: int) -> None:
        for state in list(self.going.values()):
            if self._schedules.get(state.id) is not state:  # deleted or replaced
                del self.going[state.id]
                continue
            self.pump(state, now_ms)

    def pump(self, state: ScheduleState, now_ms: int) -> None:
        """Forget the backfill's runs that ended; fire while there is room; end it
        once nothing is left nor running."""
        backfill = state.backfill
        if backfill is None or not backfill.active:
            self.going.pop(state.id, None)
            return
        running = backfill.running
        if running and not all(self._in_flight(state, run_id) for run_id in running):
            backfill.running = running = [r for r in running if self._in_flight(state, r)]
            self._dirty[state.id] = state
        if self._stale(state, backfill):
            self._counts["calendar_held_total"] += 1
        elif not state.paused and _waiting_for(state) is None:
            # A schedule waiting for a calendar (deleted since the command) holds its
            # backfill as a pause does: its spec has no days to check an instant by.
            # At most max_parallel occurrences per call, also when they do not stay in
            # flight (a Kafka target's): one turn never carries a whole range.
            budget = backfill.max_parallel
            while budget > 0 and backfill.ranges and len(running) < backfill.max_parallel:
                self._fire_next(state, backfill, now_ms)
                budget -= 1
        if not backfill.ranges and not backfill.running:
            backfill.ended_ms = now_ms
            self.going.pop(state.id, None)
            self._dirty[state.id] = state
            self._counts["backfills_ended_total"] += 1

    def _fire_next(self, state: ScheduleState, backfill: BackfillState, now_ms: int) -> None:
        head = backfill.ranges[0]
        at, last_ms, attempt = head
        following = current_spec(state.definition.compiled).next_after(at)
        run_id = run_id_for(state.id, at)
        if self._passes(state, run_id, at, attempt) is not None:
            backfill.passed += 1
            self._counts["backfill_passed_total"] += 1
        elif state.dag is not None:
            self._dags.start_backfill_run(state, at, attempt, now_ms)
            backfill.fired += 1
            self._counts["backfill_fired_total"] += 1
            if self._dags.running(state, run_id):
                backfill.running.append(run_id)
        else:
            run = RunState(state, run_id, at, None, attempt, attempt)
            # Emitted first: if that raises, the cursor has not moved and the next
            # pump tries this occurrence again (never skipped, never twice).
            self._runs.start_attempt(state, run, now_ms)
            dead = state.dead_or_none
            if dead is not None:
                dead.pop(run_id, None)  # a dead run re-run: it is in flight again
            backfill.fired += 1
            self._counts["backfill_fired_total"] += 1
            if run_id in (state._runs or {}):  # a Kafka target's attempt ends at once
                backfill.running.append(run_id)
        # The cursor moves in the same batch as the fire (one transaction).
        if following is None or following > last_ms:
            del backfill.ranges[0]
        else:
            head[0] = following
        self._dirty[state.id] = state

    def _passes(self, state: ScheduleState, run_id: str, at: int, attempt: int) -> str | None:
        """Why the backfill must not fire ``at`` now (it lets it pass), else None."""
        next_ms = state.next_ms
        handled_ms = state.handled_ms()
        if handled_ms is None or at > handled_ms or (next_ms is not None and at >= next_ms):
            return "the live schedule owns it"
        if run_id in (state._runs or {}):
            return "its run is in flight"
        if state.dag is not None and run_id in state.dag.runs:
            return "its DAG run is running or ended since the plan: dag.clear reruns its tasks"
        if current_spec(state.definition.compiled).next_after(at - 1) != at:
            return "not an occurrence of the schedule any more (it was changed since the plan)"
        dead = state.dead_or_none
        if dead is not None and dead.get(run_id, 0) >= attempt:
            return "it was dead-lettered at or after the planned attempt: the plan is stale"
        return None

    def _in_flight(self, state: ScheduleState, run_id: str) -> bool:
        """Whether the backfill's run ``run_id`` has not ended (a DAG run: running)."""
        if state.dag is not None:
            return self._dags.running(state, run_id)
        return run_id in (state._runs or {})

    def due(self) -> bool:
        """Whether a backfill could fire now (room, something left, not paused)."""
        for state in self.going.values():
            backfill = state.backfill
            if (
                backfill is not None
                and backfill.ranges
                and not state.paused
                and _waiting_for(state) is None
                and len(backfill.running) < backfill.max_parallel
                and not self._stale(state, backfill)
            ):
                return True
        return False

    def _stale(self, state: ScheduleState, backfill: BackfillState) -> bool:
        """Are the calendars ``state`` names known less fresh than the backfill's
        command? Its instants are checked by the calendars as the topic holds them
        when it was asked for (DESIGN §6.9), so it waits for the follower (the core
        pumps again every turn; the runtime turns at least every second)."""
        limit_ms = self.fire_limit(state)
        return limit_ms is not None and limit_ms < backfill.started_ms

    def in_flight(self) -> int:
        """The backfills' runs in flight (for metrics)."""
        total = 0
        for state in self.going.values():
            backfill = state.backfill
            if backfill is not None:
                total += len(backfill.running)
        return total

    def restored(self, state: ScheduleState) -> None:
        """A restored schedule: track its backfill if one is going."""
        backfill = state.backfill
        if backfill is not None and backfill.active:
            self.going[state.id] = state


def _waiting_for(state: ScheduleState) -> str | None:
    """The calendar a schedule waits for (`actors.shard.calendars`), if any."""
    aside = state._aside
    return None if aside is None else aside.waiting
