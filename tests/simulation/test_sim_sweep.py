"""Seeded sweeps: every scenario holds every invariant over many seeds.

Sized to a few minutes in all on a small machine; the 20,000-job midnights cost
tens of seconds a seed, so they run one seed each and carry the ``slow`` mark (they
stay in the default run). A failure names the seed and the command replaying it.
"""

from __future__ import annotations

import pytest

from simulation.run import simulate
from simulation.scenario import load
from tests.kit.paths import REPO

SCENARIOS = REPO / "simulation" / "scenarios"

SWEEPS = {
    "midnight-reboot": 25,
    "leader-paused-15s": 8,
    "two-schedulers-midnight": 6,
    "worker-dies-0020": 15,
    "cancel-during-worker-failover": 10,
    "fx-rates-90s": 12,
    "nightly-billing-dag": 20,
    "email-blip-jitter": 2,
    "email-blip-no-jitter": 2,
    "clock-60s-fast": 12,
    "refused-batches": 4,
    "rebalance-gives-shards-back": 3,
    "clock-jumps-ahead": 8,
    "worker-slow-rejoin": 6,
    "worker-results-refused": 4,
    "worker-coordinators-loading": 4,
    "workers-churn-under-burst": 2,
    "worker-sync-job-outlives-lease": 4,
    "worker-dies-mid-commit": 4,
    "worker-stop-hangs": 8,
    "schedulers-deploy-midnight": 6,
    "schedule-recreated-at-its-minute": 10,
    "kafka-targets-takeovers": 8,
    "max-runs-and-pauses-across-takeovers": 30,
    "excluded-days-across-takeovers": 20,
    "named-calendars-across-takeovers": 10,
    "backfill-across-takeovers": 15,
    "concurrency-key-through-failovers": 10,
    "rate-limited-key-through-worker-crash": 10,
    "rate-limited-key-with-skewed-workers": 10,
    "worker-sync-waits-for-leader": 6,
    "worker-cut-from-group-coordinator": 6,
}


def _sweep(name: str, seeds: range) -> None:
    scenario = load(SCENARIOS / f"{name}.toml")
    failures = []
    for seed in seeds:
        outcome = simulate(scenario, seed)
        if not outcome.ok:
            bad = next(v for v in outcome.verdicts if not v.ok)
            failures.append(f"seed {seed}: {bad.name}: {bad.violations[0]}\n  {outcome.replay()}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_sweep(name: str) -> None:
    _sweep(name, range(1, SWEEPS[name] + 1))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["midnight-20k", "midnight-20k-spread"])
def test_sweep_20k_at_midnight(name: str) -> None:
    _sweep(name, range(1, 2))
