"""named-calendars-across-takeovers: schedules that exclude a named calendar cross
midnight while the calendar is edited and their shards change owners (DESIGN §5.7).

The story happens, the `excluded-days` checker judges it by the version of the
calendar in effect when each fire was appended, and it fails on evidence that
breaks its rule; `nothing-missed` and `audit` judge every instant of the
calendar-naming schedules (and the DAG) by the version in effect at that instant,
and find an allowed instant that vanished.
"""

from __future__ import annotations

import dataclasses
from functools import cache

from simulation.checkers import audit_view, excluded_days, nothing_missed
from simulation.checkers.evidence import BackfillSeen, RunRecord
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
    assert verdict.ok and verdict.checked == 5
    # Shard 4's owner was frozen again just before the edit giving Saturday back: the
    # new owner heard it in its restore and fired cal-short's instants from the edit's
    # commit on (00:04:00 fired late, the next two skipped behind it: overlap skip),
    # not from its own now.
    assert any(GIVEN_BACK < ms < GIVEN_BACK + MINUTE for ms in taken), taken
    short = _firsts("cal-short")
    assert short[GIVEN_BACK] > GIVEN_BACK + 10_000, short[GIVEN_BACK]
    skipped = {
        r.scheduled_ms
        for r in done.evidence.results
        if r.schedule_id == "cal-short" and r.status == "skipped"
    }
    assert {GIVEN_BACK + 5_000, GIVEN_BACK + 10_000} <= skipped
    # Frozen a third time at 00:05:19.5; hol excludes Saturday again from 00:05:28,
    # before the restore: 00:05:25, allowed by the version then, is accounted for (the
    # backlog walked by the days before the edit), nothing after the edit fires.
    excluded_again = GIVEN_BACK + MINUTE + 28_000
    accounted = set(short) | {
        r.scheduled_ms for r in done.evidence.results if r.schedule_id == "cal-short"
    }
    assert excluded_again - 3_000 in accounted
    assert not [o for o in short if o > excluded_again]
    # The DAG naming hol ran on Friday and again once Saturday was given back.
    dag = {r.scheduled_ms for r in done.evidence.runs if r.schedule_id == "cal-dag"}
    assert not [o for o in dag if MIDNIGHT <= o < GIVEN_BACK or o > excluded_again]
    assert [o for o in dag if o < MIDNIGHT] and [o for o in dag if o >= GIVEN_BACK]


def test_a_calendar_committed_wakes_every_scheduler() -> None:
    # cal-quarter and cal-dag (shard 2) were upserted in the instant hol was created,
    # before their shard heard it, so they waited for it, and nothing of theirs was due
    # to wake their scheduler: the record of hol must (as the runtime turns at least
    # every second). They fire their first instant at once, not at the next rebalance.
    start_ms = MIDNIGHT - 10 * MINUTE
    for schedule_id in ("cal-quarter", "cal-dag"):
        appended = min(
            r.append_ms
            for r in outcome().evidence.runs
            if r.schedule_id == schedule_id and r.scheduled_ms == start_ms
        )
        assert appended - start_ms < 2_000, (schedule_id, appended - start_ms)


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


def test_the_checker_relaxes_only_a_live_fire_to_the_version_at_its_instant() -> None:
    # 00:05:20, allowed by the version in effect then, appended after the edit that
    # excluded Saturday again (00:05:28): a live backlog's fire, accepted; the same
    # fire from a backfill, which goes by the current book, is not.
    evidence = outcome().evidence
    instant_ms = MIDNIGHT + 5 * MINUTE + 20_000
    late = RunRecord(
        run_id=run_id_for("cal-ticks", instant_ms),
        schedule_id="cal-ticks",
        scheduled_ms=instant_ms,
        attempt=1,
        append_ms=MIDNIGHT + 5 * MINUTE + 40_000,
        partition=4,
        offset=10**6,
    )
    assert excluded_days.check(dataclasses.replace(evidence, runs=[late])).ok
    plan = BackfillSeen("cal-ticks", "b1", 1, [(instant_ms, instant_ms, 1)])
    backfilled = dataclasses.replace(evidence, runs=[late], backfills={"b1": plan})
    assert not excluded_days.check(backfilled).ok


def test_nothing_missed_and_the_audit_judge_calendar_schedules() -> None:
    evidence = outcome().evidence
    for check in (nothing_missed.check, audit_view.check):
        verdict = check(evidence)
        assert verdict.ok, verdict.violations
        assert verdict.checked > 300  # cal-short alone owes over 130 instants
    # An allowed instant that vanished (Friday 23:59:55, and 00:04:05 once Saturday was
    # given back) is a miss to both; an instant on the excluded Saturday is owed by
    # neither, nor is one of late-cal-ticks before it was upserted.
    for gone in (MIDNIGHT - 5_000, GIVEN_BACK + 5_000):
        run_id = run_id_for("cal-short", gone)
        lost = dataclasses.replace(
            evidence,
            runs=[r for r in evidence.runs if r.run_id != run_id],
            results=[r for r in evidence.results if r.run_id != run_id],
        )
        for check in (nothing_missed.check, audit_view.check):
            verdict = check(lost)
            assert not verdict.ok and run_id in verdict.violations[0], check
    saturday = run_id_for("cal-short", MIDNIGHT + MINUTE)
    assert saturday not in {r.run_id for r in evidence.runs}
