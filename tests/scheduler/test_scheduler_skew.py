"""The clock-skew estimator: bounds from produce round trips, holdback beyond the bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.scheduler.skew import SkewEstimator


def test_no_samples_means_no_estimate_and_no_holdback() -> None:
    skew = SkewEstimator(bound_ms=500)
    assert skew.ahead_ms is None and skew.skew_ms is None and skew.uncertainty_ms is None
    assert skew.holdback_ms() == 0
    assert skew.adjusted_now_ms(1_000_000) == 1_000_000


def test_a_clock_proven_ahead_beyond_the_bound_is_held_back_by_the_excess() -> None:
    skew = SkewEstimator(bound_ms=1_000)
    # Local clock 3 s ahead: sent at local 13_000, broker stamped 10_010, acked at 13_040.
    skew.observe(sent_ms=13_000, acked_ms=13_040, broker_ms=10_010)
    assert skew.ahead_ms == 2_990
    assert skew.holdback_ms() == 1_990
    assert skew.adjusted_now_ms(20_000) == 18_010
    assert skew.skew_ms == 13_020 - 10_010
    assert skew.uncertainty_ms == 20


def test_skew_within_the_bound_is_tolerated() -> None:
    skew = SkewEstimator(bound_ms=1_000)
    skew.observe(sent_ms=10_500, acked_ms=10_520, broker_ms=10_000)
    assert skew.ahead_ms == 500
    assert skew.holdback_ms() == 0


def test_a_clock_behind_the_broker_is_never_held_back() -> None:
    skew = SkewEstimator(bound_ms=0)
    skew.observe(sent_ms=5_000, acked_ms=5_010, broker_ms=9_000)
    assert skew.ahead_ms == -4_000
    assert skew.holdback_ms() == 0


def test_create_time_stamps_and_clock_steps_are_ignored() -> None:
    skew = SkewEstimator()
    skew.observe(sent_ms=10, acked_ms=20, broker_ms=-1)  # a CreateTime topic answers -1
    skew.observe(sent_ms=30, acked_ms=20, broker_ms=25)  # acked before sent: the clock stepped
    assert skew.samples_seen == 0 and skew.ahead_ms is None


def test_old_samples_leave_the_window() -> None:
    skew = SkewEstimator(bound_ms=0, window=2)
    skew.observe(sent_ms=10_000, acked_ms=10_010, broker_ms=5_000)  # 5 s ahead, then NTP fixed it
    skew.observe(sent_ms=20_000, acked_ms=20_010, broker_ms=20_000)
    assert skew.holdback_ms() == 5_000
    skew.observe(sent_ms=30_000, acked_ms=30_010, broker_ms=30_000)
    assert skew.holdback_ms() == 0


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="bound_ms"):
        SkewEstimator(bound_ms=-1)
    with pytest.raises(ValueError, match="window"):
        SkewEstimator(window=0)


@given(
    offset_ms=st.integers(-100_000, 100_000),
    trips=st.lists(
        st.tuples(st.integers(0, 10**9), st.integers(0, 500), st.floats(0, 1)),
        min_size=1,
        max_size=40,
    ),
    bound_ms=st.integers(0, 5_000),
)
def test_the_bounds_always_contain_the_true_offset(
    offset_ms: int, trips: list[tuple[int, int, float]], bound_ms: int
) -> None:
    """Whatever the round trips, ahead_ms never exceeds the true offset (a proof, not a
    guess), so the holdback never exceeds offset - bound: firing is never pushed late
    by more than the real excess skew."""
    skew = SkewEstimator(bound_ms=bound_ms)
    for true_sent, rtt, where in trips:
        true_append = true_sent + int(rtt * where)
        skew.observe(
            sent_ms=true_sent + offset_ms,
            acked_ms=true_sent + rtt + offset_ms,
            broker_ms=true_append,
        )
    assert skew.ahead_ms is not None and skew.ahead_ms <= offset_ms
    assert skew.holdback_ms() <= max(0, offset_ms - bound_ms)
    assert skew.uncertainty_ms is not None and skew.skew_ms is not None
    assert abs(skew.skew_ms - offset_ms) <= skew.uncertainty_ms + 1
