"""The scenario "a herd of low-priority runs with a trickle of high" (docs/DESIGN.md
§8.4, `simulation.lanes`): 200 seeds hold every checker of
`simulation.checkers.priority_lanes`, and each broken variant is caught."""

from __future__ import annotations

from simulation.checkers.priority_lanes import (
    check_high_lateness,
    check_starvation,
    verdicts,
)
from simulation.lanes import LaneScenario, run_lanes

SEEDS = 200


def test_two_hundred_seeds_hold_every_checker() -> None:
    failures = []
    for seed in range(SEEDS):
        log = run_lanes(LaneScenario(seed))
        for verdict in verdicts(log):
            assert verdict.checked > 0, (seed, verdict.name)
            if not verdict.ok:
                failures.append(f"seed {seed}: {verdict.name}: {verdict.violations[0]}")
    assert not failures, "\n".join(failures[:10])


def test_the_herd_saturates_and_the_high_lane_is_served_first() -> None:
    log = run_lanes(LaneScenario(7))
    high = [s for s in log.starts if s.lane.name == "HIGH"]
    assert len(high) == 40
    # Every high run arrived while low runs waited for a slot (the fleet saturated)...
    assert all(s.normal_waiting for s in high)
    # ...and none waited longer than two of the longest jobs, the herd notwithstanding.
    assert max(s.at_ms - s.arrived_ms for s in high) <= 2 * log.max_job_ms * 3


def test_a_pool_that_never_yields_is_caught_by_the_starvation_bound() -> None:
    caught = [
        seed
        for seed in range(10)
        if not check_starvation(run_lanes(LaneScenario(seed, broken="no-starvation-bound"))).ok
    ]
    assert caught, "no seed of the broken variant broke the starvation bound"


def test_a_pool_without_the_high_lane_first_is_caught_by_the_lateness_bound() -> None:
    caught = [
        seed
        for seed in range(10)
        if not check_high_lateness(run_lanes(LaneScenario(seed, broken="no-high-first"))).ok
    ]
    assert len(caught) == 10


def test_a_seed_replays_exactly() -> None:
    assert run_lanes(LaneScenario(3)).starts == run_lanes(LaneScenario(3)).starts
