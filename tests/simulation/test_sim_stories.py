"""What each scenario is about actually happens in it (not only "no invariant broke")."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from actors.scheduler.skew import DEFAULT_BOUND_MS
from simulation.run import Outcome, simulate
from simulation.scenario import ScenarioError, load
from tests.kit.paths import REPO as ROOT
from topics.codec import loads
from topics.messages import run_id_for
from topics.timefmt import parse_instant

SCENARIOS = ROOT / "simulation" / "scenarios"


def _run(name: str, seed: int) -> Outcome:
    return simulate(load(SCENARIOS / f"{name}.toml"), seed)


def test_midnight_reboot_seed_7_tells_the_night() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "actors.cli",
            "simulate",
            "simulation/scenarios/midnight-reboot.toml",
            "--seed",
            "7",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    story = done.stdout
    assert "23:58:00.000  sched-a    crash" in story
    assert "00:03:00.000  sched-a    start" in story
    assert "assigned shards [0, 1, 2, 3, 4, 5]" in story
    # invoice-nightly (run_once, grace 1 h) fires once, three minutes late ...
    assert "fired invoice-nightly@2026-03-05T00:00:00.000Z (+180,0" in story
    # ... usage-rollup (skip, grace 60 s) is reported missed, not silently dropped.
    assert "missed   shard 5: usage-rollup@2026-03-05T00:00:00.000Z" in story
    assert "verdict: every invariant held (seed 7)" in story


def test_worker_dies_0020_reruns_invoice_nightly_and_charges_once() -> None:
    outcome = _run("worker-dies-0020", 1)
    assert outcome.ok, outcome.text()
    run_id = run_id_for("invoice-nightly", parse_instant("2026-03-05T00:00:00Z"))
    assert any("kill -9" in e.text for e in outcome.world.timeline.events)
    assert outcome.evidence.ledger_calls[run_id] == 1  # the first run died before its effect
    statuses = [r.status for r in outcome.evidence.results if r.run_id == run_id]
    assert statuses == ["succeeded"]  # the rerun's result, once


def test_fx_rates_90s_each_overlap_policy_behaves_as_documented() -> None:
    outcome = _run("fx-rates-90s", 2)
    assert outcome.ok, outcome.text()
    results = Counter((r.schedule_id, r.status) for r in outcome.evidence.results)
    assert results[("fx-rates-skip", "skipped")] > 5
    assert results[("fx-rates-cancel-other", "cancelled")] > 5
    assert results[("fx-rates-buffer-one", "skipped")] > 5  # replaced while waiting
    buffered = outcome.evidence.final_state["fx-rates-buffer-all"]["buffered"]
    assert len(buffered) > 5  # a queue that grows: 90 s of work every 60 s
    starts = sorted(
        r.append_ms
        for r in outcome.evidence.runs
        if r.schedule_id == "fx-rates-allow" and r.attempt == 1
    )
    assert any(b - a < 85_000 for a, b in itertools.pairwise(starts))


def test_email_blip_retries_in_lockstep_without_jitter_and_spread_with_it() -> None:
    figures = {}
    for name in ("email-blip-no-jitter", "email-blip-jitter"):
        outcome = _run(name, 1)
        assert outcome.ok, outcome.text()
        fourth = [r.append_ms for r in outcome.evidence.runs if r.attempt == 4]
        assert len(fourth) == 1000  # every reminder failed three times in the outage
        peak_per_s = max(Counter(ms // 1000 for ms in fourth).values())
        figures[name] = (max(fourth) - min(fourth), peak_per_s, len(outcome.evidence.dead))
    lockstep_ms, lockstep_peak, lockstep_dead = figures["email-blip-no-jitter"]
    jitter_ms, jitter_peak, jitter_dead = figures["email-blip-jitter"]
    assert lockstep_ms < 1_000 and lockstep_peak == 1000  # a thundering herd
    assert jitter_ms > 3_000 and jitter_peak < 500  # spread out
    # Full jitter waits less on average (uniform in [0, backoff]): five attempts of
    # it do not outlast a 10 s outage, five lockstep attempts (1+2+4+8 s) do.
    assert lockstep_dead == 0 < jitter_dead


def test_clock_60s_fast_is_held_back_from_its_first_batch_on() -> None:
    """sched-b's clock runs 60 s fast from its start: it never fires early beyond the bound.

    Before a shard first fires, the scheduler takes a broker-time sample (an
    aborted one-record transaction to runs, as ``ShardRunner.sample_clock``), so
    the `SkewEstimator` hold-back applies to the very first batch. (Before that
    probe it learned the broker's clock only from its own run records, and its
    first batch went out 30 s early on every seed.) On a sweep of seeds: every
    invariant holds, no first attempt is appended more than the skew bound before
    its instant, and sched-b did fire (held back, not idle).
    """
    for seed in range(1, 7):
        outcome = _run("clock-60s-fast", seed)
        failed = [v.name for v in outcome.verdicts if not v.ok]
        assert not failed, f"seed {seed}: {failed}\n  {outcome.replay()}"
        runs = outcome.evidence.runs
        early = [r.run_id for r in runs if r.append_ms < r.scheduled_ms - DEFAULT_BOUND_MS]
        assert not early, f"seed {seed}: early beyond the bound: {early[:3]}"
        events = outcome.world.timeline.events
        probe = next(e for e in events if e.who == "sched-b" and e.kind == "clock")
        assert "holding firing back by 59,000 ms" in probe.text
        fires_b = [e for e in events if e.who == "sched-b" and e.kind in ("fire", "late")]
        assert fires_b and probe.true_ms <= fires_b[0].true_ms
        late_fires = [r for r in runs if r.append_ms > r.scheduled_ms + 1000]
        assert late_fires  # sched-a's shards wait a session timeout after it dies at 00:02


def test_plot_and_json_outputs(tmp_path: Path) -> None:
    svg = tmp_path / "night.svg"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "actors.cli",
            "simulate",
            "simulation/scenarios/midnight-reboot.toml",
            "--seed",
            "3",
            "--json",
            "--plot",
            str(svg),
        ],
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = loads(done.stdout)
    assert report["seed"] == 3 and report["ok"] is True
    assert {v["name"] for v in report["verdicts"]} >= {"exactly-once", "never-early"}
    text = svg.read_text()
    assert text.startswith("<svg") and text.count("<circle") == report["figures"]["fires"]


def test_a_bad_scenario_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nstart = "yesterday"\nsafety_s = 1\n')
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "simulate", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2
    assert "start: 'yesterday' is not an RFC 3339 UTC instant" in done.stderr


def test_a_negative_job_heartbeat_interval_is_refused(tmp_path: Path) -> None:
    text = (ROOT / "simulation/scenarios/worker-sync-job-outlives-lease.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("heartbeat_every_s = 30", "heartbeat_every_s = -1"))
    with pytest.raises(ScenarioError, match=r"ledger\.reconcile.*heartbeat_every_s must be >= 0"):
        load(bad)
    bad.write_text(text.replace("heartbeat_every_s = 30", 'heartbeat_every_s = "often"'))
    with pytest.raises(ScenarioError, match="heartbeat_every_s must be a number, got 'often'"):
        load(bad)


def test_a_send_step_needs_a_command_and_a_non_negative_age(tmp_path: Path) -> None:
    text = (SCENARIOS / "schedule-recreated-at-its-minute.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('command = { type = "schedule.delete"', "other = { x = 1", 1))
    with pytest.raises(ScenarioError, match="send needs command, a table with a type"):
        load(bad)
    bad.write_text(text.replace("created_before_s = 0.6", "created_before_s = -1", 1))
    with pytest.raises(ScenarioError, match="created_before_s"):
        load(bad)


def test_png_without_matplotlib_says_how_to_get_it(tmp_path: Path) -> None:
    import importlib.util

    png = tmp_path / "night.png"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "actors.cli",
            "simulate",
            "simulation/scenarios/midnight-reboot.toml",
            "--seed",
            "3",
            "--plot",
            str(png),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    if importlib.util.find_spec("matplotlib") is None:
        assert done.returncode == 2
        assert "pip install 'kafkron[plot]'" in done.stderr and "or name a .svg" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert png.read_bytes().startswith(b"\x89PNG")


def test_nightly_billing_dag_runs_in_order_and_stops_downstream_of_a_dead_task() -> None:
    outcome = _run("nightly-billing-dag", 2)
    assert outcome.ok, outcome.text()
    order = next(v for v in outcome.verdicts if v.name == "dag-order")
    assert order.checked >= 20
    statuses = Counter((r.task, r.status) for r in outcome.evidence.results)
    assert statuses[("fx-rates", "failed")] >= 1
    assert statuses[("invoice-nightly", "upstream_failed")] >= 1
    assert statuses[("send-invoices", "succeeded")] >= 1


def test_cancel_during_worker_failover_is_never_started_by_the_new_owner() -> None:
    outcome = _run("cancel-during-worker-failover", 1)
    assert outcome.ok, outcome.text()
    run_id = run_id_for("invoice-nightly", parse_instant("2026-03-05T00:00:00Z"))
    assert [(c[0], c[1]) for c in outcome.evidence.cancels] == [(run_id, 1)]
    [result] = [r for r in outcome.evidence.results if r.run_id == run_id]
    assert (result.status, result.attempt, result.worker) == ("cancelled", 1, "worker-2")
    assert "operator" in result.message
    assert outcome.evidence.ledger_calls.get(run_id, 0) == 0  # no customer charged
    assert [r.attempt for r in outcome.evidence.runs if r.run_id == run_id] == [1]


def test_a_new_owner_fetching_one_record_at_a_time_never_starts_the_cancelled_run(
    tmp_path: Path,
) -> None:
    """The same night with the run and its cancel record in two fetches (each fetch
    returns one record): the new owner reads its partition to the end it had at the
    adoption before it starts anything, so the run is never started there."""
    text = (SCENARIOS / "cancel-during-worker-failover.toml").read_text()
    split = tmp_path / "split.toml"
    split.write_text(
        text.replace(
            "[[schedulers]]", "[worker_client]\nmax_fetch_records = 1\n\n[[schedulers]]", 1
        )
    )
    outcome = simulate(load(split), 1)
    assert outcome.ok, outcome.text()
    run_id = run_id_for("invoice-nightly", parse_instant("2026-03-05T00:00:00Z"))
    [result] = [r for r in outcome.evidence.results if r.run_id == run_id]
    assert (result.status, result.worker) == ("cancelled", "worker-2")
    stopped = [
        e
        for e in outcome.world.timeline.events
        if e.who.startswith("worker") and e.kind == "cancel" and run_id in e.text
    ]
    assert stopped == []  # no job of the run was started (and then stopped) anywhere


def test_runs_acl_revoked_backs_off_names_the_acl_and_fires_everything_once() -> None:
    """The schedulers' Write on runs revoked twice for seconds: no rebuild loop, no loss."""
    outcome = _run("runs-acl-revoked", 1)
    assert outcome.ok, outcome.replay()
    events = outcome.world.timeline.events
    denied = [e for e in events if e.kind == "denied"]
    assert denied and all("Write is granted to role scheduler" in e.text for e in denied)
    assert [e for e in events if e.kind == "authorized"]
    # Each shard is noted once per revocation, not once per refused attempt.
    faults = [e for e in events if e.kind == "fault" and "ACL on runs revoked" in e.text]
    assert len(denied) <= len(faults) * outcome.scenario.shards


