"""Invariant checkers, one module each, all judging the read_committed view of a run.

Each checker is a function ``check(evidence) -> Verdict``. `CHECKERS` lists them in
the order a report prints them.
"""

from __future__ import annotations

from simulation.checkers import (
    cancelled,
    converged,
    dag_order,
    effects,
    exactly_once,
    lateness,
    lease,
    never_early,
    nothing_missed,
    overlap,
)
from simulation.checkers.evidence import Evidence, Verdict

CHECKERS = (
    exactly_once.check,
    nothing_missed.check,
    never_early.check,
    lateness.check,
    overlap.check,
    effects.check,
    dag_order.check,
    lease.check,
    cancelled.check,
    converged.check,
)

__all__ = ["CHECKERS", "Evidence", "Verdict"]
