"""Effects exactly once (docs/DESIGN.md §3.3) for jobs that use idempotency keys.

Execution is at least once, so a job may call the outside world more than once for
a run; with the run's idempotency key the effect happens once. Every run of such
a job that a worker reported ``succeeded`` had its effect applied exactly once.

The simulated provider (`simulation.jobs.Ledger`) remembers the keys it saw and
counts effects per run id, so this catches a key that is not stable across the
attempts and redeliveries of one run (the shard's `topics.messages.idempotency_key`
of the run id), which is what makes the pattern work at all.

And a worker's result tells what its job did: a run a worker reported ``cancelled``
(its job stopped before it returned, so before its effect) had no effect from that
worker's latest job of it. (An earlier execution may have done it: a job that
finished whose result was dropped with its partition in a rebalance, run again, at
least once, and this time stopped, by a concurrency key's cancel_in_progress.) A worker
that takes one job's exit for another's (a run delivered again in the same process
while the old job still runs) reports the old job's ``cancelled`` for a run whose
job went on and did its work. A run that succeeded once and whose later attempt (a
backfill's re-run, docs/DESIGN.md §6.9) was cancelled had its effect once, from the
success.
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.vocabulary import RunStatus


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("effects-once", "idempotent jobs' effects happen once per run")
    succeeded = {
        r.run_id
        for r in evidence.results
        if r.status == RunStatus.SUCCEEDED and r.run_id in evidence.idempotent_runs
    }
    cancelled_by = {
        r.run_id: r.worker
        for r in evidence.results
        # A run cancelled before its job started (a concurrency key's waiting run)
        # says nothing of an earlier execution's effect.
        if r.status == RunStatus.CANCELLED and not r.worker.startswith("shard-") and r.started
    }
    # (run, worker) -> whether that worker's latest job of the run applied the effect
    # (the jobs' own log; evidence read from topics alone has none: any effect counts)
    last_did_effect: dict[tuple[str, str], bool] = {}
    for e in sorted(evidence.executions, key=lambda e: e.start_ms):
        last_did_effect[(e.run_id, e.worker)] = e.effect
    for run_id in sorted(evidence.idempotent_runs):
        verdict.checked += 1
        applied = evidence.ledger_applied.get(run_id, 0)
        if applied > 1:
            verdict.fail(f"{run_id}: effect applied {applied} times")
        elif run_id in succeeded and applied != 1:
            verdict.fail(f"{run_id}: reported succeeded but its effect never happened")
        elif (
            run_id in cancelled_by
            and last_did_effect.get((run_id, cancelled_by[run_id]), applied > 0)
            and run_id not in succeeded
        ):
            # (a run that succeeded and was then re-run by a backfill, its re-run
            # cancelled: the effect is its success's, once)
            verdict.fail(
                f"{run_id}: reported cancelled by {cancelled_by[run_id]} but its job did its effect"
            )
    return verdict
