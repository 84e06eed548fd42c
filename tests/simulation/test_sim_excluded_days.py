"""excluded-days-across-takeovers: schedules with excluded days cross midnight into an
excluded Saturday while their shards change owners (docs/DESIGN.md §5.6).

The story happens, the `excluded-days` checker judges it, and it fails on evidence
that breaks its rule.
"""

from __future__ import annotations

import dataclasses
from functools import cache

from simulation.checkers import excluded_days
from simulation.checkers.evidence import RunRecord
from simulation.run import Outcome, simulate
from simulation.scenario import load
from tests.kit.paths import REPO
from topics.messages import run_id_for
from topics.timefmt import parse_instant

SCENARIO = REPO / "simulation" / "scenarios" / "excluded-days-across-takeovers.toml"
MIDNIGHT = parse_instant("2026-03-07T00:00:00Z")


@cache
def outcome() -> Outcome:
    return simulate(load(SCENARIO), 1)


def _fired(schedule_id: str) -> list[int]:
    return sorted(
        r.scheduled_ms
        for r in outcome().evidence.runs
        if r.schedule_id == schedule_id and r.attempt == 1
    )


def test_nothing_fires_on_the_excluded_saturday_across_the_takeover() -> None:
    done = outcome()
    assert done.ok, done.text()
    friday = [MIDNIGHT - 8 * 60_000 + 20_000 * k for k in range(24)]
    assert _fired("weekday-ticks") == friday  # each Friday occurrence once, none after
    assert _fired("spec-excluded")[-1] == MIDNIGHT - 15_000
    assert _fired("utc-holiday")[-1] == MIDNIGHT - 30_000
    # 23:58 fires; Saturday's 00:02 moves to Monday, beyond the run.
    assert _fired("fixed-moved") == [MIDNIGHT - 120_000]
    assert _fired("tokyo-saturday") == []  # Saturday in Tokyo since Friday 15:00 UTC
    assert _fired("plain-neighbour")[-1] > MIDNIGHT + 10 * 60_000
    # Shard 4 was restored by a new owner after midnight (its definitions read back
    # from the changelog), and again later.
    taken = [
        e.true_ms
        for e in done.world.timeline.events
        if e.kind == "build" and e.text == "shard 4 taken on"
    ]
    assert any(MIDNIGHT < ms < MIDNIGHT + 60_000 for ms in taken), taken
    assert len([ms for ms in taken if ms > MIDNIGHT]) >= 2
    (verdict,) = [v for v in done.verdicts if v.name == "excluded-days"]
    assert verdict.ok and verdict.checked == 5


def test_the_checker_fails_on_a_fire_on_an_excluded_day() -> None:
    evidence = outcome().evidence
    saturday_ms = MIDNIGHT + 60_000
    stray = RunRecord(
        run_id=run_id_for("weekday-ticks", saturday_ms),
        schedule_id="weekday-ticks",
        scheduled_ms=saturday_ms,
        attempt=1,
        append_ms=saturday_ms,
        partition=4,
        offset=10**6,
    )
    broken = dataclasses.replace(evidence, runs=[*evidence.runs, stray])
    verdict = excluded_days.check(broken)
    assert not verdict.ok
    assert (
        "weekday-ticks@2026-03-07T00:01:00.000Z fired on an excluded day" in verdict.violations[0]
    )
    # A spec exclusion is judged by its days too: spec-excluded on Saturday noon's day.
    other = dataclasses.replace(
        stray, run_id=run_id_for("spec-excluded", saturday_ms), schedule_id="spec-excluded"
    )
    assert not excluded_days.check(dataclasses.replace(evidence, runs=[other])).ok
    # Friday is allowed for both.
    friday = dataclasses.replace(stray, scheduled_ms=MIDNIGHT - 60_000)
    assert excluded_days.check(dataclasses.replace(evidence, runs=[friday])).ok
