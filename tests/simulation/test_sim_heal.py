"""The liveness phase heals every fault, also one drawn to last past the heal.

A fault's end is clipped to the heal instant, where the world's heal runs first and
forgets the fault: the heal itself must end it. runs-acl-revoked seed 4 draws a
revocation of the schedulers' Write ACL at 12:03:47 for 14.9 s; before the fix the
ACL stayed revoked for good and no shard ever fired again.
"""

from __future__ import annotations

from simulation.run import simulate
from simulation.scenario import load
from tests.kit.paths import REPO

SCENARIOS = REPO / "simulation" / "scenarios"


def test_an_acl_revocation_that_reaches_the_heal_is_granted_back() -> None:
    outcome = simulate(load(SCENARIOS / "runs-acl-revoked.toml"), 4)
    assert outcome.world.kafka.denying == frozenset()
    assert outcome.ok, outcome.replay()
