"""Warm standbys in the simulation: takeovers catch a standby up, every invariant holds.

The simulation executes the same lifecycle machine as the runtime; with
``standbys`` set, crashes and freezes hand shards to a process that kept them
warm. The seeds here must both exercise a warm takeover (the timeline says so)
and keep every invariant: fired once, never early, on time once healed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulation.run import simulate
from simulation.scenario import ScenarioError, load
from tests.kit.paths import REPO

SCENARIOS = REPO / "simulation" / "scenarios"


def test_warm_takeovers_keep_every_invariant() -> None:
    scenario = load(SCENARIOS / "two-schedulers-warm-standby.toml")
    warm_takeovers = 0
    for seed in (1, 2):
        outcome = simulate(scenario, seed)
        bad = [v for v in outcome.verdicts if not v.ok]
        assert not bad, f"seed {seed}: {bad[0].name}: {bad[0].violations[0]}"
        warm_takeovers += sum(
            1
            for entry in outcome.world.timeline.events
            if entry.kind == "standby" and "taken over from its standby" in entry.text
        )
    assert warm_takeovers > 0, "no takeover used a standby: the scenario exercises nothing"


def test_standbys_must_be_a_count(tmp_path: Path) -> None:
    text = (SCENARIOS / "two-schedulers-warm-standby.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("standbys = 6", "standbys = -1"))
    with pytest.raises(ScenarioError, match="standbys: a number of shards"):
        load(bad)
