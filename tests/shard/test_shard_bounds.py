"""Bounds on a schedule's changelog record: runs in flight, outcomes kept, error text.

A changelog record the broker refuses fails the shard's transaction, and the
shard would retry the same batch forever; these tests drive the states that used
to grow a record without limit.
"""

from __future__ import annotations

from actors.shard.core import CHANGELOG_MAX_BYTES
from actors.shard.overlap import ALLOW_MAX_IN_FLIGHT
from actors.shard.runs import ERROR_TEXT_MAX_CHARS, OUTCOMES_FIRST, OUTCOMES_LAST
from tests.kit.shard import HOUR, MINUTE, SECOND, T0, Shard, upsert
from topics.names import TopicKind


def _largest_changelog_record(shard: Shard) -> int:
    return max(len(r.value or b"") for r in shard.written if r.topic == TopicKind.SCHEDULES)


def test_overlap_allow_is_bounded_and_says_why_it_skips() -> None:
    shard = Shard()
    shard.send(upsert(spec={"every": "1s"}, overlap="allow", timeout_s=3600), at_ms=T0 + 5)
    shard.run_until(T0 + (ALLOW_MAX_IN_FLIGHT + 5) * SECOND)
    state = shard.core.schedule("s")
    assert state is not None and len(state.runs) == ALLOW_MAX_IN_FLIGHT
    skipped = [r for r in shard.written if r.topic == TopicKind.RESULTS]
    assert len(skipped) == 5
    out = shard.advance(T0 + (ALLOW_MAX_IN_FLIGHT + 6) * SECOND)
    [result] = out.results
    assert result.status == "skipped" and result.error is not None
    assert "are its workers down?" in result.error["message"]


def test_workers_down_for_two_hours_under_allow_keep_the_record_small() -> None:
    # The review's scenario: every second, allow, timeout 3600 s, up to 1,000
    # attempts, no worker ever answers: timeouts and retries go on for hours.
    shard = Shard()
    shard.send(
        upsert(
            spec={"every": "1s"},
            overlap="allow",
            timeout_s=3600,
            retry={"max_attempts": 1000, "initial_s": 1, "max_interval_s": 10},
        ),
        at_ms=T0 + 5,
    )
    shard.run_until(T0 + 2 * HOUR)
    assert _largest_changelog_record(shard) < 64 * 1024
    assert shard.core.stats["timed_out_total"] >= ALLOW_MAX_IN_FLIGHT
    assert len(shard.run_until(T0 + 2 * HOUR + 10 * MINUTE).results) > 0  # still firing


def test_a_run_keeps_its_first_and_last_outcomes_with_error_text_cut() -> None:
    shard = Shard()
    shard.send(
        upsert(
            spec={"cron": "0 0 * * *"},
            retry={"max_attempts": 1000, "initial_s": 1, "coefficient": 1, "jitter": "none"},
        ),
        at_ms=T0 + 5,
    )
    shard.run_until(T0 + 24 * HOUR)
    [run] = shard.in_flight()
    long_error = {"type": "E" * 500, "message": "x" * 2000}
    for _ in range(20):
        shard.report(run, "failed", error=long_error)
        shard.run_until(shard.now_ms + 2 * SECOND)
        [run] = shard.in_flight()
    assert run.attempt == 21
    [entry] = shard.state_doc()["runs"]
    outcomes = entry["outcomes"]
    attempts = [o["attempt"] for o in outcomes]
    assert attempts == [1, 2, 18, 19, 20]
    assert len(outcomes) == OUTCOMES_FIRST + OUTCOMES_LAST
    for outcome in outcomes:
        assert len(outcome["error"]["message"]) == ERROR_TEXT_MAX_CHARS
        assert outcome["error"]["message"].endswith("...")
        assert len(outcome["error"]["type"]) < 500
    restored, _ = shard.restored()
    state = restored.core.schedule("s")
    assert state is not None and state.runs[run.run_id].attempt == 21


def test_a_record_above_the_bound_is_trimmed_with_a_rejection_and_firing_goes_on() -> None:
    # A job whose arguments nearly fill a command (about 240 KB) and a hundred runs in
    # flight, each with five failed attempts: the state no longer fits the bound.
    shard = Shard()
    shard.send(
        upsert(
            spec={"every": "1s"},
            overlap="allow",
            timeout_s=3600,
            job={"name": "big.job", "args": {"blob": "b" * 240_000}},
            retry={"max_attempts": 1000, "initial_s": 1, "coefficient": 1, "jitter": "none"},
        ),
        at_ms=T0 + 5,
    )
    shard.run_until(T0 + ALLOW_MAX_IN_FLIGHT * SECOND)
    error = {"type": "Boom", "message": "é\\" * 1000}  # escapes make the JSON longer
    rejections = []
    for _ in range(OUTCOMES_FIRST + OUTCOMES_LAST + 1):
        for run in shard.in_flight():
            rejections += shard.report(run, "failed", error=error).rejected
        shard.advance(shard.now_ms + 2 * SECOND)
    assert _largest_changelog_record(shard) <= CHANGELOG_MAX_BYTES
    assert rejections, "the record never outgrew the bound: make the test state larger"
    assert "above the bound" in rejections[0].reason
    assert "last attempt outcome" in rejections[0].reason
    state = shard.core.schedule("s")
    assert state is not None and state.runs  # trimmed, not emptied
    restored, _ = shard.restored()
    assert restored.core.schedule("s") is not None
    assert shard.run_until(shard.now_ms + MINUTE).records  # still firing
