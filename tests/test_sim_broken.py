"""The simulation can fail: deliberately broken variants are caught, with the seed printed.

Each variant is a test-only switch (``--break``): the simulated broker lets a
fenced producer commit, or the shard writes its changelog outside its
transaction. A sweep of leader-paused-15s (a scheduler frozen across midnight,
past its session) must catch each within a few seeds, and print the command that
replays the failing seed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from simulation.run import simulate
from simulation.scenario import load

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "simulation" / "scenarios" / "leader-paused-15s.toml"
SEEDS = range(1, 9)


@pytest.mark.parametrize(
    ("variant", "checker"),
    [("no-fencing", "exactly-once"), ("changelog-outside-txn", "nothing-missed")],
)
def test_broken_variant_is_caught_by_a_checker(variant: str, checker: str) -> None:
    scenario = load(SCENARIO)
    caught = None
    for seed in SEEDS:
        outcome = simulate(scenario, seed, broken=[variant])
        if not outcome.ok:
            caught = outcome
            break
    assert caught is not None, f"{variant}: no seed in {SEEDS} caught it"
    failed = {v.name for v in caught.verdicts if not v.ok}
    assert checker in failed
    print(f"{variant} caught by {sorted(failed)} with seed {caught.seed}: {caught.replay()}")
    assert caught.replay().endswith(f"--seed {caught.seed} --break {variant}")
    # The same seed without the break holds every invariant: the checker saw the break.
    assert simulate(scenario, caught.seed).ok


def test_cli_prints_the_seed_and_the_replay_command_and_exits_1() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "actors.cli",
            "simulate",
            str(SCENARIO),
            "--seed",
            "1",
            "--sweep",
            "4",
            "--break",
            "no-fencing",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr
    assert "violates exactly-once" in done.stderr
    assert f"replay: kafkron simulate {SCENARIO} --seed " in done.stderr
