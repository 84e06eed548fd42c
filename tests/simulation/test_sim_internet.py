"""internet-midnight, small: the fleet's world with 1/2000 of its schedules.

The full scenario (10M schedules) runs in ``tests/slow/`` (not in CI, see its
docstring); here its small version, with the same 96 nodes, 128 shards, sampled
shards, rolling restart, broker outages and frozen owner, must replay byte for
byte from its seed, hold every invariant, and be caught when fencing is off.
"""

from __future__ import annotations

from itertools import pairwise

from simulation.run import simulate
from simulation.scenario import load, shrunk
from tests.kit.paths import REPO
from topics.codec import dumps
from topics.partitioner import murmur2_partition

SCENARIO = REPO / "simulation/scenarios/internet-midnight.toml"


def test_the_fleet_is_what_the_scenario_says() -> None:
    sc = load(SCENARIO)
    assert sum(g.count for g in sc.schedules) == 10_000_000
    assert sc.shards == 128 and sc.sample is not None and sc.sample.shards == (0, 64)
    roles = [n.role for n in sc.nodes]
    assert roles.count("scheduler") == 32 and roles.count("worker") == 64
    # The rolling restart: each scheduler killed once, 15 s apart from 23:58, back 5 s later.
    crashes = [s for s in sc.script if s.action == "crash"]
    starts = [s for s in sc.script if s.action == "start"]
    assert [s.node for s in crashes] == [f"sched-{i:02d}" for i in range(32)]
    assert [b.at_ms - a.at_ms for a, b in pairwise(crashes)] == [15_000] * 31
    assert [s.at_ms - c.at_ms for c, s in zip(crashes, starts, strict=True)] == [5_000] * 32
    # Worker slots scale with the sample: 1,024 async slots x 2/128.
    assert sc.sample.slots(1024) == 16


def test_small_version_is_deterministic_and_holds_every_invariant() -> None:
    sc = shrunk(load(SCENARIO), 2000)
    first = simulate(sc, 3)
    second = simulate(sc, 3)
    assert first.ok, first.text()
    assert first.text().encode() == second.text().encode()
    assert dumps(first.as_json()) == dumps(second.as_json())
    assert first.replay().endswith("internet-midnight.toml --seed 3 --shrink 2000")
    # Only the sampled shards' schedules were submitted, all of them.
    expected = sum(
        1
        for g in sc.schedules
        for i in range(g.count)
        if murmur2_partition((g.id.format(i=i) if g.count > 1 else g.id).encode(), 128) in (0, 64)
    )
    assert len(first.world.submitted) == expected > 0
    herd = first.herd()
    assert herd is not None and herd.herd_runs > 0 and herd.takeovers > 0


def test_small_version_without_fencing_is_caught() -> None:
    outcome = simulate(shrunk(load(SCENARIO), 2000), 1, broken=["no-fencing"])
    failed = {v.name for v in outcome.verdicts if not v.ok}
    assert "exactly-once" in failed
