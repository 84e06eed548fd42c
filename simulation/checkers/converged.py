"""Liveness: after healing, the system converges.

At the end every shard and every runs partition has exactly one live owner, and
every run that started before the last half of the liveness phase has ended
(succeeded, cancelled or dead-lettered): nothing is stuck behind a lost lease,
a zombie's open transaction or a dropped partition.
"""

from __future__ import annotations

from simulation.checkers.evidence import Evidence, Verdict
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("converged", "after healing: one owner each, every run ended")
    for role, count in sorted(evidence.partitions.items()):
        owners = evidence.owners.get(role, {})
        for p in range(count):
            verdict.checked += 1
            held = owners.get(p, [])
            what = "shard" if role == "scheduler" else "runs partition"
            if len(held) != 1:
                verdict.fail(f"{what} {p} has {len(held)} live owners at the end: {held}")
    ended = {
        r.run_id for r in evidence.results if r.status in (RunStatus.SUCCEEDED, RunStatus.CANCELLED)
    }
    ended |= {run_id for run_id, _, _ in evidence.dead}
    cutoff_ms = evidence.end_ms - (evidence.end_ms - evidence.heal_ms) // 2
    started: dict[str, int] = {}
    for run in evidence.runs:
        started.setdefault(run.run_id, run.append_ms)
    for run_id, at_ms in started.items():
        if at_ms < cutoff_ms:
            verdict.checked += 1
            if run_id not in ended:
                verdict.fail(f"{run_id} started at {format_ms(at_ms)} and never ended")
    return verdict
