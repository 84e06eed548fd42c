"""Never early (DESIGN.md §3.4): no first attempt reaches runs before its scheduled time.

Judged by the broker's append time (true time), whatever the firing node's clock said.
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("never-early", "no run is appended before its scheduled instant")
    for run in evidence.runs:
        if run.attempt != 1:
            continue
        verdict.checked += 1
        if run.append_ms < run.scheduled_ms:
            verdict.fail(
                f"{run.run_id} appended at {format_ms(run.append_ms)}, "
                f"{run.scheduled_ms - run.append_ms} ms before it was due"
            )
    return verdict
