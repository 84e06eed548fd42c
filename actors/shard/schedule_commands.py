"""Schedule commands of one shard: upsert, delete, pause, resume, trigger, dlq.replay.

`ScheduleCommands` is a part of `ShardCore` (same rules: pure, no I/O; the
core's entry points catch what escapes). The core has decoded the command,
checked that this shard owns the id, and found the schedule (except for an
upsert, which may create it); it sends a DAG's ``dlq.replay`` to `DagRuns` and
calls `DagRuns.upserted` after a ``dag.upsert``. The decisions these methods implement are listed
in `actors.shard.core` ("Decisions").
"""

from __future__ import annotations

from actors.shard.batch import Batch, Definitions
from actors.shard.calendars import ShardCalendars
from actors.shard.dag_definition import dag_definition, dag_definition_bytes
from actors.shard.definition import Definition, definition_bytes, shared_definition
from actors.shard.misfire import plan_backlog
from actors.shard.pausing import pause_now
from actors.shard.retired import UPSERT_LOOKBACK_GRACES, Retired
from actors.shard.runs import RunBook
from actors.shard.state import DEAD_MEMORY, PauseInfo, RunState, ScheduleState, intern_bytes
from actors.wheel import TimingWheel
from topics.calendar_days import calendar_names
from topics.commands import DagUpsert, SchedulePause, ScheduleUpsert
from topics.messages import parse_run_id, run_id_for
from topics.records import InRecord
from topics.timefmt import format_ms
from topics.vocabulary import MisfireMode

__all__ = ["UPSERT_LOOKBACK_GRACES", "ScheduleCommands"]


