"""Overlap policies: what an occurrence does while a run of its schedule is in flight."""

from __future__ import annotations

import pytest

from actors.shard.overlap import BUFFER_ALL_MAX
from tests.kit.shard import MINUTE, SECOND, T0, Out, Shard, command, upsert
from topics.messages import parse_result, run_id_for
from topics.names import TopicKind


def _busy(policy: str) -> tuple[Shard, str]:
    """A per-minute schedule whose first run (at T0 + 1 min) is still in flight."""
    shard = Shard()
    shard.send(upsert(overlap=policy, spec={"every": "60s"}), at_ms=T0 + 5)
    [run] = shard.advance(T0 + MINUTE).runs
    return shard, run.run_id


def test_allow_starts_alongside() -> None:
    shard, _ = _busy("allow")
    out = shard.run_until(T0 + 3 * MINUTE)
    assert [r.scheduled_ms for r in out.runs] == [T0 + 2 * MINUTE, T0 + 3 * MINUTE]
    assert shard.core.stats["in_flight"] == 3


def test_skip_reports_skipped_and_never_runs_it() -> None:
    shard, _ = _busy("skip")
    out = shard.run_until(T0 + 3 * MINUTE)
    assert out.runs == []
    assert [(r.status, r.scheduled_ms) for r in out.results] == [
        ("skipped", T0 + 2 * MINUTE),
        ("skipped", T0 + 3 * MINUTE),
    ]
    assert all(r.error is not None and r.error["type"] == "Overlap" for r in out.results)


def test_buffer_one_keeps_the_newest_waiting_and_starts_it_when_the_run_ends() -> None:
    shard, run_id = _busy("buffer_one")
    out = shard.run_until(T0 + 3 * MINUTE + 1)
    assert out.runs == []
    assert [(r.status, r.scheduled_ms) for r in out.results] == [("skipped", T0 + 2 * MINUTE)]
    assert shard.state_doc()["buffered"] == ["2026-10-10T00:03:00.000Z"]
    [first] = shard.in_flight()
    done = shard.report(first, "succeeded", at_ms=T0 + 3 * MINUTE + 10)
    [started] = done.runs
    assert started.scheduled_ms == T0 + 3 * MINUTE and started.fired_ms == T0 + 3 * MINUTE + 10
    assert run_id != started.run_id
    assert shard.state_doc().get("buffered") is None


def test_buffer_all_starts_every_waiting_occurrence_one_after_another() -> None:
    shard, _ = _busy("buffer_all")
    shard.run_until(T0 + 4 * MINUTE)
    assert len(shard.state_doc()["buffered"]) == 3
    started = []
    [current] = shard.in_flight()
    for _ in range(3):
        [current] = shard.report(current, "succeeded").runs
        started.append(current.scheduled_ms)
    assert started == [T0 + 2 * MINUTE, T0 + 3 * MINUTE, T0 + 4 * MINUTE]
    assert shard.report(current, "succeeded").runs == []


def test_buffer_all_is_bounded() -> None:
    shard = Shard()
    shard.send(
        upsert(overlap="buffer_all", spec={"every": "1s"}, misfire={"grace_s": 3600}),
        at_ms=T0 + 5,
    )
    shard.advance(T0 + SECOND)
    out = shard.advance(T0 + (BUFFER_ALL_MAX + 1 + 50) * SECOND)
    assert len(shard.state_doc()["buffered"]) == BUFFER_ALL_MAX
    assert out.statuses() == ["skipped"] * 50


