"""backfill-across-takeovers: backfills cross takeovers and a cancel (docs/DESIGN.md §6.9).

The story happens (the backfilling shard's owner is fenced while its backfill runs),
the backfill checker judges it, and fails on evidence that breaks each of its rules.
"""

from __future__ import annotations

import dataclasses
from functools import cache

from simulation.checkers import backfill
from simulation.checkers.evidence import BackfillSeen, Evidence, RunRecord
from simulation.run import Outcome, simulate
from simulation.scenario import load
from tests.kit.paths import REPO
from topics.messages import run_id_for
from topics.timefmt import parse_instant

SCENARIO = REPO / "simulation" / "scenarios" / "backfill-across-takeovers.toml"


@cache
def outcome() -> Outcome:
    return simulate(load(SCENARIO), 1)


def at(text: str) -> int:
    return parse_instant(f"2026-03-05T{text}Z")


def _report_runs(evidence: Evidence) -> list[RunRecord]:
    return [r for r in evidence.runs if r.schedule_id == "report-sync" and r.attempt == 2]


def test_the_report_backfill_runs_each_occurrence_once_across_two_takeovers() -> None:
    done = outcome()
    assert done.ok, done.text()
    runs = _report_runs(done.evidence)
    assert sorted(r.scheduled_ms for r in runs) == [at("08:01:00") + 30_000 * k for k in range(9)]
    fenced = [
        e.true_ms
        for e in done.world.timeline.events
        if e.kind == "fenced" and "shard 0 was fenced" in e.text
    ]
    first, last = min(r.append_ms for r in runs), max(r.append_ms for r in runs)
    assert any(first < ms < last for ms in fenced)  # a takeover in the middle of it
    seen = done.evidence.backfills["report-rerun"]
    assert seen.final is not None and seen.final["fired"] == 9 and "ended" in seen.final
    # The live schedule kept firing every 30 s beside it (attempt 1, none skipped).
    live = [
        r.scheduled_ms
        for r in done.evidence.runs
        if r.schedule_id == "report-sync" and r.attempt == 1 and r.scheduled_ms >= at("08:06:00")
    ]
    assert live[:4] == [at("08:06:00") + 30_000 * k for k in range(4)]


def test_the_etl_backfill_is_cancelled_and_fires_nothing_after() -> None:
    done = outcome()
    seen = done.evidence.backfills["etl-rerun"]
    assert seen.cancelled_ms is not None and seen.final is not None
    fired = [r for r in done.evidence.runs if r.schedule_id == "etl-hourly" and r.attempt == 2]
    assert 0 < len(fired) < 15
    assert all(r.append_ms <= seen.cancelled_ms for r in fired)


def _broken(evidence: Evidence, **changes: object) -> list[str]:
    return backfill.check(dataclasses.replace(evidence, **changes)).violations


def test_the_checker_fails_on_a_repeat_an_excess_and_a_fire_after_the_cancel() -> None:
    evidence = outcome().evidence
    assert backfill.check(evidence).ok
    runs = _report_runs(evidence)
    again = dataclasses.replace(runs[0], append_ms=runs[-1].append_ms + 1, offset=10**6)
    assert any("fired twice" in v for v in _broken(evidence, runs=[*evidence.runs, again]))
    squeezed = {
        **evidence.backfills,
        "report-rerun": dataclasses.replace(evidence.backfills["report-rerun"], max_parallel=1),
    }
    assert any("max_parallel 1" in v for v in _broken(evidence, backfills=squeezed))
    etl = evidence.backfills["etl-rerun"]
    assert etl.cancelled_ms is not None
    late = RunRecord(
        run_id_for("etl-hourly", at("08:05:40")), "etl-hourly", at("08:05:40"), 2,
        etl.cancelled_ms + 1, 0, 10**6,
    )  # fmt: skip
    assert any("after its cancel" in v for v in _broken(evidence, runs=[*evidence.runs, late]))
    skipped: BackfillSeen = dataclasses.replace(
        evidence.backfills["report-rerun"], ranges=[(at("08:01:00"), at("08:06:00"), 2)]
    )
    assert any("planned" in v for v in _broken(evidence, backfills={"report-rerun": skipped}))
