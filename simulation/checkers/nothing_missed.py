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

A schedule (or DAG) whose spec names calendars owes each instant its spec allows by
the calendars in effect at that instant (`checkers.calendar_owed`, DESIGN §5.7): one
upserted while its calendar was unknown owes, from its upsert on, what the calendar
that ended the wait allows.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping

from actors.timespec import CompiledSpec, compile_spec
from simulation.checkers.calendar_owed import CalendarTimeline
from simulation.checkers.evidence import Evidence, Verdict
from simulation.checkers.max_runs import last_due_ms
from topics.calendar_days import CalendarDays, calendar_names
from topics.command_types import DagUpsert, ScheduleUpsert
from topics.messages import run_id_for
from topics.timefmt import format_ms, parse_instant
from topics.vocabulary import RunStatus

SCAN_MAX = 200_000


def _walk(compiled: CompiledSpec, first_ms: int, until_ms: int) -> Iterator[int]:
    o: int | None = first_ms
    while o is not None and o <= until_ms:
        yield o
        o = compiled.next_after(o)


def _compile_with(
    schedule_id: str, command: ScheduleUpsert | DagUpsert
) -> Callable[[Mapping[str, CalendarDays]], CompiledSpec]:
    def compile_(calendars: Mapping[str, CalendarDays]) -> CompiledSpec:
        return compile_spec(
            command.spec,
            schedule_id=schedule_id,
            dst=command.dst,
            spread_window_s=command.spread_window_s,
            start_ms=command.start_ms,
            end_ms=command.end_ms,
            calendars=calendars,
        )

    return compile_


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
    timeline = CalendarTimeline(evidence.calendars)
    commands: dict[str, ScheduleUpsert | DagUpsert] = dict(evidence.definitions)
    commands.update(evidence.dags)
    for schedule_id, command in sorted(commands.items()):
        names = calendar_names(command.spec)
        first_ms = evidence.first_next_ms.get(schedule_id)
        if first_ms is None:
            if schedule_id not in evidence.first_next_ms:
                verdict.fail(f"{schedule_id}: its upsert never reached the changelog")
                continue
            versions = evidence.versions.get(schedule_id)
            if not names or not versions:
                continue
            # Upserted waiting for a calendar: owed from its upsert on (its floor).
            first_ms = versions[0].effective_ms + 1
        state = evidence.final_state.get(schedule_id, {})
        buffered = {parse_instant(b) for b in state.get("buffered", [])}
        ranges = folded.get(schedule_id, [])
        until_ms = min(horizon_ms, limits.get(schedule_id, horizon_ms))
        if state.get("paused") is True:  # owes nothing after its last fire until resumed
            last = state.get("last_fired")
            until_ms = min(until_ms, first_ms - 1 if last is None else parse_instant(last))
        if names:  # each instant by the calendars in effect at it (`calendar_owed`)
            owed = timeline.owed(names, _compile_with(schedule_id, command), first_ms, until_ms)
        else:
            owed = _walk(command.compiled, first_ms, until_ms)
        for o in itertools.islice(owed, SCAN_MAX):
            verdict.checked += 1
            run_id = run_id_for(schedule_id, o)
            if not (
                run_id in fired
                or run_id in reported
                or o in buffered
                or any(a <= o <= b for a, b in ranges)
            ):
                verdict.fail(f"{run_id}: due at {format_ms(o)}, never fired nor reported")
    return verdict
