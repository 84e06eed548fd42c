"""Cancelling runs in flight: ``run.cancel`` and ``overlap: cancel_other``.

`RunCancels` is a part of `ShardCore` (same rules: pure, no I/O). How a cancel
reaches the job (docs/DESIGN.md §6.6):

- A run whose attempt is out on ``{ns}.runs`` (running, or waiting for a worker)
  gets a *cancel record* on ``{ns}.runs``, keyed like the run, so it lands on the
  run's partition after the run, in the same transaction that marks the run
  ``cancel`` in the changelog. The worker holding the attempt stops it and writes
  the attempt's one ``cancelled`` result; a worker that adopts the partition after
  a failover reads the run and then the cancel record, and never starts it. The
  shard keeps the run in flight until that result comes: the worker's result is
  the only one, whatever its status (a job that succeeded just before the cancel
  arrived stays ``succeeded``), and no status of a cancelled attempt is retried.
  If no result comes by the attempt's deadline plus the margin (no worker had
  it), the shard writes ``cancelled`` itself, as it writes ``timed_out`` otherwise.
- A run waiting for a retry has no attempt out: the shard writes ``cancelled``
  for the attempt that would have come next (never started) and ends the run.
- An occurrence buffered behind another run is dropped with a ``cancelled`` result.
- A run no longer in flight is reported on ``{ns}.rejected`` as nothing to cancel
  (the command is not at fault; its run simply ended first).

The shard writes results itself only for attempts no worker can write (§3.5), so
one visible result per (run_id, attempt) holds.
"""

from __future__ import annotations

from typing import Protocol

from actors.shard.batch import Batch
from actors.shard.runs import RunBook
from actors.shard.state import RunState, ScheduleState, instant_text
from topics.command_types import RunCancel
from topics.messages import cancel_value, parse_run_id
from topics.names import TopicKind
from topics.records import InRecord, OutRecord
from topics.vocabulary import RunStatus

_RUNS = TopicKind.RUNS

CANCELLED_ERROR = "Cancelled"
"""The ``error.type`` of a cancelled attempt's result (the message is the reason)."""


class DagCancel(Protocol):
    """What the cancels ask of the DAG runs (`dag_shard.DagRuns`, which builds on
    this module): cancel a whole DAG run; "" when done, else why not."""

    def cancel_run(self, state: ScheduleState, run_id: str, reason: str, now_ms: int) -> str: ...


class RunCancels:
    """``run.cancel`` and ``cancel_other`` of one shard, written into its `Batch`.

    The run book ends the runs; a whole DAG run's cancel is the DAG runs' (built on
    this module, so wired in once by `ShardCore`, with `wire`, as `DagCancel`).
    """

    _dags: DagCancel

    def __init__(self, batch: Batch, runs: RunBook) -> None:
        self._batch = batch
        self._out = batch.out
        self._dirty = batch.dirty
        self._counts = batch.counts
        self._runs = runs

    def wire(self, dags: DagCancel) -> None:
        self._dags = dags

    def on_cancel(
        self, record: InRecord, state: ScheduleState, command: RunCancel, now_ms: int
    ) -> None:
        run_id = command.run_id
        run = (state._runs or {}).get(run_id)
        if run is not None:
            if run.retry_ms is not None:
                self.cancel_waiting(state, run, command.reason, now_ms)
            elif run.cancel_reason is None:
                self.request_cancel(state, run, command.reason, now_ms)
            else:
                self._batch.reject(
                    record,
                    f"run_id: {run_id} attempt {run.attempt} is being cancelled already "
                    f"({run.cancel_reason}); its result will say cancelled",
                )
            return
        _, scheduled_ms, task = parse_run_id(run_id)
        buffered = state.buffered_or_none
        if task is None and buffered and scheduled_ms in buffered:
            buffered.remove(scheduled_ms)
            self._runs.unbuffered(state, 1)
            self._runs.shard_result(
                state, scheduled_ms, RunStatus.CANCELLED, CANCELLED_ERROR, command.reason
            )
            self._counts["cancelled_total"] += 1
            self._dirty[state.id] = state
            return
        if state.dag is not None and task is None:
            why_not = self._dags.cancel_run(state, run_id, command.reason, now_ms)
            if why_not:
                self._batch.reject(record, why_not)
            return
        self._batch.reject(
            record,
            f"run_id: nothing to cancel, {run_id} is not in flight: it already ended "
            "(see its results) or never fired",
        )

    def request_cancel(self, state: ScheduleState, run: RunState, reason: str, now_ms: int) -> None:
        """Ask the worker of the current attempt to stop it (the cancel record, on the
        run's own topic and partition: its queue's, docs/DESIGN.md §8.1)."""
        value = cancel_value(
            run_id=run.run_id,
            schedule_id=state.id,
            task=run.task,
            attempt=run.attempt,
            reason=reason,
            requested_ms=now_ms,
        )
        placed = run.placed  # where the attempt went, whatever the definition says now
        if placed is None:
            self._out.append(OutRecord(_RUNS, state.key, value))
        else:  # written there, or owed until the topic can take it
            self._runs.queue_cancel(state, run, placed, value, now_ms)
        run.cancel_reason = reason
        self._counts["cancel_requested_total"] += 1
        self._dirty[state.id] = state

    def cancel_waiting(self, state: ScheduleState, run: RunState, reason: str, now_ms: int) -> None:
        """A run between attempts: the next attempt is reported cancelled, never run."""
        run.attempt += 1
        run.fired_ms = now_ms
        error = {"type": CANCELLED_ERROR, "message": reason}
        self._runs.run_result(run, RunStatus.CANCELLED, now_ms, error)
        self._runs.outcome(run, RunStatus.CANCELLED, now_ms, error, self._runs.worker)
        self._counts["cancelled_total"] += 1
        self._runs.end_run(state, run, now_ms)
        self._dirty[state.id] = state

    def cancelled_unconfirmed(self, run: RunState, now_ms: int) -> None:
        """The deadline of a cancelled attempt passed with no result: no worker had
        it (or none will write any more), so the shard ends it ``cancelled``."""
        state = run.schedule
        reason = run.cancel_reason or ""
        error = {
            "type": CANCELLED_ERROR,
            "message": f"{reason} (no worker reported the attempt by its deadline "
            f"{instant_text(run.deadline_ms)}; the shard ended it)",
        }
        self._runs.run_result(run, RunStatus.CANCELLED, now_ms, error)
        self._runs.outcome(run, RunStatus.CANCELLED, now_ms, error, self._runs.worker)
        self._counts["cancelled_total"] += 1
        self._runs.end_run(state, run, now_ms)
        self._dirty[state.id] = state
