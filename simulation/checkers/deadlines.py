"""Deadline alerts: every late run exactly one alert per deadline, no punctual run any.

For each run of a schedule with a ``deadline`` (its first run record names it), per
deadline (start, finish), the truth is read from the topics:

- *late*: its first reported start (``started_at`` of the first result that had
  one) is after the deadline, or it ended with no start reported, visibly after the
  deadline, or it never started by the end of the run and the deadline passed long
  before (the grace and the settle time). The finish likewise, by its end (a
  succeeded or cancelled result's ``finished_at``, a dead letter's ``dead_at``).
  A late run has exactly one ``deadline_missed``.
- *punctual*: it started (ended) by the deadline and that report was on the results
  topic within half the report grace after it (`DEADLINE_REPORT_GRACE_MS`: the shard
  judges by its own clock, which may run a little ahead). A punctual run has none.
- in between (in time, reported late): at most one, closed by a
  ``deadline_recovered`` that says it was in time (``late_by_ms`` <= 0).

A DAG's deadline is per task run, counted from when the task became ready: a root
from its DAG run's instant, any other task from its release (its first attempt's
``fired_at``, the shard's instant when it applied the last upstream success). Only a
task run's first attempt is watched (a cleared task is not).

Everywhere: at most one ``deadline_missed`` per run and deadline, at most one
``deadline_recovered``, and never a recovered one without its missed one. A shard
that forgot on restore that it had alerted (broken variant
``restore-forgets-alerts``) writes a second one and is caught here.
"""

from __future__ import annotations

from collections import Counter

from simulation.checkers.evidence import DETAIL_MAX, Evidence, Verdict
from topics.alerts import DEADLINE_REPORT_GRACE_MS, AlertType, DeadlineKind

NAME = "deadlines"


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict(
        NAME, "every late run exactly one deadline_missed per deadline, no punctual run any"
    )
    seen = evidence.deadlines
    watched: dict[str, tuple[int | None, int | None]] = {}
    for schedule_id, command in evidence.definitions.items():
        if command.deadline is not None:
            start_s, finish_s = command.deadline.start_within_s, command.deadline.finish_within_s
            watched[schedule_id] = (
                None if start_s is None else start_s * 1000,
                None if finish_s is None else finish_s * 1000,
            )
    missed: Counter[tuple[str, str]] = Counter()
    recovered: Counter[tuple[str, str]] = Counter()
    recovered_late: dict[tuple[str, str], int] = {}
    for alert, _ in seen.alerts:
        key = (alert.run_id, alert.deadline.value)
        if alert.type is AlertType.MISSED:
            missed[key] += 1
        else:
            recovered[key] += 1
            recovered_late[key] = alert.late_by_ms
    for key in missed + recovered:
        if missed[key] > 1 or recovered[key] > 1 or (recovered[key] and not missed[key]):
            _fail(
                verdict,
                f"{key[0]} ({key[1]}): {missed[key]} deadline_missed, "
                f"{recovered[key]} deadline_recovered (at most one each, recovered only after "
                "missed)",
            )
    dags: dict[str, tuple[tuple[int | None, int | None], frozenset[str]]] = {}
    for dag_id, dag in evidence.dags.items():
        if dag.deadline is not None:
            start_s, finish_s = dag.deadline.start_within_s, dag.deadline.finish_within_s
            roots = frozenset(name for name, task in dag.tasks.items() if not task.after)
            dags[dag_id] = (
                (
                    None if start_s is None else start_s * 1000,
                    None if finish_s is None else finish_s * 1000,
                ),
                roots,
            )
    late_after_ms = DEADLINE_REPORT_GRACE_MS + evidence.settle_ms
    fired: set[str] = set()
    for run in evidence.runs:
        if run.run_id in fired:
            continue
        ready_ms: int | None
        if run.task is None:
            within = watched.get(run.schedule_id)
            ready_ms = run.scheduled_ms
        else:
            found = dags.get(run.schedule_id)
            if found is None or run.attempt != 1:
                continue
            within, roots = found
            ready_ms = run.scheduled_ms if run.task in roots else run.fired_ms
        if within is None or ready_ms is None:
            continue
        fired.add(run.run_id)
        end = seen.ends.get(run.run_id)
        for kind, within_ms, told in (
            (DeadlineKind.START, within[0], seen.starts.get(run.run_id)),
            (DeadlineKind.FINISH, within[1], end),
        ):
            if within_ms is None:
                continue
            verdict.checked += 1
            due_ms = ready_ms + within_ms
            key = (run.run_id, kind.value)
            count = missed[key]
            if told is not None:
                at_ms, visible_ms = told
                late = at_ms > due_ms
                punctual = not late and visible_ms <= due_ms + DEADLINE_REPORT_GRACE_MS // 2
            elif end is not None:  # ended without saying it started
                late = end[1] > due_ms + DEADLINE_REPORT_GRACE_MS // 2
                punctual = end[1] <= due_ms - DEADLINE_REPORT_GRACE_MS // 2
            else:  # still going at the end of the story
                late = evidence.end_ms > due_ms + late_after_ms
                punctual = False
            if late and count != 1:
                _fail(verdict, f"{run.run_id}: late for its {kind} deadline, {count} alerts")
            elif punctual and count:
                _fail(verdict, f"{run.run_id}: in time for its {kind} deadline, {count} alerts")
            elif not late and count and recovered_late.get(key, 0) > 0 and told is not None:
                _fail(
                    verdict,
                    f"{run.run_id}: in time for its {kind} deadline, yet recovered late by "
                    f"{recovered_late[key]} ms",
                )
    return verdict


def _fail(verdict: Verdict, text: str) -> None:
    if len(verdict.violations) < DETAIL_MAX:
        verdict.fail(text)
    elif len(verdict.violations) == DETAIL_MAX:
        verdict.fail("... (more)")
