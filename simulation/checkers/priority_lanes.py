"""Priorities hold on a worker's lanes (docs/DESIGN.md §8.4), judged on the start log of
`simulation.lanes` alone, not on the pool's own counters.

- ``high-lateness``: a high run starts within ``ceil(h / r) × D`` of its arrival, where
  h counts the high starts from its arrival to its own (itself included), D is the
  longest job and r = c − ceil(c / (K + 1)) the high starts that c slots make at least
  per D while the normal lane takes its 1-in-(K + 1) share: every job running at an
  instant ends within D, each exit is a start, and at most one start in K + 1 is the
  normal lane's.
- ``starvation-bound``: while the normal lane holds a waiting run, at most K high runs
  start in a row.
- ``highest-first``: no run starts while a run of its lane with a higher priority waits.
"""

from __future__ import annotations

import math

from simulation.checkers.evidence import Verdict
from simulation.lanes import LaneLog


def check_high_lateness(log: LaneLog) -> Verdict:
    verdict = Verdict("high-lateness", "a high run starts within ceil(h / r) x D of arriving")
    c, k = log.scenario.concurrency, log.normal_every
    per_round = c - math.ceil(c / (k + 1))
    high = [s for s in log.starts if s.lane.name == "HIGH"]
    for start in high:
        verdict.checked += 1
        ahead = sum(1 for s in high if start.arrived_ms <= s.at_ms <= start.at_ms)
        bound_ms = math.ceil(ahead / per_round) * log.max_job_ms
        late_ms = start.at_ms - start.arrived_ms
        if late_ms > bound_ms:
            verdict.fail(
                f"{start.run_id} (priority {start.priority}) started {late_ms} ms after it"
                f" arrived; bound {bound_ms} ms ({ahead} high starts since)"
            )
    if verdict.checked != log.high_arrivals:
        verdict.fail(f"{log.high_arrivals} high runs arrived, {verdict.checked} started")
    return verdict


def check_starvation(log: LaneLog) -> Verdict:
    verdict = Verdict("starvation-bound", "at most K high starts in a row while low runs wait")
    streak = 0
    for start in log.starts:
        verdict.checked += 1
        if start.lane.name == "NORMAL":
            streak = 0
            continue
        if not start.normal_waiting:
            streak = 0  # nothing was passed over
            continue
        streak += 1
        if streak > log.normal_every:
            verdict.fail(
                f"{start.run_id} was the {streak}th high start in a row at {start.at_ms}"
                f" while the normal lane waited (K = {log.normal_every})"
            )
    starts = sum(1 for s in log.starts if s.lane.name == "NORMAL")
    if starts != log.low_arrivals:
        verdict.fail(f"{log.low_arrivals} low runs arrived, {starts} started")
    return verdict


def check_highest_first(log: LaneLog) -> Verdict:
    verdict = Verdict("highest-first", "each lane starts its highest waiting priority first")
    for start in log.starts:
        verdict.checked += 1
        if start.waiting_above:
            verdict.fail(
                f"{start.run_id} (priority {start.priority}) started while"
                f" {start.waiting_above} run(s) of a higher priority waited"
            )
    return verdict


CHECKERS = (check_high_lateness, check_starvation, check_highest_first)


def verdicts(log: LaneLog) -> list[Verdict]:
    return [checker(log) for checker in CHECKERS]
