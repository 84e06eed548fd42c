"""Same seed, same run: the story and the JSON are equal byte for byte."""

from __future__ import annotations

from pathlib import Path

from simulation.run import simulate
from simulation.scenario import load
from topics.codec import dumps

SCENARIOS = Path(__file__).resolve().parent.parent / "simulation" / "scenarios"


def test_same_seed_same_timeline_byte_for_byte() -> None:
    scenario = load(SCENARIOS / "leader-paused-15s.toml")
    first = simulate(scenario, 11)
    second = simulate(scenario, 11)
    assert first.text().encode() == second.text().encode()
    assert dumps(first.as_json()) == dumps(second.as_json())
    assert len(first.world.timeline.events) > 100


def test_another_seed_draws_other_faults() -> None:
    scenario = load(SCENARIOS / "two-schedulers-midnight.toml")
    faults = [
        [e.text for e in simulate(scenario, seed).world.timeline.events if e.kind == "fault"]
        for seed in (1, 2)
    ]
    assert faults[0] and faults[1]
    assert faults[0] != faults[1]
