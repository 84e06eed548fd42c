"""Backfills fire their plan exactly, bounded, and stop at a cancel (docs/DESIGN.md §6.9).

For each backfill (its plan: the ``schedule.backfill`` commands submitted):

- **one run each**: every planned occurrence is fired at its planned attempt at most
  once (a second record of that (run_id, attempt) would be a repeat), and, unless the
  backfill was cancelled, every one is either fired or counted let pass by the shard
  (``fired + passed`` in its last changelog state is the plan's size, ``fired`` the
  planned attempts seen on the runs topic): nothing skipped silently;
- **max_parallel**: at no instant are more of its runs in flight than
  ``max_parallel``, a run counted from its planned attempt's append to its last
  result's append (inside the span the shard counts it, from the fire to the result
  applied, so the measure can only be lower than the shard's);
- **nothing after a cancel**: no planned attempt is appended after the changelog
  first recorded the cancel.

The occurrences of a range are the schedule's own (its definition's compiled spec).
"""

from __future__ import annotations

from simulation.checkers.evidence import BackfillSeen, Evidence, Verdict
from topics.messages import run_id_for
from topics.timefmt import format_ms


def planned(evidence: Evidence, backfill: BackfillSeen) -> dict[str, int] | None:
    """Run id -> planned attempt, by the schedule's spec; None without its definition."""
    definition = evidence.definitions.get(backfill.schedule_id)
    if definition is None:
        return None
    next_after = definition.compiled.next_after
    plan: dict[str, int] = {}
    for first_ms, last_ms, attempt in backfill.ranges:
        at: int | None = first_ms
        while at is not None and at <= last_ms:
            plan[run_id_for(backfill.schedule_id, at)] = attempt
            at = next_after(at)
    return plan


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("backfill", "each planned occurrence once, max_parallel, none after cancel")
    for backfill in evidence.backfills.values():
        plan = planned(evidence, backfill)
        if plan is None:
            verdict.fail(f"backfill {backfill.backfill_id}: no definition of its schedule")
            continue
        fired: dict[str, int] = {}  # run id -> append ms of its planned attempt
        for run in evidence.runs:
            if plan.get(run.run_id) != run.attempt:
                continue
            verdict.checked += 1
            if run.run_id in fired:
                first_ms = fired[run.run_id]
                verdict.fail(
                    f"backfill {backfill.backfill_id}: {run.run_id} attempt {run.attempt} "
                    f"fired twice (at {format_ms(first_ms)} and {format_ms(run.append_ms)})"
                )
                continue
            fired[run.run_id] = run.append_ms
            if backfill.cancelled_ms is not None and run.append_ms > backfill.cancelled_ms:
                verdict.fail(
                    f"backfill {backfill.backfill_id}: {run.run_id} fired at "
                    f"{format_ms(run.append_ms)}, after its cancel "
                    f"({format_ms(backfill.cancelled_ms)})"
                )
        final = backfill.final or {}
        if backfill.cancelled_ms is None:
            counted = int(final.get("fired", 0)) + int(final.get("passed", 0))
            if "ended" not in final or counted != len(plan) or len(fired) != final.get("fired"):
                verdict.fail(
                    f"backfill {backfill.backfill_id}: planned {len(plan)}, fired {len(fired)} "
                    f"seen, changelog says {final.get('fired')} fired and "
                    f"{final.get('passed', 0)} let pass, ended {final.get('ended')}"
                )
        ends: dict[str, int] = {}
        for result in evidence.results:
            if result.run_id in fired and result.attempt >= plan[result.run_id]:
                ends[result.run_id] = max(ends.get(result.run_id, 0), result.append_ms)
        events = sorted(
            [(at, 1) for at in fired.values()]
            + [(at, -1) for run_id, at in ends.items()]
            + [(evidence.end_ms + 1, -1) for run_id in fired if run_id not in ends],
            key=lambda e: (e[0], e[1]),  # an end before a start at the same instant
        )
        open_now = peak = 0
        for _, step in events:
            open_now += step
            peak = max(peak, open_now)
        if peak > backfill.max_parallel:
            verdict.fail(
                f"backfill {backfill.backfill_id}: {peak} runs in flight at once, "
                f"max_parallel {backfill.max_parallel}"
            )
    return verdict
