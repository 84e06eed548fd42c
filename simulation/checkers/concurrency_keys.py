"""Concurrency keys hold: never more than a key's limit of its jobs running at once
(docs/DESIGN.md §8.2), by the jobs' own start and exit log, in true time.

A job runs from its start until it exits or its process dies (a kill -9); a job asked
to stop still runs until it has exited. Events at one instant are taken exits first:
a slot freed and taken again in the same millisecond is not an overlap. A job still
running at the end runs on to the end.
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("concurrency-keys", "never more than a key's limit of its jobs at once")
    # (instant, order, key, limit, who): order 0 = an exit, 1 = a start
    events: list[tuple[int, int, str, int, str]] = []
    for e in evidence.executions:
        if e.key is None:
            continue
        who = f"{e.run_id} attempt {e.attempt} on {e.worker}"
        events.append((e.start_ms, 1, e.key, e.limit, who))
        if e.end_ms is not None:
            events.append((e.end_ms, 0, e.key, e.limit, who))
    events.sort()
    running: dict[str, set[str]] = {}
    for at_ms, order, key, limit, who in events:
        jobs = running.setdefault(key, set())
        if order == 0:
            jobs.discard(who)
            continue
        verdict.checked += 1
        jobs.add(who)
        if len(jobs) > limit:
            verdict.fail(
                f"key {key!r} (limit {limit}): {len(jobs)} jobs running at {format_ms(at_ms)}:"
                f" {', '.join(sorted(jobs))}"
            )
    return verdict
