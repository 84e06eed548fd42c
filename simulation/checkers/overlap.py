"""The overlap policy is honoured: under skip, buffer_one, buffer_all and cancel_other
no two runs of a schedule are in flight at once.

A run is in flight from its first attempt's append until the result that ends it
(``succeeded`` or ``cancelled`` for its current attempt) or its dead letter.
Events at the same instant are taken ends first (cancel_other ends the old run and
starts the new one in one transaction).
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms
from topics.vocabulary import OverlapPolicy, RunStatus

EXCLUSIVE = frozenset(OverlapPolicy) - {OverlapPolicy.ALLOW}


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("overlap", "exclusive policies never run two at once")
    exclusive = {sid for sid, c in evidence.definitions.items() if c.overlap in EXCLUSIVE}
    # (instant, order, schedule, run_id, attempt, what): order 0 = end, 1 = start/attempt
    events: list[tuple[int, int, str, str, int, str]] = []
    for r in evidence.runs:
        if r.schedule_id in exclusive:
            events.append((r.append_ms, 1, r.schedule_id, r.run_id, r.attempt, "attempt"))
    for res in evidence.results:
        if res.schedule_id in exclusive and res.status in (
            RunStatus.SUCCEEDED,
            RunStatus.CANCELLED,
        ):
            events.append((res.append_ms, 0, res.schedule_id, res.run_id, res.attempt, "end"))
    for run_id, schedule_id, append_ms in evidence.dead:
        if schedule_id in exclusive:
            events.append((append_ms, 0, schedule_id, run_id, 0, "dead"))
    events.sort()
    attempts: dict[str, int] = {}
    in_flight: dict[str, set[str]] = {}
    for at_ms, _, schedule_id, run_id, attempt, what in events:
        flying = in_flight.setdefault(schedule_id, set())
        if what == "attempt":
            if run_id not in attempts:
                verdict.checked += 1
                others = flying - {run_id}
                if others:
                    verdict.fail(
                        f"{run_id} started at {format_ms(at_ms)} while {sorted(others)[0]} "
                        f"was in flight (overlap {evidence.definitions[schedule_id].overlap})"
                    )
                flying.add(run_id)
            attempts[run_id] = attempt
        elif what == "dead" or attempts.get(run_id) == attempt:
            flying.discard(run_id)
    return verdict
