"""max-runs-and-pauses-across-takeovers: a bounded schedule and timed pauses cross takeovers.

The story happens (the takeovers come where the scenario puts them), the two new
checkers judge it, and each fails on evidence that breaks its rule; nothing-missed
owes nothing after a schedule's last allowed run.
"""

from __future__ import annotations

import dataclasses
from functools import cache

from simulation.checkers import max_runs, nothing_missed, pause_until
from simulation.checkers.evidence import RunRecord
from simulation.run import Outcome, simulate
from simulation.scenario import load
from tests.kit.paths import REPO
from topics.messages import run_id_for
from topics.timefmt import parse_instant
from topics.vocabulary import RunStatus

SCENARIO = REPO / "simulation" / "scenarios" / "max-runs-and-pauses-across-takeovers.toml"


@cache
def outcome() -> Outcome:
    return simulate(load(SCENARIO), 1)


def at(text: str) -> int:
    return parse_instant(f"2026-03-05T{text}Z")


def _fenced(shard: int) -> list[int]:
    return [
        e.true_ms
        for e in outcome().world.timeline.events
        if e.kind == "fenced" and f"shard {shard} was fenced" in e.text
    ]


def test_welcome_mails_sends_twelve_batches_across_a_takeover_and_no_more() -> None:
    done = outcome()
    assert done.ok, done.text()
    runs = [r for r in done.evidence.runs if r.schedule_id == "welcome-mails" and r.attempt == 1]
    twelve = [at("08:00:00") + 20_000 * k for k in range(12)]
    assert sorted(r.scheduled_ms for r in runs) == twelve  # each once, none lost, no 13th
    assert any(at("08:01:50") < ms < at("08:03:40") for ms in _fenced(4))  # mid-count
    final = done.evidence.final_state["welcome-mails"]
    assert (final["completed"], final["fired_count"], final["next"]) == ("max_runs", 12, None)


def test_a_pause_until_resumes_once_after_its_owner_froze_across_the_end() -> None:
    done = outcome()
    (window,) = [w for w in done.evidence.pauses if w.schedule_id == "ledger-sync"]
    assert window.ended == "resumed" and window.again_ms is None
    assert window.ended_ms is not None and at("08:05:00") <= window.ended_ms < at("08:05:30")
    assert any(at("08:04:52") < ms < at("08:05:30") for ms in _fenced(2))  # the frozen owner
    # What came due while paused is the misfire policy's, after the resume: within the
    # 120 s grace fired late (or skipped by the overlap policy behind it), older missed.
    runs = {r.run_id: r for r in done.evidence.runs if r.attempt == 1}
    results = {r.run_id: r for r in done.evidence.results}
    graced = window.ended_ms - 120_000  # the shard resumed at about this instant
    o = at("08:01:30")
    while o <= at("08:05:00"):
        run_id = run_id_for("ledger-sync", o)
        late = runs.get(run_id)
        said = results.get(run_id)
        if late is not None:
            assert late.append_ms >= window.ended_ms and o >= graced
        else:
            assert said is not None and said.append_ms >= window.ended_ms
            assert said.status == (RunStatus.MISSED if o < graced else RunStatus.SKIPPED)
        o += 30_000


def test_a_pause_until_taken_over_before_its_end_resumes_at_its_end() -> None:
    done = outcome()
    (stock,) = [w for w in done.evidence.pauses if w.schedule_id == "stock-sync"]
    assert any(at("08:07:30") < ms < at("08:09:00") for ms in _fenced(1))
    assert stock.ended == "resumed" and stock.ended_ms is not None
    assert at("08:09:00") <= stock.ended_ms < at("08:09:05")
    (crm,) = [w for w in done.evidence.pauses if w.schedule_id == "crm-sync"]
    assert crm.paused_ms > at("08:10:10")  # after_current: once the run in flight ended


def test_the_checkers_catch_a_fire_while_paused_a_second_resume_and_a_run_too_many() -> None:
    evidence = outcome().evidence
    assert pause_until.check(evidence).ok and max_runs.check(evidence).ok
    window = next(w for w in evidence.pauses if w.schedule_id == "ledger-sync")
    sneaked = RunRecord(
        run_id_for("ledger-sync", at("08:02:00")), "ledger-sync", at("08:02:00"), 1,
        at("08:02:00"), 2, 10**9,
    )  # fmt: skip
    fired = dataclasses.replace(evidence, runs=[*evidence.runs, sneaked])
    assert any("fired at" in v for v in pause_until.check(fired).violations)
    again = dataclasses.replace(window, again_ms=at("08:06:00"))
    twice = dataclasses.replace(evidence, pauses=[again])
    assert any("paused again" in v for v in pause_until.check(twice).violations)
    thirteenth = RunRecord(
        run_id_for("welcome-mails", at("08:04:00")), "welcome-mails", at("08:04:00"), 1,
        at("08:04:00"), 4, 10**9,
    )  # fmt: skip
    more = dataclasses.replace(evidence, runs=[*evidence.runs, thirteenth])
    assert any("13 runs started, max_runs is 12" in v for v in max_runs.check(more).violations)


def test_nothing_is_owed_after_the_last_allowed_run() -> None:
    evidence = outcome().evidence
    assert nothing_missed.check(evidence).ok
    unbounded = {
        sid: dataclasses.replace(c, max_runs=None) for sid, c in evidence.definitions.items()
    }
    without = nothing_missed.check(dataclasses.replace(evidence, definitions=unbounded))
    assert any(v.startswith("welcome-mails@2026-03-05T08:04:00") for v in without.violations)
