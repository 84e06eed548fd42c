"""The audit's view: `kafkron audit` over the run's window finds no gap (§9.1).

The history's audit judges each instant by the definitions the recorder keeps from
the changelog (`actors.audit.versions`, here fed with the changelog's committed
records in log order, compacted ones included, stamped by the broker) and matches
them with the outcomes the topics hold, with the very walk and the very rules of
`actors.audit.walk`. Where `nothing_missed` judges by what was submitted,
this judges by what the shards recorded, from each schedule's first changelog
record to the end of the run minus the settle time: the two must agree, so a
broken shard that drops an outcome is a gap to the audit too.

Accounted, as in the history: a run of the occurrence (any attempt, a DAG task's), a
Kafka target's record naming it, a ``missed``/``skipped`` result or a folded one
whose range holds it; an occurrence still buffered behind a run in flight at the end
is not yet owed (the history would say it later).
"""

from __future__ import annotations

import orjson

from actors.audit.calendars import parse_key, split_by_calendars
from actors.audit.walk import (
    GAP,
    Outcome,
    compile_definition,
    expected,
    spec_instants,
    tally,
)
from actors.timespec import CompiledSpec
from simulation.checkers.calendar_owed import CalendarTimeline
from simulation.checkers.evidence import Evidence, Verdict
from topics.calendar_days import calendar_names
from topics.timefmt import format_ms, parse_instant


def _outcomes(evidence: Evidence) -> dict[str, list[Outcome]]:
    found: dict[str, list[Outcome]] = {}
    for run in evidence.runs:
        found.setdefault(run.schedule_id, []).append(
            Outcome(run.scheduled_ms, "fired", run.run_id, None, run.task)
        )
    for target in evidence.targets:
        if target.scheduled_ms is not None:
            found.setdefault(target.schedule_id, []).append(
                Outcome(target.scheduled_ms, "fired", target.run_id)
            )
    for result in evidence.results:
        to_ms = None if result.covers is None else result.covers.to_ms
        found.setdefault(result.schedule_id, []).append(
            Outcome(result.scheduled_ms, result.status, result.run_id, to_ms, result.task)
        )
    for outcomes in found.values():
        outcomes.sort(key=lambda o: o.scheduled_ms)
    return found


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("audit", "the history's audit of the run finds no gap")
    horizon_ms = evidence.end_ms - evidence.settle_ms
    outcomes = _outcomes(evidence)
    docs = {key: orjson.loads(text) for key, text in evidence.version_defs.items()}
    timeline = CalendarTimeline(evidence.calendars)
    history = timeline.history

    def names_of(def_key: str) -> tuple[str, ...]:
        return calendar_names(docs[def_key].get("spec") or {})

    for schedule_id, versions in sorted(evidence.versions.items()):
        unknown = sorted({v.def_key for v in versions if v.def_key and v.def_key not in docs})
        if unknown:
            # A changelog naming a definition it never holds cannot be audited: a
            # failure of the run (a broken restore writes such), never a crash here.
            verdict.fail(f"{schedule_id}: its changelog names {unknown[0]}, never written")
            continue
        # Cut at the edits of the calendars they name, as the history's audit does.
        versions = split_by_calendars(versions, names_of, history)
        state = evidence.final_state.get(schedule_id) or {}
        buffered = {parse_instant(b) for b in state.get("buffered", [])}

        def compiled(key: str, sid: str = schedule_id) -> CompiledSpec:
            def_key, offsets = parse_key(key)
            doc = docs[def_key]
            names = calendar_names(doc.get("spec") or {})
            bound = {n: timeline.days(o) for n, o in zip(names, offsets, strict=True)}
            return compile_definition(doc, sid, bound or None)

        owed = expected(versions, versions[0].effective_ms, horizon_ms, spec_instants(compiled))
        counted = tally(owed, outcomes.get(schedule_id, []))
        verdict.checked += sum(counted.counts.values())
        for at_ms in counted.gaps:
            if at_ms not in buffered:
                verdict.fail(f"{schedule_id}@{format_ms(at_ms)}: owed, no outcome ({GAP})")
    return verdict
