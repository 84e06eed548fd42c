"""A schedule with ``max_runs`` N starts at most N runs, ever, and exactly N once enough
occurrences came due (docs/DESIGN.md §2.2; the count is in the changelog, so a
takeover neither forgets nor repeats it).

Counted from the topics, not from the shard's word: the first attempts in
``{ns}.runs`` (and Kafka targets' records) of the schedule, triggers included. When
the occurrences due by the end (less the settle time), less those reported
``missed`` or ``skipped``, are N or more, exactly N must have started, and the
schedule's last changelog record must say ``completed: "max_runs"`` with its count.
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.messages import run_id_for
from topics.vocabulary import RunStatus

SCAN_MAX = 200_000


def first_attempts(evidence: Evidence) -> dict[str, dict[str, int]]:
    """Per schedule, the run ids whose first attempt is in the topics (runs, and Kafka
    targets' records; DAG task runs aside) and their scheduled instants."""
    fired: dict[str, dict[str, int]] = {}
    for run in evidence.runs:
        if run.attempt == 1 and run.task is None:
            fired.setdefault(run.schedule_id, {})[run.run_id] = run.scheduled_ms
    for target in evidence.targets:
        if target.attempt == 1 and target.scheduled_ms is not None:
            fired.setdefault(target.schedule_id, {})[target.run_id] = target.scheduled_ms
    return fired


def last_due_ms(evidence: Evidence) -> dict[str, int]:
    """Per schedule with ``max_runs`` N that started N runs or more: the scheduled
    instant of its N-th, after which nothing more is due."""
    fired = first_attempts(evidence)
    out: dict[str, int] = {}
    for schedule_id, command in evidence.definitions.items():
        limit = command.max_runs
        started = sorted(fired.get(schedule_id, {}).values())
        if limit is not None and len(started) >= limit:
            out[schedule_id] = started[limit - 1]
    return out


def _occurrences(
    evidence: Evidence, schedule_id: str, reported: set[str], horizon_ms: int
) -> tuple[set[str], int]:
    """(run ids of the spec's occurrences by ``horizon_ms``, how many were not reported
    missed or skipped)."""
    command = evidence.definitions[schedule_id]
    ranges = evidence.folded_ranges().get(schedule_id, [])
    ids: set[str] = set()
    due = 0
    o = evidence.first_next_ms.get(schedule_id)
    while o is not None and o <= horizon_ms and len(ids) < SCAN_MAX:
        run_id = run_id_for(schedule_id, o)
        ids.add(run_id)
        if run_id not in reported and not any(a <= o <= b for a, b in ranges):
            due += 1
        o = command.compiled.next_after(o)
    return ids, due


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("max-runs", "never more than max_runs runs; exactly that once due")
    fired = first_attempts(evidence)
    reported = {
        r.run_id for r in evidence.results if r.status in (RunStatus.MISSED, RunStatus.SKIPPED)
    }
    horizon_ms = evidence.end_ms - evidence.settle_ms
    for schedule_id, command in sorted(evidence.definitions.items()):
        limit = command.max_runs
        if limit is None:
            continue
        verdict.checked += 1
        started = set(fired.get(schedule_id, {}))
        if len(started) > limit:
            extra = sorted(started)[limit:][:3]
            verdict.fail(
                f"{schedule_id}: {len(started)} runs started, max_runs is {limit} (e.g. {extra})"
            )
            continue
        spec_ids, due = _occurrences(evidence, schedule_id, reported, horizon_ms)
        if due + len(started - spec_ids) < limit:  # triggers count, as spec occurrences do
            continue  # not enough came due yet: fewer is right
        if len(started) < limit:
            verdict.fail(f"{schedule_id}: {len(started)} of max_runs {limit} started, {due} due")
            continue
        state = evidence.final_state.get(schedule_id, {})
        if state.get("completed") != "max_runs" or state.get("fired_count") != limit:
            verdict.fail(
                f"{schedule_id}: {limit} runs started but its record says completed="
                f"{state.get('completed')!r}, fired_count={state.get('fired_count')!r}"
            )
    return verdict
