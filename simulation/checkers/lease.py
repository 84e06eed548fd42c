"""Safety of the lease rule: a worker the group still counts keeps its partitions.

A worker drops its partitions and cancels their jobs when its lease runs out: it
can no longer show the group coordinator it is alive, so the group may give them
away (Dropbox ATF's rule). That is right when the group has stopped hearing it (a
pause, a broker outage); a worker that drops them while the group still counts it
as a live member (it was rejoining in a rebalance, during which no heartbeats are
sent) cancels every job for nothing, and a rebalance makes every worker do so.
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict(
        "lease", "no worker drops its partitions while the group counts it, or adopts after"
    )
    verdict.checked = len(evidence.partitions)
    for worker, at_ms, what in evidence.lease_breaches:
        verdict.fail(f"{worker} at {format_ms(at_ms)}: {what}")
    return verdict
