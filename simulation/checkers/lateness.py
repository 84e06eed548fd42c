"""On time once healed (docs/DESIGN.md §3.4): lateness within the scenario's bound.

Occurrences due after the heal plus the settle time (a session timeout and a
rebuild) must be appended within ``lateness_bound_ms`` of their scheduled
instant. Runs that waited on purpose are excused: an occurrence buffered behind a
run in flight (overlap ``buffer_one``/``buffer_all``) starts when that run ends.
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms
from topics.vocabulary import OverlapPolicy

BUFFERING = (OverlapPolicy.BUFFER_ONE, OverlapPolicy.BUFFER_ALL)


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("on-time", f"after healing, lateness <= {evidence.lateness_bound_ms} ms")
    from_ms = evidence.heal_ms + evidence.settle_ms
    for run in evidence.runs:
        if run.attempt != 1 or run.scheduled_ms < from_ms:
            continue
        command = evidence.definitions.get(run.schedule_id)
        if command is not None and command.overlap in BUFFERING:
            continue
        dag = evidence.dags.get(run.schedule_id)
        if dag is not None and run.task is not None and dag.tasks[run.task].after:
            continue  # a downstream task starts when its dependencies are done
        verdict.checked += 1
        late_ms = run.append_ms - run.scheduled_ms
        if late_ms > evidence.lateness_bound_ms:
            verdict.fail(f"{run.run_id} appended at {format_ms(run.append_ms)}: {late_ms} ms late")
    return verdict