def test_a_schedule_recreated_at_its_minute_fires_each_minute_once() -> None:
    """Delete + upsert created just before a minute and applied just after it fired:
    on a quiet shard and across a takeover between the two commands, the re-created
    schedule starts after the minute (on the code before the deleted ids' floors,
    08:03 and 08:06 were each fired twice); sent before the minute, it fires it once."""
    outcome = _run("schedule-recreated-at-its-minute", 1)
    assert outcome.ok, outcome.text()
    fired = Counter(
        r.scheduled_ms for r in outcome.evidence.runs if r.schedule_id == "ledger-export"
    )
    minutes = [parse_instant(f"2026-03-05T08:{m:02d}:00Z") for m in range(0, 16)]
    assert [fired[m] for m in minutes] == [1] * len(minutes)
    runs_at = {
        r.scheduled_ms: r.append_ms
        for r in outcome.evidence.runs
        if r.schedule_id == "ledger-export"
    }
    # The race took place: the minute fired before the delete was appended.
    assert runs_at[minutes[3]] < parse_instant("2026-03-05T08:03:00.400Z")
    assert runs_at[minutes[6]] < parse_instant("2026-03-05T08:06:00.300Z")
    events = outcome.world.timeline.events
    assert any(
        e.text.startswith("pause") and "shard 3" in e.text for e in events if e.who == "script"
    )
    assert any(e.kind == "fenced" and "shard 3" in e.text for e in events)


def test_deadlines_across_takeovers_alerts_every_late_run_once_and_no_punctual_one() -> None:
    outcome = _run("deadlines-across-takeovers", 1)
    assert outcome.ok, [v.violations for v in outcome.verdicts if not v.ok]
    verdict = next(v for v in outcome.verdicts if v.name == "deadlines")
    assert verdict.checked > 0
    alerts = outcome.evidence.deadlines.alerts
    late = [a for a, _ in alerts if a.type.value == "deadline_missed"]
    assert late, "the story must have late runs for the checker to judge"
