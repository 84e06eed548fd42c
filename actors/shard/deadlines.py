"""Deadline alerts of a shard's runs: pure, written into the shard's batch (§6.10).

A schedule with ``deadline`` gives each of its runs a `Watch` when it fires: the
instants by which the run must have started and ended (its scheduled instant plus
``start_within_s`` / ``finish_within_s``), what the shard has learnt of its start,
and which alerts it has written. The watch is part of the run's changelog entry, so
the fact "alert written" is restored with the run by the next owner of the shard, in
the same transaction as the alert itself: exactly one ``deadline_missed`` per run and
deadline broken, across any failover, and one ``deadline_recovered`` closing it.

How the shard learns:

- the start: any result of the run's attempts carries ``started_at``; a worker
  reports it at once for a run whose record says ``report_start`` (a progress
  report), so a long job's start is known before it ends;
- the end: the run leaves the run book (succeeded, dead-lettered, cancelled), at the
  result's ``finished_at`` (the shard's instant when the shard ended it);
- silence: `DEADLINE_REPORT_GRACE_MS` after a deadline with neither, the run is late
  by now. A new owner judges nothing by silence until that grace after its restore,
  so the results written while the shard had no owner are read first; nor does a
  shard whose `advance` came long after it was expected (a frozen process, see
  `ShardCore.advance`), so the results that came while it was frozen are read first.

The run's wheel node is its one timer: it is armed at the earlier of the attempt's
own instant (deadline plus margin, or retry) and the watch's next judgement
(`timer_ms`), and `ShardCore.advance` asks `judge` before the attempt's business.
"""

from __future__ import annotations

from actors.shard.state import RunState, Watch
from topics.alerts import DEADLINE_REPORT_GRACE_MS, Alert, AlertType, DeadlineKind, alert_value
from topics.deadlines import TIMEOUT_MARGIN_MS
from topics.names import TopicKind
from topics.records import OutRecord

__all__ = ["DeadlineAlerts", "attempt_due_ms", "new_watch"]

_ALERTS = TopicKind.ALERTS
_START = DeadlineKind.START
_FINISH = DeadlineKind.FINISH


def new_watch(deadline: tuple[int | None, int | None], scheduled_ms: int) -> Watch:
    """The watch of a run fired for ``scheduled_ms`` under a definition's deadline."""
    start_ms, finish_ms = deadline
    return Watch(
        None if start_ms is None else scheduled_ms + start_ms,
        None if finish_ms is None else scheduled_ms + finish_ms,
    )


def attempt_due_ms(run: RunState) -> int:
    """The instant of the attempt's own timer: its verdict, or its retry."""
    return run.deadline_ms + TIMEOUT_MARGIN_MS if run.retry_ms is None else run.retry_ms


