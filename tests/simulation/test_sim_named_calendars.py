"""named-calendars-across-takeovers: schedules that exclude a named calendar cross
midnight while the calendar is edited and their shards change owners (DESIGN §5.7).

The story happens, the `excluded-days` checker judges it by the version of the
calendar in effect when each fire was appended, and it fails on evidence that
breaks its rule.
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

SCENARIO = REPO / "simulation" / "scenarios" / "named-calendars-across-takeovers.toml"
MIDNIGHT = parse_instant("2026-03-07T00:00:00Z")
MINUTE = 60_000
GIVEN_BACK = MIDNIGHT + 4 * MINUTE


@cache
def outcome() -> Outcome:
    return simulate(load(SCENARIO), 1)


def _firsts(schedule_id: str) -> dict[int, int]:
    """scheduled instant -> append instant of each first attempt."""
    return {
        r.scheduled_ms: r.append_ms
        for r in outcome().evidence.runs
        if r.schedule_id == schedule_id and r.attempt == 1
    }


def test_an_edit_applies_on_every_shard_and_across_the_takeover() -> None:
    done = outcome()
    assert done.ok, done.text()
    for schedule_id, period_ms in (("cal-ticks", 20_000), ("cal-quarter", 15_000)):
        fired = sorted(_firsts(schedule_id))
        # Every Friday occurrence from 23:51 on fired (the edit at 23:56 excluded
        # Saturday, not Friday), nothing on Saturday until the day was given back.
        friday = list(range(MIDNIGHT - 9 * MINUTE, MIDNIGHT, period_ms))
        assert [o for o in fired if MIDNIGHT - 9 * MINUTE <= o < MIDNIGHT] == friday
        # (00:04:00 itself may fire: the edit giving Saturday back was committed then,
        # and a re-arm counts from the commit, not from when each shard heard it.)
        assert not [o for o in fired if MIDNIGHT <= o < GIVEN_BACK], schedule_id
        assert [o for o in fired if o > GIVEN_BACK + MINUTE], schedule_id  # fires again
    # 23:58 fires; Saturday's 00:02 was excluded when it came due (moved past Sunday
    # and Monday the 9th, beyond the run), and giving Saturday back later fires no past.
    assert sorted(_firsts("cal-fixed")) == [MIDNIGHT - 2 * MINUTE]
    # late-cal-ticks waited for its calendar (created at 23:53), then fired what came
    # due meanwhile, late, within its grace, and went on (it excludes Sundays only).
    late = _firsts("late-cal-ticks")
    waited = [o for o in late if o < MIDNIGHT - 7 * MINUTE]
    assert waited and all(late[o] >= MIDNIGHT - 7 * MINUTE for o in waited)
    assert max(late) > GIVEN_BACK
    taken = [
        e.true_ms
        for e in done.world.timeline.events
        if e.kind == "build" and e.text == "shard 4 taken on"
    ]
    assert any(MIDNIGHT < ms < MIDNIGHT + MINUTE for ms in taken), taken
    (verdict,) = [v for v in done.verdicts if v.name == "excluded-days"]
    assert verdict.ok and verdict.checked == 4


def test_the_checker_judges_by_the_version_in_effect_when_it_fired() -> None:
    evidence = outcome().evidence
    saturday_ms = MIDNIGHT + MINUTE
    stray = RunRecord(
        run_id=run_id_for("cal-ticks", saturday_ms),
        schedule_id="cal-ticks",
        scheduled_ms=saturday_ms,
        attempt=1,
        append_ms=saturday_ms,
        partition=4,
        offset=10**6,
    )
    verdict = excluded_days.check(dataclasses.replace(evidence, runs=[*evidence.runs, stray]))
    assert not verdict.ok
    assert "calendar 'hol' excluded" in verdict.violations[0]
    # The same day fired after it was given back (00:04) is allowed ...
    later = dataclasses.replace(stray, append_ms=GIVEN_BACK + 5_000)
    assert excluded_days.check(dataclasses.replace(evidence, runs=[later])).ok
    # ... and before the edit that excluded it (23:56), too.
    before = dataclasses.replace(stray, append_ms=MIDNIGHT - 5 * MINUTE)
    assert excluded_days.check(dataclasses.replace(evidence, runs=[before])).ok
    # A fire of late-cal-ticks before late-cal existed: it should have waited.
    early = dataclasses.replace(
        stray,
        run_id=run_id_for("late-cal-ticks", MIDNIGHT - 9 * MINUTE),
        schedule_id="late-cal-ticks",
        scheduled_ms=MIDNIGHT - 9 * MINUTE,
        append_ms=MIDNIGHT - 9 * MINUTE,
    )
    assert not excluded_days.check(dataclasses.replace(evidence, runs=[early])).ok
