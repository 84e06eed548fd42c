"""Nothing is missed silently (docs/DESIGN.md §3.2).

Every occurrence of a schedule, from the first one its shard planned up to the
end of the run minus the settle time, is accounted for: it fired (a run with its
run id, or a Kafka target's record naming it), or the shard reported it ``missed``
or ``skipped`` (one result each, or a folded result whose range covers it), or it
is still buffered behind a run in flight (overlap buffer policies).

Two ends are not gaps: a schedule with ``max_runs`` N is due up to the occurrence of
its N-th run and no further (`checkers.max_runs` counts the runs); and a schedule
still paused at the end owes nothing after its last fire until it is resumed (a
resume reports them ``skipped``). A pause ``until`` has resumed by then, and what
came due while it was paused is owed as any other occurrence: the misfire policy
fires it late or reports it ``missed`` after the resume.
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from simulation.checkers.max_runs import last_due_ms
from topics.calendar_days import calendar_names
from topics.messages import run_id_for
from topics.timefmt import format_ms, parse_instant
from topics.vocabulary import RunStatus

SCAN_MAX = 200_000


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("nothing-missed", "every due occurrence fired or was reported")
    fired = {r.run_id for r in evidence.runs}
    # A DAG occurrence fired when any of its task runs did ("{id}@{instant}/{task}").
    fired |= {r.run_id.rsplit("/", 1)[0] for r in evidence.runs if r.task is not None}
    # A Kafka target's occurrence is fired when its record is (`target_once` judges them).
    fired |= {t.run_id for t in evidence.targets}
    reported = {
        r.run_id for r in evidence.results if r.status in (RunStatus.MISSED, RunStatus.SKIPPED)
    }
    folded = evidence.folded_ranges()
    horizon_ms = evidence.end_ms - evidence.settle_ms
    limits = last_due_ms(evidence)
    # A spec naming calendars is bound to them on the shard; `excluded_days` judges it.
    specs = {
        sid: c.compiled for sid, c in evidence.definitions.items() if not calendar_names(c.spec)
    }
    specs.update({sid: d.compiled for sid, d in evidence.dags.items()})
    for schedule_id, compiled in sorted(specs.items()):
        first_ms = evidence.first_next_ms.get(schedule_id)
        if first_ms is None:
            if schedule_id not in evidence.first_next_ms:
                verdict.fail(f"{schedule_id}: its upsert never reached the changelog")
            continue
        state = evidence.final_state.get(schedule_id, {})
        buffered = {parse_instant(b) for b in state.get("buffered", [])}
        ranges = folded.get(schedule_id, [])
        next_after = compiled.next_after
        o: int | None = first_ms
        scanned = 0
        until_ms = min(horizon_ms, limits.get(schedule_id, horizon_ms))
        if state.get("paused") is True:  # owes nothing after its last fire until resumed
            last = state.get("last_fired")
            until_ms = min(until_ms, first_ms - 1 if last is None else parse_instant(last))
        while o is not None and o <= until_ms and scanned < SCAN_MAX:
            scanned += 1
            verdict.checked += 1
            run_id = run_id_for(schedule_id, o)
            if not (
                run_id in fired
                or run_id in reported
                or o in buffered
                or any(a <= o <= b for a, b in ranges)
            ):
                verdict.fail(f"{run_id}: due at {format_ms(o)}, never fired nor reported")
            o = next_after(o)
    return verdict
