"""Kafka targets in the simulation: each occurrence's record is seen once, through takeovers.

The simulated schedulers hand their cores the scenario's target topics (as the
runtime hands them its `TargetTable`'s snapshot), the shards write each target's
record in the fire's transaction, and `simulation.checkers.target_once` judges what a
read_committed reader of the target topics sees. The checker must be able to fail:
each kind of fault it names is planted in real evidence and caught.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest

from simulation.checkers import target_once
from simulation.checkers.evidence import Evidence
from simulation.kafka import ABORTED
from simulation.run import Outcome, simulate
from simulation.scenario import ScenarioError, load
from tests.kit.paths import REPO as ROOT
from topics.partitioner import murmur2_partition
from topics.targets import SCHEDULED_AT_HEADER

SCENARIO = ROOT / "simulation" / "scenarios" / "kafka-targets-takeovers.toml"


@pytest.fixture(scope="module")
def outcome() -> Outcome:
    return simulate(load(SCENARIO), 1)


def test_every_target_record_is_seen_once_through_a_kill_a_zombie_and_outages(
    outcome: Outcome,
) -> None:
    assert outcome.ok, outcome.text()
    texts = [e.text for e in outcome.world.timeline.events]
    assert any(t.startswith("crash sched-a") for t in texts)
    assert any("(it serves shard 2) for 15 s" in t for t in texts)
    assert any(t == "broker_down" for t in texts)
    # The faults did hit transactions holding target records: there was a duplicate to
    # make, had a record escaped its aborted transaction (see test_sim_broken).
    sent = outcome.world.kafka.target_records
    assert sum(1 for s in sent if s.txn is not None and s.txn.status == ABORTED) > 0
    assert outcome.world.kafka.fenced_total > 0
    verdict = next(v for v in outcome.verdicts if v.name == "target-once")
    targets = outcome.evidence.targets
    # 40 orders every second and 20 audits every 5 s over the safety phase and more.
    assert verdict.checked > 40 * 300 + 20 * 60
    assert len(targets) >= verdict.checked
    assert "reported missed" not in verdict.rule  # catch_up: every one delivered
    assert all(not t.missing for t in targets)
    orders = [t for t in targets if t.topic == "orders.due"]
    audits = [t for t in targets if t.topic == "audit.ticks"]
    assert orders and audits
    assert all(t.key == t.schedule_id.encode() for t in orders)
    assert all(t.partition == murmur2_partition(t.key or b"", 3) for t in orders)
    assert all(t.key is None for t in audits)
    assert all(t.partition == murmur2_partition(t.run_id.encode(), 2) for t in audits)


def _judged(evidence: Evidence, targets: list[object]) -> list[str]:
    planted = copy.copy(evidence)
    planted.targets = targets  # type: ignore[assignment]
    return target_once.check(planted).violations


def test_the_checker_catches_a_duplicate_a_gap_an_early_record_and_missing_headers(
    outcome: Outcome,
) -> None:
    evidence = outcome.evidence
    targets = evidence.targets
    assert _judged(evidence, list(targets)) == []
    first = targets[0]
    moved = dataclasses.replace(first, partition=first.partition, offset=first.offset + 10**6)
    assert any("seen twice" in v for v in _judged(evidence, [*targets, moved]))
    gap = _judged(evidence, targets[1:])
    assert any(first.run_id in v and "no target record seen" in v for v in gap)
    early = dataclasses.replace(first, append_ms=(first.scheduled_ms or 0) - 5_000)
    assert any("before it was due" in v for v in _judged(evidence, [early, *targets[1:]]))
    bare = dataclasses.replace(first, missing=(SCHEDULED_AT_HEADER,))
    assert any("lacks kafkron's headers" in v for v in _judged(evidence, [bare, *targets[1:]]))
    wrong = dataclasses.replace(first, partition=(first.partition + 1) % 3)
    assert any("belongs on partition" in v for v in _judged(evidence, [wrong, *targets[1:]]))


def test_targets_table_is_checked(tmp_path: Path) -> None:
    text = SCENARIO.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('"orders.due" = 3', '"orders.due" = 0'))
    with pytest.raises(ScenarioError, match=r"targets\.topics"):
        load(bad)
    bad.write_text(text.replace('allowed = ["orders.due", "audit.*"]', 'allowed = ["a*b"]'))
    with pytest.raises(ScenarioError, match="target topic pattern"):
        load(bad)


def test_a_record_written_outside_the_transaction_is_caught_here_too() -> None:
    broken = simulate(load(SCENARIO), 1, broken=["target-outside-txn"])
    failed = {v.name: v.violations for v in broken.verdicts if not v.ok}
    assert set(failed) == {"target-once"}, failed
    assert all("seen twice" in v for v in failed["target-once"])
    assert broken.replay().endswith("--seed 1 --break target-outside-txn")
