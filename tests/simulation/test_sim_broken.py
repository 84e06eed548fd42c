"""The simulation can fail: deliberately broken variants are caught, with the seed printed.

Each variant is a test-only switch (``--break``): the simulated broker lets a
fenced producer commit, or the shard writes its changelog outside its
transaction. A sweep of leader-paused-15s (a scheduler frozen across midnight,
past its session) must catch each within a few seeds, and print the command that
replays the failing seed. The DAG variant (``dag-early-release``: the simulated
scheduler node takes a DAG task as succeeded the moment it fires it, so the real
shard core releases its dependents at once) must be caught by the dag-order
checker on nightly-billing-dag.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from simulation.run import simulate
from simulation.scenario import load
from tests.kit.paths import REPO as ROOT

SCENARIO = ROOT / "simulation" / "scenarios" / "leader-paused-15s.toml"
DAG_SCENARIO = ROOT / "simulation" / "scenarios" / "nightly-billing-dag.toml"
SEEDS = range(1, 9)


@pytest.mark.parametrize(
    ("variant", "checker"),
    [
        ("no-fencing", "exactly-once"),
        ("changelog-outside-txn", "nothing-missed"),
        # A Kafka target's record written beside the fire's transaction, not in it: the
        # zombie's aborted fire still shows its record, and the new owner's makes two.
        ("target-outside-txn", "target-once"),
    ],
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


# The worker's fixes of issue 12, each undone in the simulated worker's executor, on
# the scenario built for it, and the checker that must catch it.
WORKER_VARIANTS = [
    ("adopt-no-seek", "workers-churn-under-burst", "converged"),  # finding 2
    ("adoption-failure-lost", "worker-coordinators-loading", "converged"),  # finding 4
    ("rebalance-not-held", "worker-slow-rejoin", "lease"),  # finding 6
    ("worker-commit-refused-batch", "worker-results-refused", "converged"),  # finding 1
    ("unbounded-commit-retry", "worker-results-refused", "exactly-once"),  # finding 8
    ("run-key-no-lease", "worker-sync-job-outlives-lease", "effects-once"),  # finding 3
    # A worker clock behind the broker's: results after the shard's verdict.
    ("worker-wall-clock", "worker-clock-behind", "exactly-once"),
    ("worker-txn-timeout-default", "worker-dies-mid-commit", "exactly-once"),  # finding 10
    ("unbounded-close", "worker-stop-hangs", "converged"),  # finding 11
    # A loading coordinator's answer read as "nothing committed", as aiokafka reads it:
    # the partition runs again from its first run (the lost-disk cluster test's bug).
    ("committed-silence-trusted", "worker-coordinators-loading", "exactly-once"),
    # The same, for schedulers deployed one at a time: no shard keeps an owner.
    ("unbounded-close", "schedulers-deploy-midnight", "converged"),
    # A restore that drops a schedule's count against max_runs (in what the simulated
    # scheduler feeds its shard core): the new owner starts max_runs runs again.
    ("restore-forgets-fired-count", "max-runs-and-pauses-across-takeovers", "max-runs"),
    # A restore that drops an any spec's exclude (in what the simulated scheduler
    # feeds its shard core): the new owner fires on the excluded Saturday.
    ("restore-drops-exclusions", "excluded-days-across-takeovers", "excluded-days"),
    # A restore that drops the calendar names of an exclude: the new owner of shard 4
    # fires on the Saturday the calendar excluded when it fired.
    ("restore-drops-calendar-names", "named-calendars-across-takeovers", "excluded-days"),
    # A restore that re-arms the schedules naming a calendar from its own now, not from
    # the edit's commit: cal-short's instants between the edit giving Saturday back and
    # shard 4's restore are lost (nothing-missed judges them by the version then).
    ("restore-rearms-calendars-from-now", "named-calendars-across-takeovers", "nothing-missed"),
    # A restore that drops a backfill's runs in flight and rewinds its cursor: the new
    # owner fires occurrences again and more than max_parallel at once.
    ("restore-forgets-backfill", "backfill-across-takeovers", "backfill"),
    # An adopted partition's keyed runs started at once, beside the previous owner's
    # jobs of the key still stopping: more than the key's limit at once.
    ("key-no-adoption-wait", "concurrency-key-through-failovers", "concurrency-keys"),
    # A new owner's rate-limit bucket started full: its first burst (the runs it takes
    # over, run again) adds to the previous owner's last one within a second.
    ("rate-adoption-full", "rate-limited-key-through-worker-crash", "rate-limits"),
    # The worker's waits kept on its wall clock alone: a step forward cuts a new owner's
    # adoption wait short and fills its bucket, beside the previous owner's last burst.
    ("worker-time-moves-ignored", "rate-limited-key-with-skewed-workers", "rate-limits"),
    # A restore that drops which deadline alerts a run's shard wrote: the new owner
    # alerts the same late run again.
    ("restore-forgets-alerts", "deadlines-across-takeovers", "deadlines"),
    # An assignment held by the heartbeat rule alone: a follower whose SyncGroup waited
    # for a slow leader longer than the lease drops its partitions while heard.
    ("no-sync-hold", "worker-sync-waits-for-leader", "lease"),
    # Adoptions outliving the lease: a worker cut from the group coordinator alone
    # retries after the group removed it, fencing the partitions' new owner.
    ("adoption-outlives-lease", "worker-cut-from-group-coordinator", "lease"),
]


@pytest.mark.parametrize(("variant", "scenario_name", "checker"), WORKER_VARIANTS)
def test_undone_worker_fixes_are_caught_by_a_checker(
    variant: str, scenario_name: str, checker: str
) -> None:
    scenario = load(ROOT / "simulation" / "scenarios" / f"{scenario_name}.toml")
    caught = None
    for seed in range(1, 5):
        outcome = simulate(scenario, seed, broken=[variant])
        if not outcome.ok:
            caught = outcome
            break
    assert caught is not None, f"{variant}: no seed in 1..4 caught it on {scenario_name}"
    failed = {v.name for v in caught.verdicts if not v.ok}
    assert checker in failed, failed
    print(f"{variant} caught by {sorted(failed)} with seed {caught.seed}: {caught.replay()}")
    assert caught.replay().endswith(f"--seed {caught.seed} --break {variant}")
    assert simulate(scenario, caught.seed).ok


def test_dag_early_release_is_caught_by_the_dag_order_checker() -> None:
    scenario = load(DAG_SCENARIO)
    caught = None
    for seed in SEEDS:
        outcome = simulate(scenario, seed, broken=["dag-early-release"])
        if not outcome.ok:
            caught = outcome
            break
    assert caught is not None, f"dag-early-release: no seed in {SEEDS} caught it"
    dag_order = next(v for v in caught.verdicts if v.name == "dag-order")
    assert not dag_order.ok
    # The violation names a task that started before a dependency of the same run
    # succeeded: the checker judged the order, not some side effect of the break.
    assert any("started at" in v and "succeeded" in v for v in dag_order.violations)
    print(f"dag-early-release caught by dag-order with seed {caught.seed}: {caught.replay()}")
    assert caught.replay().endswith(f"--seed {caught.seed} --break dag-early-release")
    # The same seed without the break holds every invariant, dag-order included.
    clean = simulate(scenario, caught.seed)
    assert clean.ok
    assert next(v for v in clean.verdicts if v.name == "dag-order").checked > 0
    # The printed command replays it: same verdict, exit code 1.
    args = caught.replay().split()[2:]
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "simulate", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr
    assert "FAIL dag-order" in done.stdout
    assert f"VIOLATION with seed {caught.seed}; replay it with:" in done.stdout
    assert caught.replay() in done.stdout


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


def test_committing_despite_a_refused_batch_is_caught_by_the_nothing_missed_checker() -> None:
    """The fix of a refused batch undone: the shard commits the rest of the transaction.

    aiokafka commits a transaction although one of its batches was refused; a shard
    that does not read every batch's outcome before committing loses the refused
    runs while its changelog says they fired. The nothing-missed checker names them.
    """
    scenario = load(ROOT / "simulation" / "scenarios" / "refused-batches.toml")
    variant = "commit-refused-batch"
    caught = None
    for seed in SEEDS:
        outcome = simulate(scenario, seed, broken=[variant])
        if not outcome.ok:
            caught = outcome
            break
    assert caught is not None, f"{variant}: no seed in {SEEDS} caught it"
    assert "nothing-missed" in {v.name for v in caught.verdicts if not v.ok}
    print(f"{variant} caught with seed {caught.seed}: {caught.replay()}")
    assert caught.replay().endswith(f"--seed {caught.seed} --break {variant}")
    assert simulate(scenario, caught.seed).ok


def test_a_rebalance_resumes_parked_shards_without_a_restore() -> None:
    """Eager rebalancing gives most shards straight back: they resume, nothing is rebuilt."""
    scenario = load(ROOT / "simulation" / "scenarios" / "rebalance-gives-shards-back.toml")
    outcome = simulate(scenario, 1)
    assert outcome.ok, outcome.replay()
    events = outcome.world.timeline.events
    resumed = [e for e in events if e.kind == "build" and "resumed after the rebalance" in e.text]
    taken = [e for e in events if e.kind == "build" and "taken on" in e.text]
    assert resumed and taken


def test_an_unnoticed_clock_step_on_an_idle_shard_is_caught_by_the_never_early_checker() -> None:
    """The step detector undone: an idle shard learns of a jump only from its early fire."""
    scenario = load(ROOT / "simulation" / "scenarios" / "clock-jumps-ahead.toml")
    variant = "no-clock-step-check"
    caught = next(
        (o for o in (simulate(scenario, s, broken=[variant]) for s in SEEDS) if not o.ok), None
    )
    assert caught is not None, f"{variant}: no seed in {SEEDS} caught it"
    assert "never-early" in {v.name for v in caught.verdicts if not v.ok}
    print(f"{variant} caught with seed {caught.seed}: {caught.replay()}")
    assert simulate(scenario, caught.seed).ok


def test_a_commit_guard_shorter_than_a_dead_transactions_life_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding 10's second half: the workers' old 5 s commit guard.

    A result committed 23 s after its deadline is committed before the shard's
    verdict, but behind a transaction a killed worker left open it stays invisible
    until the broker's reaper aborts that transaction, after the verdict: the shard
    then writes a second result. The guard must cover the transaction timeout plus
    the reaper's interval.
    """
    from actors.worker import membership

    scenario = load(ROOT / "simulation" / "scenarios" / "worker-dies-mid-commit.toml")
    assert simulate(scenario, 1).ok
    monkeypatch.setattr(membership, "COMMIT_GUARD_MS", 5_000)
    short = simulate(scenario, 1)
    exactly_once = next(v for v in short.verdicts if v.name == "exactly-once")
    assert not exactly_once.ok
    assert all("archive-" in v and "two results" in v for v in exactly_once.violations)
