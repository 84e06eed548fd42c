"""Each occurrence is emitted to runs exactly once (docs/DESIGN.md §3.1).

No (run_id, attempt) appears twice in the read_committed view of ``{ns}.runs``,
and no occurrence is both fired and reported missed or skipped.
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("exactly-once", "each (run_id, attempt) appears once in runs")
    seen: dict[tuple[str, int], int] = {}
    for run in evidence.runs:
        verdict.checked += 1
        key = (run.run_id, run.attempt)
        if key in seen:
            verdict.fail(
                f"{run.run_id} attempt {run.attempt} emitted twice: at "
                f"{format_ms(seen[key])} and at {format_ms(run.append_ms)} "
                f"(runs[{run.partition}] offset {run.offset})"
            )
        else:
            seen[key] = run.append_ms
    fired = {run_id for run_id, attempt in seen if attempt == 1}
    for result in evidence.results:
        if result.status in ("missed", "skipped") and result.run_id in fired:
            verdict.fail(f"{result.run_id} was fired and also reported {result.status}")
    return verdict
