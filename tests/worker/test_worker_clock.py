"""The worker's time: its wall clock, never behind the broker's (``actors.worker.clock``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actors.worker.clock import BrokerFloor

WALL0 = 1_790_000_000_000


def test_without_a_sample_the_wall_clock_is_the_time() -> None:
    floor = BrokerFloor()
    assert floor.now_ms(WALL0, 5_000) == WALL0
    assert floor.floor_ms(5_000) is None
    assert floor.behind_ms(WALL0, 5_000) == 0


def test_a_wall_clock_stepped_back_is_raised_to_the_broker_floor_which_keeps_advancing() -> None:
    floor = BrokerFloor()
    floor.observe(WALL0, mono_ms=1_000)  # a run appended at WALL0, fetched at mono 1 s
    # The wall clock steps 90 s back; 10 s of monotonic time later:
    assert floor.now_ms(WALL0 - 90_000 + 10_000, 11_000) == WALL0 + 10_000
    assert floor.behind_ms(WALL0 - 80_000, 11_000) == 90_000


def test_a_wall_clock_ahead_of_the_broker_is_left_as_it_is() -> None:
    floor = BrokerFloor()
    floor.observe(WALL0, mono_ms=0)
    assert floor.now_ms(WALL0 + 45_000, 100) == WALL0 + 45_000


def test_the_floor_only_rises_and_ignores_records_without_a_timestamp() -> None:
    floor = BrokerFloor()
    floor.observe(WALL0, mono_ms=0)
    floor.observe(WALL0 - 60_000, mono_ms=100)  # an older record fetched later
    floor.observe(0, mono_ms=200)  # no timestamp
    assert floor.floor_ms(1_000) == WALL0 + 1_000


@given(
    samples=st.lists(
        st.tuples(st.integers(-10_000, 10_000), st.integers(0, 5_000)), min_size=1, max_size=20
    ),
    wall_offset_ms=st.integers(-120_000, 120_000),
)
def test_the_time_is_never_behind_any_sample_carried_forward(
    samples: list[tuple[int, int]], wall_offset_ms: int
) -> None:
    """Whatever the wall clock says, the time is at least every broker sample plus
    the monotonic time since it was fetched, and at least the wall clock."""
    floor = BrokerFloor()
    mono = 0
    seen: list[tuple[int, int]] = []
    for broker_delta, gap in samples:
        mono += gap
        broker = WALL0 + mono + broker_delta
        floor.observe(broker, mono)
        seen.append((broker, mono))
    later = mono + 1_000
    wall = WALL0 + later + wall_offset_ms
    now = floor.now_ms(wall, later)
    assert now >= wall
    assert all(now >= broker + (later - at) for broker, at in seen)
    assert now == max([wall] + [broker + (later - at) for broker, at in seen])