def test_cancel_other_asks_the_worker_to_stop_the_old_run_then_starts_the_new_one() -> None:
    shard, old_run_id = _busy("cancel_other")
    out = shard.advance(T0 + 2 * MINUTE)
    assert out.results == [] and out.runs == []  # the old attempt's worker writes its result
    [cancel] = out.cancels
    assert (cancel.run_id, cancel.attempt) == (old_run_id, 1)
    assert "cancel_other" in cancel.reason
    assert shard.state_doc()["runs"][0]["cancel"] == cancel.reason
    assert shard.state_doc()["buffered"] == ["2026-10-10T00:02:00.000Z"]
    # The worker's cancelled result ends the old run; then the new one starts.
    old = shard.last_attempt(old_run_id)
    done = shard.report(old, "cancelled", error={"type": "Cancelled", "message": cancel.reason})
    [new] = done.runs
    assert new.scheduled_ms == T0 + 2 * MINUTE
    assert [r["run_id"] for r in shard.state_doc()["runs"]] == [new.run_id]
    out = shard.advance(T0 + 3 * MINUTE)
    assert [c.run_id for c in out.cancels] == [new.run_id]


def test_cancel_other_keeps_only_the_newest_occurrence_waiting() -> None:
    shard, _ = _busy("cancel_other")
    shard.advance(T0 + 2 * MINUTE)
    out = shard.advance(T0 + 3 * MINUTE)  # the old run has not ended yet
    assert out.cancels == []  # asked once
    assert [(r.status, r.scheduled_ms) for r in out.results] == [("skipped", T0 + 2 * MINUTE)]
    assert shard.state_doc()["buffered"] == ["2026-10-10T00:03:00.000Z"]


def test_a_run_waiting_for_a_retry_is_still_in_flight() -> None:
    shard = Shard()
    shard.send(
        upsert(overlap="skip", retry={"initial_s": 120, "max_interval_s": 120, "jitter": "none"}),
        at_ms=T0 + 5,
    )
    [run] = shard.advance(T0 + MINUTE).runs
    shard.report(run, "failed", at_ms=T0 + MINUTE + SECOND)
    out = shard.advance(T0 + 2 * MINUTE)
    assert out.runs == [] and out.statuses() == ["skipped"]


def test_retries_ignore_the_overlap_policy_and_paused_buffers_wait_for_resume() -> None:
    shard, _ = _busy("buffer_one")
    shard.run_until(T0 + 2 * MINUTE)
    shard.send(command("schedule.pause"), at_ms=T0 + 2 * MINUTE + 1)
    [first] = shard.in_flight()
    assert shard.report(first, "succeeded").runs == []  # paused: the buffered one waits
    out = shard.send(command("schedule.resume"), at_ms=T0 + 2 * MINUTE + 30 * SECOND)
    assert [r.scheduled_ms for r in out.runs] == [T0 + 2 * MINUTE]


@pytest.mark.parametrize("policy", ["allow", "skip", "buffer_one", "buffer_all", "cancel_other"])
def test_a_trigger_never_shares_a_run_id_with_an_occurrence_due_but_not_yet_fired(
    policy: str,
) -> None:
    # Commands are applied before advance: at 00:02 the 00:01 and 00:02
    # occurrences are due but not fired when the trigger is applied.
    shard = Shard()
    shard.send(upsert(overlap=policy), at_ms=T0 + 5)
    out = shard.send(command("schedule.trigger"), at_ms=T0 + 2 * MINUTE)
    [rejection] = out.rejected
    assert "this very instant" in rejection.reason
    shard.run_until(T0 + 2 * MINUTE)
    for minute in range(3, 8):  # let the runs finish so the buffers drain
        for run in shard.in_flight():
            shard.report(run, "succeeded")
        shard.run_until(T0 + minute * MINUTE)
    emitted = Out(shard.written).runs
    attempts = [(run.run_id, run.attempt) for run in emitted]
    assert len(attempts) == len(set(attempts))
    shard_results = {
        parse_result(r.value).run_id
        for r in shard.written
        if r.topic == TopicKind.RESULTS
        and r.value
        and parse_result(r.value).status in ("skipped", "missed")
    }
    assert shard_results.isdisjoint({run.run_id for run in emitted})
    # Every occurrence from 00:01 on is accounted for exactly once.
    handled = {run.run_id for run in emitted} | shard_results
    assert {run_id_for("s", T0 + m * MINUTE) for m in range(1, 7)} <= handled