class DeadlineAlerts:
    """The alerts of one shard's runs, appended to the batch's records."""

    __slots__ = ("_counts", "_out", "silent_from_ms")

    def __init__(self, out: list[OutRecord], counts: dict[str, int]) -> None:
        self._out = out
        self._counts = counts
        # Before this instant nothing is judged by silence (a restore's grace).
        self.silent_from_ms = 0

    def timer_ms(self, run: RunState) -> int:
        """When ``run``'s timer must come due next (see the module's docstring)."""
        due_ms = attempt_due_ms(run)
        watch = run.watch
        if watch is not None:
            check_ms = watch.check_ms()
            if check_ms is not None:
                check_ms = max(check_ms + DEADLINE_REPORT_GRACE_MS, self.silent_from_ms)
                if check_ms < due_ms:
                    return check_ms
        return due_ms

    def restored(self, now_ms: int) -> None:
        """A restore finished at ``now_ms`` (or the shard's caller was found stalled):
        give the results backlog its grace before anything is judged by silence."""
        self.silent_from_ms = max(self.silent_from_ms, now_ms + DEADLINE_REPORT_GRACE_MS)

    def judge(self, run: RunState, now_ms: int) -> bool:
        """The run's timer came due: alert what silence has broken. Whether it wrote."""
        watch = run.watch
        if watch is None or now_ms < self.silent_from_ms:
            return False
        wrote = False
        for kind in (_START, _FINISH):
            due_ms = watch.due_ms(kind)
            if (
                due_ms is not None
                and not watch.alerted(kind)
                and not watch.done(kind)
                and now_ms >= due_ms + DEADLINE_REPORT_GRACE_MS
            ):
                self._write(run, AlertType.MISSED, kind, due_ms, now_ms - due_ms, now_ms, None)
                watch.mark_alerted(kind)
                wrote = True
        return wrote

    def started(self, run: RunState, started_ms: int, now_ms: int) -> bool:
        """A result says an attempt of ``run`` started at ``started_ms``. Whether it wrote
        or changed anything (the caller writes the run's changelog entry)."""
        watch = run.watch
        if watch is None or watch.started_ms is not None:
            return False
        watch.started_ms = started_ms
        due_ms = watch.start_due_ms
        if due_ms is not None and not watch.done(_START):
            late_ms = started_ms - due_ms
            if watch.alerted(_START):
                self._write(run, AlertType.RECOVERED, _START, due_ms, late_ms, now_ms, started_ms)
            elif late_ms > 0:
                self._write(run, AlertType.MISSED, _START, due_ms, late_ms, now_ms, started_ms)
            if late_ms > 0:
                self._counts["late_starts_total"] += 1
            watch.mark_done(_START)
        return True

    def ended(self, run: RunState, finished_ms: int, now_ms: int) -> None:
        """``run`` leaves the run book now, ended at ``finished_ms``: a start never
        reported is judged by now (and its alert closed, as never started), the finish
        by ``finished_ms``."""
        watch = run.watch
        if watch is None:
            return
        due_ms = watch.start_due_ms
        if due_ms is not None and not watch.done(_START):  # it never said it started
            if watch.alerted(_START):
                self._write(run, AlertType.RECOVERED, _START, due_ms, now_ms - due_ms, now_ms, None)
            elif now_ms > due_ms:
                self._write(run, AlertType.MISSED, _START, due_ms, now_ms - due_ms, now_ms, None)
            watch.mark_done(_START)
        due_ms = watch.finish_due_ms
        if due_ms is not None and not watch.done(_FINISH):
            late_ms = finished_ms - due_ms
            if watch.alerted(_FINISH):
                self._write(run, AlertType.RECOVERED, _FINISH, due_ms, late_ms, now_ms, finished_ms)
            elif late_ms > 0:
                self._write(run, AlertType.MISSED, _FINISH, due_ms, late_ms, now_ms, finished_ms)
            watch.mark_done(_FINISH)

    def forgotten(self, run: RunState, now_ms: int) -> None:
        """``run``'s schedule is deleted: its open alerts are closed, nothing new raised."""
        watch = run.watch
        if watch is None:
            return
        for kind in (_START, _FINISH):
            due_ms = watch.due_ms(kind)
            if due_ms is not None and watch.alerted(kind) and not watch.done(kind):
                self._write(run, AlertType.RECOVERED, kind, due_ms, now_ms - due_ms, now_ms, None)
                watch.mark_done(kind)

    def _write(
        self,
        run: RunState,
        kind: AlertType,
        deadline: DeadlineKind,
        due_ms: int,
        late_ms: int,
        now_ms: int,
        seen_ms: int | None,
    ) -> None:
        state = run.schedule
        alert = Alert(
            type=kind,
            deadline=deadline,
            run_id=run.run_id,
            schedule_id=state.id,
            task=run.task,
            scheduled_ms=run.scheduled_ms,
            due_ms=due_ms,
            attempt=run.attempt,
            late_by_ms=late_ms,
            at_ms=now_ms,
            seen_ms=seen_ms,
        )
        self._out.append(OutRecord(_ALERTS, state.key, alert_value(alert)))
        name = "deadline_missed_total" if kind is AlertType.MISSED else "deadline_recovered_total"
        self._counts[name] += 1
