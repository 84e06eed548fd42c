"""A DAG's deadlines through takeovers (docs/DESIGN.md §6.10): every late task run
exactly one alert per deadline, from when the task became ready, whoever owns the
shard; and a restore that forgets which alerts it wrote is caught."""

from __future__ import annotations

from simulation.run import simulate
from simulation.scenario import load
from tests.kit.paths import REPO as ROOT
from topics.alerts import AlertType

SCENARIO = ROOT / "simulation" / "scenarios" / "dag-deadlines-across-takeovers.toml"


def test_every_late_task_run_is_alerted_once_and_no_punctual_one() -> None:
    outcome = simulate(load(SCENARIO), 1)
    assert outcome.ok, [v.violations for v in outcome.verdicts if not v.ok]
    verdict = next(v for v in outcome.verdicts if v.name == "deadlines")
    assert verdict.checked > 0
    missed = [a for a, _ in outcome.evidence.deadlines.alerts if a.type is AlertType.MISSED]
    # The story has late task runs, and not only roots: a released task counts from
    # its release, so the checker judged that rule too.
    assert {a.task for a in missed} - {"extract"}, [a.run_id for a in missed]
    assert all(a.task is not None and a.run_id.endswith(f"/{a.task}") for a in missed)


def test_a_restore_that_forgets_its_alerts_is_caught_on_a_task_run() -> None:
    scenario = load(SCENARIO)
    caught = None
    for seed in range(1, 5):
        outcome = simulate(scenario, seed, broken=["restore-forgets-alerts"])
        if not outcome.ok:
            caught = outcome
            break
    assert caught is not None, "restore-forgets-alerts: no seed in 1..4 caught it"
    failed = {v.name: v for v in caught.verdicts if not v.ok}
    assert "deadlines" in failed, sorted(failed)
    # The second alert is a task run's (its run id names the task).
    assert any("/" in text for text in failed["deadlines"].violations)
    assert simulate(scenario, caught.seed).ok
