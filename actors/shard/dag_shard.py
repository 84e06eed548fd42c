"""The DAG half of the shard: ``dag.upsert``, ``dag.clear`` and DAG runs, as records.

`DagRuns` is a part of `ShardCore` (same rules: pure, no I/O, nothing raises
out of the entry points, whose ``try`` covers these methods). The run state and
its moves live in `dag_run`; this module only turns its steps into records and
into the core's ordinary task runs.

How a DAG fits the core
-----------------------
A DAG is a schedule whose definition is a `DagDefinition` and whose ``dag``
state (`ScheduleState.dag`) holds its runs (see `dag_run` for the JSON). Each
occurrence that starts a DAG run is fired like any other (misfire policy,
bounds, trigger, pause); instead of one run it starts the run's root tasks.

A task run is an ordinary `RunState` of the schedule, run id
``{dag}@{scheduled_at}/{task}``, with the task's own job, timeout and retry
policy (`DagRuns.task_policy`). Attempts, deadlines, retries with backoff, timeouts and
the dead-letter queue are therefore the core's, unchanged; when a task run ends
for good (success, cancellation, or the DLQ) the run book calls `DagRuns.task_ended`,
which moves the DAG run on and emits what became ready, in the same batch (so in
the same transaction as the result that caused it).

Each attempt of a task carries the DAG run's ``logical_date`` and
``data_interval`` (`DagDefinition.data_interval`: Airflow's convention), which a
worker passes to the job's `RunContext`.

Decisions
---------
- ``max_active_runs``: an occurrence due while that many runs are still running
  is reported ``skipped`` (error type ``MaxActiveRuns``), as ``overlap: skip``
  does for schedules; it is not queued. A run that failed is not active.
- ``dag.clear`` (and ``dlq.replay`` of a task run, which means the same) ignores
  ``max_active_runs``, as ``dlq.replay`` ignores overlap: it continues a run that
  already started. The task reruns at the attempt after its last one, with a
  fresh retry budget.
- An id is a schedule or a DAG for life: ``schedule.upsert`` of a DAG id, or
  ``dag.upsert`` of a schedule id, is rejected (delete it first).
- ``schedule.pause`` stops new DAG runs; tasks of running runs go on.
"""

from __future__ import annotations

from actors.shard import dag_run
from actors.shard.batch import Batch
from actors.shard.cancel import CANCELLED_ERROR, RunCancels
from actors.shard.dag_book import DagBook
from actors.shard.dag_definition import DagDefinition
from actors.shard.deadlines import new_watch
from actors.shard.runs import RunBook
from actors.shard.state import RunState, ScheduleState
from topics.commands import DagClear, DagUpsert, Job, RetryPolicy, ScheduleUpsert
from topics.messages import parse_run_id, result_value, run_id_for
from topics.names import TopicKind
from topics.records import InRecord, OutRecord
from topics.vocabulary import DagRunState, RunStatus, TaskState


