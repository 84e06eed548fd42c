"""Each occurrence is emitted to runs exactly once (docs/DESIGN.md §3.1).

No (run_id, attempt) appears twice in the read_committed view of ``{ns}.runs``,
no occurrence is both fired and reported missed or skipped, and no attempt has two
visible results, a worker's and the shard's ``timed_out`` say. A cancelled attempt
(``run.cancel``, ``overlap: cancel_other``) is no exception: its worker writes its
one result, the shard only once the deadline has passed (docs/DESIGN.md §6.6).
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus


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
    fired |= {t.run_id for t in evidence.targets if t.attempt == 1}  # Kafka targets' fires
    decided: dict[tuple[str, int], str] = {}
    for result in evidence.results:
        if result.status in (RunStatus.MISSED, RunStatus.SKIPPED):
            if result.run_id in fired:
                verdict.fail(f"{result.run_id} was fired and also reported {result.status}")
            continue
        key = (result.run_id, result.attempt)
        earlier = decided.get(key)
        if earlier is None:
            decided[key] = result.status
        else:
            verdict.fail(
                f"{result.run_id} attempt {result.attempt} has two results: {earlier} "
                f"and {result.status} (at {format_ms(result.append_ms)}, by {result.worker})"
            )
    return verdict
