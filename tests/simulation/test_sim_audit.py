"""The audit's view in the simulation (`simulation.checkers.audit_view`, DESIGN §9.1).

The history's audit, fed with the changelog's records and the outcomes of a run,
finds no gap exactly where nothing-missed holds: on a clean run both hold, and a
broken variant that never writes the missed/skipped results the shard reports
(``drop-reported-results``) is a gap to the audit at the very occurrences
nothing-missed finds unaccounted.
"""

from __future__ import annotations

from simulation.run import simulate
from simulation.scenario import load
from tests.kit.paths import REPO

SCENARIO = REPO / "simulation" / "scenarios" / "fx-rates-90s.toml"


def verdicts(outcome: object) -> dict[str, object]:
    return {v.name: v for v in outcome.verdicts}  # type: ignore[attr-defined]


def test_the_audit_holds_where_nothing_missed_holds() -> None:
    scenario = load(SCENARIO)
    for seed in (1, 2):
        found = verdicts(simulate(scenario, seed))
        audit, missed = found["audit"], found["nothing-missed"]
        assert audit.ok and missed.ok  # type: ignore[attr-defined]
        assert audit.checked == missed.checked > 100  # type: ignore[attr-defined]


def test_a_dropped_outcome_is_a_gap_to_the_audit_as_to_nothing_missed() -> None:
    outcome = simulate(load(SCENARIO), 1, broken=["drop-reported-results"])
    found = verdicts(outcome)
    audit, missed = found["audit"], found["nothing-missed"]
    assert not audit.ok and not missed.ok  # type: ignore[attr-defined]
    # The same occurrences: "{id}@{instant}: ..." in both.
    gaps = {v.split(":", 1)[0] for v in audit.violations}  # type: ignore[attr-defined]
    unaccounted = {v.split(":", 1)[0] for v in missed.violations}  # type: ignore[attr-defined]
    assert gaps == unaccounted and gaps
    assert outcome.replay().endswith("--seed 1 --break drop-reported-results")
