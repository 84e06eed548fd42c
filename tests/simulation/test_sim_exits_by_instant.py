"""The simulation hands a worker's exits due at one instant to its core in one
`jobs_exited`, as the executor hands over a turn's exits (docs/DESIGN.md §8.3), so
the sweeps judge multi-exit turns too, not only one `job_exited` per exit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import pytest

from actors.worker.core import Action, Outcome, RunKey, WorkerCore
from simulation.checkers.priority_lanes import verdicts
from simulation.lanes import LaneScenario, run_lanes
from simulation.run import simulate
from simulation.scenario import load
from tests.kit.paths import REPO


@pytest.fixture
def batch_sizes(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    sizes: Counter[int] = Counter()
    handed_over = WorkerCore.jobs_exited

    def counted(
        core: WorkerCore, exits: Iterable[tuple[RunKey, Outcome]], now_ms: int
    ) -> list[Action]:
        exits = list(exits)
        sizes[len(exits)] += 1
        return handed_over(core, exits, now_ms)

    monkeypatch.setattr(WorkerCore, "jobs_exited", counted)
    return sizes


def test_a_world_hands_a_workers_simultaneous_exits_over_together(
    batch_sizes: Counter[int],
) -> None:
    outcome = simulate(load(REPO / "simulation" / "scenarios" / "worker-clock-behind.toml"), 1)
    assert outcome.ok
    assert max(batch_sizes) > 1, f"every exit reached the core alone: {dict(batch_sizes)}"


def test_the_lanes_hand_a_lanes_simultaneous_exits_over_together(
    batch_sizes: Counter[int],
) -> None:
    log = run_lanes(LaneScenario(0))
    assert all(verdict.ok for verdict in verdicts(log))
    assert max(batch_sizes) > 1, f"every exit reached the core alone: {dict(batch_sizes)}"