class ScheduleCommands:
    """The schedule commands of one shard, written into its `Batch`."""

    def __init__(
        self,
        batch: Batch,
        schedules: dict[str, ScheduleState],
        wheel: TimingWheel[ScheduleState | RunState],
        definitions: Definitions,
        runs: RunBook,
        retired: Retired,
        calendars: ShardCalendars,
    ) -> None:
        self._calendars = calendars
        self._batch = batch
        self._dirty = batch.dirty
        self._schedules = schedules
        self._wheel = wheel
        self._definitions = definitions
        self._runs = runs
        self._retired = retired

    def upsert(
        self, command: ScheduleUpsert | DagUpsert, now_ms: int, produced_ms: int = 0
    ) -> None:
        """Create or redefine a schedule; ``produced_ms`` is the record's timestamp
        (0: unknown), from which a new schedule's occurrences count."""
        definition: Definition
        if isinstance(command, DagUpsert):
            def_bytes, definition = dag_definition_bytes(command), dag_definition(command)
        else:
            def_bytes = intern_bytes(definition_bytes(command))
            definition = shared_definition(command, def_bytes)
        floor_ms = now_ms - 1 - (definition.grace_ms if definition.is_at else 0)
        state = self._schedules.get(command.id)
        kept_ms = None  # a due ``next`` it keeps (maybe a backlog an edit heard late left)
        if state is None:
            state = self._schedules[command.id] = ScheduleState(command.id, def_bytes, definition)
            self._definitions.use(def_bytes)
            anchor_ms = floor_ms
            if 0 < produced_ms < now_ms:  # applied late: what came due since is not lost
                lookback_ms = UPSERT_LOOKBACK_GRACES * definition.grace_ms
                anchor_ms = min(floor_ms, max(produced_ms, now_ms - lookback_ms) - 1)
            if self._retired:  # the id was deleted: never what its predecessor handled
                handled_ms = self._retired.claim(command.id, now_ms)
                if handled_ms is not None:  # kept as its own floor, for later re-upserts
                    state.passed_ms = handled_ms
                    anchor_ms = max(anchor_ms, handled_ms)
        else:
            self._wheel.cancel(state)
            if state.paused:  # account for the pause so far under the old definition
                self._report_paused(state, now_ms)
            elif state.next_ms is not None and state.next_ms <= now_ms:
                kept_ms = state.next_ms
                floor_ms = min(floor_ms, kept_ms - 1)  # due, not yet fired: keep it
            elif state.next_ms is None and state.waiting is not None:
                # It waited for a calendar: what came due meanwhile is still owed.
                floor_ms = min(floor_ms, state.handled_ms() or floor_ms)
            # Never again what it handled: fired, or reported skipped or missed.
            handled_ms = state.handled_ms()
            anchor_ms = floor_ms if handled_ms is None else max(floor_ms, handled_ms)
            if def_bytes != state.def_bytes:
                self._definitions.drop(state.def_bytes)
                self._definitions.use(def_bytes)
            state.set_definition(def_bytes, definition)
        names = calendar_names(command.spec)  # a schedule's or a DAG's: bound alike
        if names or self._calendars.named(state.id):  # bound to the shard's calendars
            # A kept ``next`` older than an edit's commit: its backlog is walked by the
            # days before the edit, as the edit's re-arm bound it (`upserted`).
            if not self._calendars.upserted(state, names, kept_ms):  # waits (visibly)
                self._wait(state, anchor_ms)
                return
            if names:
                # Its floor, kept: an edit heard later re-arms from the edit's commit
                # (§5.7), which may be before this upsert; what came before it was
                # never this schedule's to fire or report.
                state.let_pass(anchor_ms)
            definition = state.definition
        state.next_ms = definition.compiled.next_after(anchor_ms)
        state.completed = None  # a new definition may fire again
        limit = definition.max_runs
        if limit is not None and state.fired_count >= limit:
            state.next_ms, state.completed = None, "max_runs"
        elif state.next_ms is None and state.last_fired_ms is not None:
            state.completed = "end"  # nothing after what it fired (a one-off, an end)
        pause = state.pause
        if not state.paused and state.next_ms is not None:  # armed again
            self._wheel.arm(state, state.next_ms)
        elif state.paused and pause is not None and pause.until_ms is not None:
            self._wheel.arm(state, pause.until_ms)  # it still resumes by itself
        self._dirty[state.id] = state

    def _wait(self, state: ScheduleState, anchor_ms: int) -> None:
        """An upserted schedule names a calendar the shard does not know: it fires
        nothing until it comes; what it had not handled by ``anchor_ms`` waits with it
        (its misfire policy judges it then, `actors.shard.calendars`)."""
        state.let_pass(anchor_ms)
        state.next_ms = None
        state.completed = None
        pause = state.pause
        if state.paused and pause is not None and pause.until_ms is not None:
            self._wheel.arm(state, pause.until_ms)
        self._dirty[state.id] = state

    def delete(self, state: ScheduleState, now_ms: int) -> None:
        self._calendars.forget(state.id)
        self._wheel.cancel(state)
        self._runs.forget_runs(state, now_ms)
        state.runs.clear()
        for scheduled_ms in state.buffered:
            self._runs.skipped(state, scheduled_ms, "Deleted", "the schedule was deleted")
        state.buffered.clear()
        del self._schedules[state.id]
        self._definitions.drop(state.def_bytes)
        self._dirty[state.id] = None
        self._retired.retire(state.id, state.handled_ms(), state.grace_ms(), now_ms)

    def pause(
        self, record: InRecord, state: ScheduleState, command: SchedulePause, now_ms: int
    ) -> None:
        """Stop firing (`actors.shard.pausing`); a pause of a paused schedule replaces
        its note, end and author."""
        if command.until_ms is not None and command.until_ms <= now_ms:
            self._batch.reject(
                record,
                f"until: {format_ms(command.until_ms)} is not in the future (now"
                f" {format_ms(now_ms)}); give a later instant, or resume the schedule",
            )
            return
        known = state.pause
        said = (command.note, command.until_ms, command.by)
        now_said = (None, None, None) if known is None else (known.note, known.until_ms, known.by)
        if state.paused and now_said == said:
            return  # paused already, as this says: nothing changes
        info = PauseInfo(at_ms=now_ms, note=command.note, until_ms=command.until_ms, by=command.by)
        if known is not None and state.paused:
            # Replacing a kept resume: its effect (what came due up to it reported
            # skipped) is carried, and applied when this pause ends (§5.7).
            info.resumed_as_of_ms = known.until_ms if known.resumed else known.resumed_as_of_ms
        # after_current with runs in flight: paused now, and said to be pausing until
        # the run book ends the last of them (`pausing.runs_ended`).
        pause_now(state, info, self._wheel, pending=command.after_current and bool(state._runs))
        self._dirty[state.id] = state

    def resume(self, state: ScheduleState, now_ms: int) -> None:
        if not state.paused:
            return
        pause = state.pause
        if pause is not None and pause.resumed:
            return  # resuming already, as of an earlier instant
        self._wheel.cancel(state)  # its ``until``, if armed
        limit_ms = self._calendars.fire_limit_ms(state)
        if limit_ms is not None and limit_ms < now_ms:
            # What came due while paused is reported skipped by the calendars in
            # effect, and they are known only as of ``limit_ms``: the resume is kept
            # (paused still, firing nothing) and completed once they are known as of
            # now (`ShardCore._fire_counted`, `finish_resume`; DESIGN §5.7).
            state.pause = PauseInfo(at_ms=now_ms, until_ms=now_ms, resumed=True)
            self._wheel.arm(state, now_ms)
            self._dirty[state.id] = state
            return
        self.finish_resume(state, now_ms, now_ms)

    def settle_resumed(self, state: ScheduleState, resumed_ms: int) -> None:
        """A pause that replaced a kept resume ends: what came due up to the resume's
        instant is reported skipped first, as the resume would have (the rest goes
        through the misfire policy, as after any pause ``until``)."""
        pause = state.pause
        if pause is not None:
            pause.resumed_as_of_ms = None
        next_ms = state.next_ms
        if next_ms is not None and next_ms <= resumed_ms:
            self._report_paused(state, resumed_ms)
        self._dirty[state.id] = state

    def finish_resume(self, state: ScheduleState, resumed_ms: int, now_ms: int) -> None:
        """Resume as of ``resumed_ms``: what came due while paused up to it is reported
        skipped, the schedule fires again."""
        self._wheel.cancel(state)
        state.pause = None
        self._report_paused(state, resumed_ms)
        state.paused = False
        if state.next_ms is not None:  # armed again
            self._wheel.arm(state, state.next_ms)
        self._runs.drain_buffer(state, now_ms)
        self._dirty[state.id] = state

    def _report_paused(self, state: ScheduleState, now_ms: int) -> None:
        """Report ``skipped`` the occurrences due while paused; move next past now."""
        plan = plan_backlog(
            state.definition.compiled.next_after,
            state.next_ms,
            now_ms,
            cutoff_ms=now_ms + 1,
            policy=MisfireMode.SKIP,
            catch_up_max=1,
        )
        for scheduled_ms in plan.missed:
            self._runs.skipped(state, scheduled_ms, "Paused", "the schedule was paused")
        if plan.summary is not None:
            self._runs.skipped_range(state, plan.summary)
        state.next_ms = plan.next_ms

    def trigger(self, record: InRecord, state: ScheduleState, now_ms: int) -> None:
        if state.completed == "max_runs":
            self._batch.reject(
                record,
                f"id: {state.id!r} is completed: its max_runs"
                f" ({state.definition.max_runs}) have all fired; raise max_runs with an"
                " upsert to run it again",
            )
            return
        # Commands are applied before `advance` in a turn: what is due by now fires
        # first, so an occurrence at this very instant is handled (fired, buffered
        # or skipped) before the collision check below, never after the trigger.
        next_ms = state.next_ms
        if next_ms is not None and next_ms <= now_ms and not state.paused:
            self._wheel.cancel(state)
            # Bounded by the calendars' freshness as `ShardCore.advance` is: what lies
            # beyond stays due (and is held there), never fired by stale days.
            self._runs.fire_due(state, now_ms, self._calendars.fire_limit_ms(state))
            if state.completed == "max_runs":  # what was due took its last run
                self._batch.reject(
                    record,
                    f"id: {state.id!r} is completed: its max_runs"
                    f" ({state.definition.max_runs}) have all fired; raise max_runs with"
                    " an upsert to run it again",
                )
                return
        run_id = run_id_for(state.id, now_ms)
        if (
            run_id in state.runs
            or now_ms in (state.last_fired_ms, state.next_ms)
            or state.definition.compiled.next_after(now_ms - 1) == now_ms
        ):
            self._batch.reject(
                record,
                f"id: {state.id!r} has an occurrence at this very instant "
                f"({format_ms(now_ms)}), which fires anyway; trigger again if you want "
                "another run",
            )
            return
        if now_ms == state.passed_ms:  # its run id was reported skipped or missed
            self._batch.reject(
                record,
                f"id: {state.id!r} had an occurrence at this very instant "
                f"({format_ms(now_ms)}) that was reported skipped or missed, and a run id "
                "names one occurrence once; trigger again if you want another run",
            )
            return
        self._runs.occurrence(state, now_ms, now_ms)
        self._dirty[state.id] = state

    def replay(self, record: InRecord, state: ScheduleState, run_id: str, now_ms: int) -> None:
        """``dlq.replay`` of a schedule's dead run (a DAG's is `DagRuns.replay`)."""
        last_attempt = state.dead.get(run_id)
        if run_id in state.runs:
            self._batch.reject(
                record,
                f"run_id: {run_id!r} is in flight on schedule {state.id!r}; only a "
                "dead-lettered run can be replayed (wait for its dlq record)",
            )
            return
        if last_attempt is None:
            self._batch.reject(
                record,
                f"run_id: {run_id!r} is not among the dead-lettered runs of schedule "
                f"{state.id!r} (the shard remembers the last {DEAD_MEMORY}); replay a "
                "run_id from a recent dlq record",
            )
            return
        _, scheduled_ms, task = parse_run_id(run_id)
        run = RunState(state, run_id, scheduled_ms, task, last_attempt + 1, last_attempt + 1)
        # Forgotten before the attempt: a Kafka target's attempt ends at once and may
        # be dead-lettered again, which remembers it anew (a later replay finds it).
        del state.dead[run_id]
        try:
            self._runs.start_attempt(state, run, now_ms)
        except BaseException:
            state.dead[run_id] = last_attempt  # not started: still replayable
            raise
        self._dirty[state.id] = state
