"""Same seed, same run: the story and the JSON are equal byte for byte."""

from __future__ import annotations

from simulation.run import simulate
from simulation.scenario import load
from tests.kit.paths import REPO
from topics.codec import dumps

SCENARIOS = REPO / "simulation" / "scenarios"


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


def test_same_seed_same_bytes_across_processes() -> None:
    """Two processes with different string-hash seeds print the same JSON and story."""
    import os
    import subprocess
    import sys

    root = SCENARIOS.parent.parent
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        for extra in ([], ["--json"]):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "actors.cli",
                    "simulate",
                    str(SCENARIOS / "two-schedulers-midnight.toml"),
                    "--seed",
                    "5",
                    *extra,
                ],
                capture_output=True,
                cwd=root,
                env=env,
                timeout=600,
            )
            assert done.returncode == 0, done.stderr
            outputs.append(done.stdout)
    assert outputs[0] == outputs[2]
    assert outputs[1] == outputs[3]
