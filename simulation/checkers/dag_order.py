"""DAG order: a task starts only after every task it comes after succeeded.

For each DAG run (a DAG id and an occurrence), each task's first attempt is
appended to runs no earlier than the ``succeeded`` result of each of its
dependencies in the same run; a task reported ``upstream_failed`` never runs
(the simulated scenarios send no ``dag.clear``); and a task never runs before its
run's occurrence. Judged by the broker's append times.
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.messages import run_id_for
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("dag-order", "a DAG task starts after its dependencies succeeded")
    succeeded: dict[str, int] = {}
    upstream_failed: set[str] = set()
    for r in evidence.results:
        if r.task is None or r.schedule_id not in evidence.dags:
            continue
        if r.status == RunStatus.SUCCEEDED:
            succeeded.setdefault(r.run_id, r.append_ms)
        elif r.status == RunStatus.UPSTREAM_FAILED:
            upstream_failed.add(r.run_id)
    started: set[str] = set()
    for run in evidence.runs:
        dag = evidence.dags.get(run.schedule_id)
        if dag is None or run.task is None or run.run_id in started:
            continue
        started.add(run.run_id)
        verdict.checked += 1
        if run.run_id in upstream_failed:
            verdict.fail(f"{run.run_id} ran although it was reported upstream_failed")
        task = dag.tasks.get(run.task)
        if task is None:
            verdict.fail(f"{run.run_id}: no task {run.task!r} in the DAG")
            continue
        for dependency in task.after:
            dep_id = run_id_for(run.schedule_id, run.scheduled_ms, dependency)
            done_ms = succeeded.get(dep_id)
            if done_ms is None or done_ms > run.append_ms:
                when = "never" if done_ms is None else f"only at {format_ms(done_ms)}"
                verdict.fail(
                    f"{run.run_id} started at {format_ms(run.append_ms)}, but {dependency} "
                    f"succeeded {when}"
                )
    return verdict