class DagRuns:
    """The DAGs of one shard, written into its `Batch`: their task runs are the run
    book's, their cancelled tasks go through the cancels (see the module docstring)."""

    def __init__(
        self,
        batch: Batch,
        schedules: dict[str, ScheduleState],
        runs: RunBook,
        cancels: RunCancels,
    ) -> None:
        self._batch = batch
        self._out = batch.out
        self._dirty = batch.dirty
        self._counts = batch.counts
        self._schedules = schedules
        self._runs = runs
        self._cancels = cancels

    # --- commands -----------------------------------------------------------------

    def on_clear(self, record: InRecord, command: DagClear, now_ms: int) -> None:
        """``dag.clear``: rerun a task of a DAG run."""
        state = self._schedules.get(command.id)
        if state is None or state.dag is None:
            what = "no DAG" if state is None else "a schedule, not a DAG,"
            self._batch.reject(
                record,
                f"id: there is {what} {command.id!r}; dag.clear reruns a task of a DAG run "
                "(a schedule's dead run is started again with dlq.replay)",
            )
            return
        self._clear(record, state, command.run_id, command.task, now_ms)

    def kind_clash(self, record: InRecord, command: ScheduleUpsert | DagUpsert) -> bool:
        """Reject (True) an upsert that would turn a schedule into a DAG or back."""
        state = self._schedules.get(command.id)
        if state is None or (state.dag is not None) == isinstance(command, DagUpsert):
            return False
        was, now = (
            ("a DAG", "schedule.upsert") if state.dag is not None else ("a schedule", "dag.upsert")
        )
        self._batch.reject(
            record,
            f"id: {command.id!r} is {was}, which {now} cannot replace; delete it first "
            "(schedule.delete) or choose another id",
        )
        return True

    def upserted(self, state: ScheduleState, now_ms: int) -> None:
        """A ``dag.upsert`` was applied to ``state`` (`ScheduleCommands.upsert`): a new
        DAG gets its run book, a changed one reconciles its runs with the new graph."""
        if state.dag is None:
            state.dag = dag_run.new_state()
            return
        graph = _definition(state).graph
        for run_id, step in dag_run.reconcile(state.dag, graph, now_ms).items():
            self._apply(state, run_id, step, now_ms, ready_ms=_watched_from(state, run_id, now_ms))

    def _clear(
        self, record: InRecord, state: ScheduleState, run_id: str, task: str, now_ms: int
    ) -> None:
        step = dag_run.clear(_book(state), _definition(state).graph, run_id, task, now_ms)
        if isinstance(step, str):
            self._batch.reject(record, step)
            return
        dead = state.dead_or_none  # read without making an Aside
        if dead:
            dead.pop(run_id_for(state.id, _scheduled_ms(run_id), task), None)
        self._apply(state, run_id, step, now_ms)
        self._dirty[state.id] = state

    def replay(self, record: InRecord, state: ScheduleState, run_id: str, now_ms: int) -> None:
        """``dlq.replay`` of a DAG's task run: the same as clearing that task."""
        _, scheduled_ms, task = parse_run_id(run_id)
        if task is None:
            self._batch.reject(
                record,
                f"run_id: {run_id!r} is a whole DAG run; replay one of its task runs "
                f"({run_id}/TASK) or send dag.clear with the task",
            )
            return
        self._clear(record, state, run_id_for(state.id, scheduled_ms), task, now_ms)

    # --- occurrences and task runs -------------------------------------------------

    def occurrence(self, state: ScheduleState, scheduled_ms: int, now_ms: int) -> None:
        """An occurrence of a DAG is due: start a DAG run, or report it skipped."""
        definition = _definition(state)
        dag = _book(state)
        run_id = run_id_for(state.id, scheduled_ms)
        if run_id in dag.runs:
            self._runs.skipped(state, scheduled_ms, "Duplicate", "a DAG run with this id exists")
            return
        active = dag_run.active_count(dag)
        if active >= definition.max_active_runs:
            self._runs.skipped(
                state,
                scheduled_ms,
                "MaxActiveRuns",
                f"{active} runs of this DAG were still running "
                f"(max_active_runs {definition.max_active_runs})",
            )
            return
        self._runs.fired(state, scheduled_ms)
        self._counts["fired_total"] += 1
        interval = definition.data_interval(scheduled_ms)
        step = dag_run.start_run(dag, definition.graph, run_id, scheduled_ms, interval, now_ms)
        # The roots became ready at the run's instant: a late fire (a takeover) is late.
        self._apply(state, run_id, step, now_ms, ready_ms=scheduled_ms)

    def start_backfill_run(
        self, state: ScheduleState, scheduled_ms: int, attempt: int, now_ms: int
    ) -> str:
        """A backfill starts the DAG run of ``scheduled_ms`` (docs/DESIGN.md §6.9): with
        the occurrence's own logical date and data interval, its roots at attempt 1
        (its task run ids never ran), and its own end result at ``attempt`` (2 for a
        missed or skipped occurrence, whose result holds attempt 1). Not counted
        against ``max_active_runs`` nor as a live fire. Returns the DAG run's id."""
        definition = _definition(state)
        run_id = run_id_for(state.id, scheduled_ms)
        book = _book(state)
        out_before = len(self._out)
        step = dag_run.start_run(
            book,
            definition.graph,
            run_id,
            scheduled_ms,
            definition.data_interval(scheduled_ms),
            now_ms,
            ends=attempt - 1,
            backfill=True,
        )
        try:
            self._apply(state, run_id, step, now_ms)
        except BaseException:
            # All or nothing: a DAG run left in the book with some roots unstarted
            # would make the next pump let the instant pass (its run "is running")
            # with tasks that never run. Undo it whole (the roots' attempts already
            # emitted in this batch too); the cursor has not moved, so the next pump
            # starts it again from scratch.
            del self._out[out_before:]
            book.runs.pop(run_id, None)
            runs = state.runs
            for task, _ in step.start:
                if runs.pop(run_id_for(state.id, scheduled_ms, task), None) is not None:
                    self._runs.in_flight -= 1
            raise
        self._dirty[state.id] = state
        return run_id

    def running(self, state: ScheduleState, run_id: str) -> bool:
        """Whether the DAG run ``run_id`` is known and still running."""
        dag = state.dag
        run = None if dag is None else dag.runs.get(run_id)
        return run is not None and run.state == DagRunState.RUNNING

    def task_ended(self, state: ScheduleState, run: RunState, now_ms: int) -> None:
        """A task run ended for good (the core calls this right after `_outcome`)."""
        if state.dag is None or run.task is None:
            return
        status = RunStatus(run.outcomes[-1]["status"]) if run.outcomes else RunStatus.SUCCEEDED
        if status not in (RunStatus.SUCCEEDED, RunStatus.CANCELLED):
            status = RunStatus.FAILED  # failed or timed_out, past its retries
        run_id = run_id_for(state.id, run.scheduled_ms)
        graph = _definition(state).graph
        step = dag_run.task_ended(state.dag, graph, run_id, run.task, status, run.attempt, now_ms)
        self._apply(state, run_id, step, now_ms, ready_ms=_watched_from(state, run_id, now_ms))

    def _apply(
        self,
        state: ScheduleState,
        run_id: str,
        step: dag_run.Step,
        now_ms: int,
        ready_ms: int | None = None,
    ) -> None:
        """Write what a step of DAG run ``run_id`` decided. ``ready_ms``: when the tasks
        it starts became ready, from which a DAG's ``deadline`` counts for each task run
        at its first attempt; None: not watched (a clear, a replay, a backfill, as a
        schedule's replayed or backfilled runs are not)."""
        scheduled_ms = _scheduled_ms(run_id)
        deadline = None if ready_ms is None else _definition(state).deadline
        for task in step.cancel:
            why = "cancelled by the shard: a dag.upsert removed the task"
            self._cancel_task(state, scheduled_ms, task, why, now_ms)
        if step.stop or step.cancelled:
            found = None if state.dag is None else state.dag.runs.get(run_id)
            reason = "" if found is None or found.cancel is None else found.cancel
            for task, attempt in step.cancelled:  # first: a stopped task may end the run
                self._runs.shard_result(
                    state, scheduled_ms, RunStatus.CANCELLED, CANCELLED_ERROR, reason, task, attempt
                )
                self._counts["cancelled_total"] += 1
            for task in step.stop:
                self._cancel_task(state, scheduled_ms, task, reason, now_ms)
        for task, attempt, origin in step.upstream_failed:
            why = (
                f"task {origin!r} upstream of it did not succeed in "
                f"{run_id}; fix it and send dag.clear for {origin!r}"
            )
            self._runs.shard_result(
                state, scheduled_ms, RunStatus.UPSTREAM_FAILED, "UpstreamFailed", why, task, attempt
            )
        for task, attempt in step.start:
            run = RunState(
                state,
                run_id_for(state.id, scheduled_ms, task),
                scheduled_ms,
                task,
                attempt,
                attempt,
            )
            if deadline is not None and ready_ms is not None and attempt == 1:
                run.watch = new_watch(deadline, ready_ms)  # before its record asks for a report
            self._runs.start_attempt(state, run, now_ms)
        if step.ended is not None:
            self._run_result(state, run_id, scheduled_ms, now_ms)
            backfill = state.backfill
            held = backfill.holds if backfill is not None and backfill.ranges else None
            dag_run.forget_ended(_book(state), held)

    def _run_result(
        self, state: ScheduleState, run_id: str, scheduled_ms: int, now_ms: int
    ) -> None:
        """The DAG run's own result (``task`` null), written in the transaction that
        records its end in the changelog: once per end, whatever fails over. A run
        that ends again after a ``dag.clear`` gets the next attempt number."""
        run = _book(state).runs[run_id]
        run.ends += 1
        attempt = run.ends
        counts: dict[str, int] = {}
        at_fault: list[str] = []
        for name, task in run.tasks.items():
            state_name = str(task.state)  # a plain str: orjson takes no enum as a key
            counts[state_name] = counts.get(state_name, 0) + 1
            if task.state in (TaskState.FAILED, TaskState.CANCELLED):
                at_fault.append(name)
        status = RunStatus(run.state)  # a DAG run ends succeeded, failed or cancelled
        error = None
        if status == RunStatus.CANCELLED:
            error = {
                "type": CANCELLED_ERROR,
                "message": f"{run.cancel or 'cancelled'}; "
                + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
            }
        elif status != RunStatus.SUCCEEDED:
            shown = ", ".join(at_fault[:10]) + (" ..." if len(at_fault) > 10 else "")
            error = {
                "type": "TaskFailed",
                "message": f"task(s) at fault: {shown or 'none'}; "
                + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
            }
        started_ms = run.started_ms
        self._out.append(
            OutRecord(
                TopicKind.RESULTS,
                state.key,
                result_value(
                    run_id=run_id,
                    schedule_id=state.id,
                    task=None,
                    attempt=attempt,
                    status=status,
                    scheduled_ms=scheduled_ms,
                    started_ms=scheduled_ms if started_ms is None else started_ms,
                    finished_ms=now_ms,
                    worker=self._runs.worker,
                    error=error,
                    counts=counts,
                ),
                self._batch.partition,
            )
        )

    def cancel_run(self, state: ScheduleState, run_id: str, reason: str, now_ms: int) -> str:
        """``run.cancel`` of a whole DAG run: its running task runs are asked to stop,
        its waiting tasks end ``cancelled``; "" when done, else why not."""
        if state.dag is None:
            return f"run_id: {run_id} is not a DAG run"
        step = dag_run.cancel_run(state.dag, _definition(state).graph, run_id, reason, now_ms)
        if isinstance(step, str):
            return step
        self._apply(state, run_id, step, now_ms)
        self._dirty[state.id] = state
        return ""

    def _cancel_task(
        self, state: ScheduleState, scheduled_ms: int, task: str, why: str, now_ms: int
    ) -> None:
        """A running task is cancelled (removed from the DAG by a ``dag.upsert``, or
        its DAG run cancelled): cancel its task run by the one
        cancel path (`cancel`, docs/DESIGN.md §6.6), so its attempt has one result.

        An attempt out on ``{ns}.runs`` gets a cancel record and its worker's result
        ends the run (the shard's own ``cancelled`` only if none comes by the
        deadline); a run waiting to retry ends ``cancelled`` for the attempt that
        would have come next. The task is ``removed`` in the DAG run already, so its
        end moves nothing on.
        """
        run = state.runs.get(run_id_for(state.id, scheduled_ms, task))
        if run is None:
            return
        if run.retry_ms is not None:
            self._cancels.cancel_waiting(state, run, why, now_ms)
        elif run.cancel_reason is None:
            self._cancels.request_cancel(state, run, why, now_ms)

    # --- what each attempt of a task carries ----------------------------------------

    def task_policy(self, state: ScheduleState, run: RunState) -> tuple[Job, int, RetryPolicy]:
        """The job (its keys rendered, as its run records carry it), timeout (ms) and
        retry policy of a task run."""
        assert run.task is not None
        definition = _definition(state)
        task = definition.tasks[run.task]
        return definition.run_jobs[run.task], task.timeout_s * 1000, task.retry

    def dates(
        self, state: ScheduleState, run: RunState
    ) -> tuple[int | None, tuple[int, int] | None]:
        """``(logical_date_ms, data_interval)`` for an attempt of ``run``."""
        if state.dag is None or run.task is None:
            return None, None
        found = dag_run.dates_of(state.dag, run_id_for(state.id, run.scheduled_ms))
        return (None, None) if found is None else found


def _definition(state: ScheduleState) -> DagDefinition:
    definition = state.definition
    if not isinstance(definition, DagDefinition):
        raise TypeError(f"{state.id!r} has DAG state but a schedule's definition")
    return definition


def _book(state: ScheduleState) -> DagBook:
    book = state.dag
    if book is None:
        raise TypeError(f"{state.id!r} has a DAG's definition but no DAG run book")
    return book


def _scheduled_ms(run_id: str) -> int:
    return parse_run_id(run_id)[1]


def _watched_from(state: ScheduleState, run_id: str, now_ms: int) -> int | None:
    """The instant the tasks a DAG run's step releases now became ready (now: the
    shard applied what they waited for); None in a backfill's run (not watched)."""
    found = None if state.dag is None else state.dag.runs.get(run_id)
    return None if found is not None and found.backfill else now_ms
