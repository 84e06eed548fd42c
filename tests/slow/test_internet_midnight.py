"""internet-midnight in full: 10M schedules, three seeds, and fencing off caught.

Not part of CI (tests/conftest.py leaves ``tests/slow/`` out unless it is named): each
seed costs minutes of CPU (hashing ten million ids, two sampled shards of 78k
schedules restored on every takeover of the rolling restart). Run it with::

    python -m pytest -q tests/slow

Wall time and peak memory per seed go to stderr (``-s`` shows them); they are
reported, never asserted. The small version runs in CI
(tests/simulation/test_sim_internet.py).
"""

from __future__ import annotations

import resource
import sys

import pytest

from simulation.run import simulate
from simulation.scenario import load, shrunk
from tests.kit.paths import REPO

SCENARIO = REPO / "simulation/scenarios/internet-midnight.toml"
SEEDS = (1, 2, 3)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("seed", SEEDS)
def test_every_invariant_holds(seed: int) -> None:
    outcome = simulate(load(SCENARIO), seed)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    herd = outcome.herd()
    assert herd is not None
    print(
        f"internet-midnight seed {seed}: {outcome.wall_s:.0f} s wall, peak RSS {peak_mb:,} MB, "
        f"herd of {herd.herd_runs:,} (sampled) all ended after {herd.drained_s} s",
        file=sys.stderr,
    )
    assert outcome.ok, outcome.text()
    assert herd.herd_runs > 0 and herd.drained_s is not None


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_fencing_off_is_caught() -> None:
    outcome = simulate(load(SCENARIO), 1, broken=["no-fencing"])
    assert "exactly-once" in {v.name for v in outcome.verdicts if not v.ok}


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_runs_partition_handed_over_full_converges() -> None:
    """Seed 1 at a tenth of the fleet: after the second broker outage a worker adopted
    a runs partition whose previous owner had committed with 256 open runs; it paused
    it for being full and never fetched them, and 67 hourly runs of 00:13 never ended
    (the pure tests: test_worker_core, test_worker_membership, "handed over full")."""
    outcome = simulate(shrunk(load(SCENARIO), 10), 1)
    converged = next(v for v in outcome.verdicts if v.name == "converged")
    assert converged.ok and converged.checked > 0, converged.violations[:5]
    assert outcome.ok, outcome.replay()
