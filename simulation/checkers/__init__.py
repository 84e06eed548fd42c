"""Invariant checkers, one module each, all judging the read_committed view of a run.

Each checker is a function ``check(evidence) -> Verdict``. `CHECKERS` lists them in
the order a report prints them. `TOPIC_CHECKERS` are those that judge the topics
alone (no simulated world behind them), so the broker tests run them on records read
from a real broker (`evidence.from_topics`, `evidence.of_topics`): the simulation and
the failover tests judge exactly-once, nothing-missed and never-early with one code.
"""

from __future__ import annotations

from simulation.checkers import (
    audit_view,
    backfill,
    cancelled,
    concurrency_keys,
    converged,
    dag_order,
    deadlines,
    effects,
    exactly_once,
    excluded_days,
    lateness,
    lease,
    max_runs,
    never_early,
    nothing_missed,
    overlap,
    pause_until,
    rate_limits,
    target_once,
)
from simulation.checkers.evidence import Evidence, Verdict

CHECKERS = (
    exactly_once.check,
    nothing_missed.check,
    audit_view.check,
    never_early.check,
    target_once.check,
    lateness.check,
    overlap.check,
    effects.check,
    dag_order.check,
    lease.check,
    cancelled.check,
    concurrency_keys.check,
    rate_limits.check,
    max_runs.check,
    pause_until.check,
    excluded_days.check,
    backfill.check,
    deadlines.check,
    converged.check,
)

TOPIC_CHECKERS = (exactly_once.check, nothing_missed.check, never_early.check, deadlines.check)

__all__ = ["CHECKERS", "TOPIC_CHECKERS", "Evidence", "Verdict"]
