"""Never early (docs/DESIGN.md §3.4, §5.5): no first attempt reaches runs before its scheduled time.

Judged by the broker's append time (true time), whatever the firing node's clock
said. One tolerance, by design: a scheduler whose clock runs ahead of the
broker's by less than the skew bound (`actors.scheduler.skew.DEFAULT_BOUND_MS`)
is not held back, since a produce round trip blurs the measurement by that much;
so a run may be early by less than the bound, never by more.
"""

from __future__ import annotations

from actors.scheduler.skew import DEFAULT_BOUND_MS
from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict(
        "never-early",
        f"no run appended before its instant minus the {DEFAULT_BOUND_MS} ms skew bound",
    )
    for run in evidence.runs:
        if run.attempt != 1:
            continue
        verdict.checked += 1
        if run.append_ms < run.scheduled_ms - DEFAULT_BOUND_MS:
            verdict.fail(
                f"{run.run_id} appended at {format_ms(run.append_ms)}, "
                f"{run.scheduled_ms - run.append_ms} ms before it was due"
            )
    return verdict
