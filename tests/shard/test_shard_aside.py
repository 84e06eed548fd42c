"""What few schedules hold (buffered, dead, passed) lives on an `Aside`: the
herd's fast spellings of a record are byte for byte the general ones whatever the
aside holds, a restore keeps it, and reading it never makes one."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.shard.definition import cached_definition, clear_caches
from actors.shard.restored import restored_definition
from actors.shard.state import (
    RunState,
    ScheduleState,
    _encode_fire_general,
    _encode_general,
    decode_idle,
    decode_schedule,
    definition_key,
    encode_fire,
    encode_schedule,
)
from tests.kit.shard import MINUTE, T0, Shard, upsert
from topics.timefmt import format_ms

DEF = orjson.dumps({"spec": {"every": "1h"}})
_INSTANTS = st.one_of(st.none(), st.integers(0, 4 * 10**12))


@settings(max_examples=500, deadline=None)
@given(
    last_ms=_INSTANTS,
    next_ms=_INSTANTS,
    passed_ms=_INSTANTS,
    set_passed=st.booleans(),
    clear_passed=st.booleans(),
    buffered=st.one_of(st.none(), st.lists(st.integers(0, 4 * 10**12), max_size=2)),
    dead=st.one_of(
        st.none(),
        st.dictionaries(st.sampled_from(["s@a", "s@b"]), st.integers(1, 5), max_size=2),
    ),
    made_empty=st.booleans(),
    in_flight=st.booleans(),
)
def test_the_fast_spellings_are_the_general_ones_whatever_the_aside_holds(
    last_ms: int | None,
    next_ms: int | None,
    passed_ms: int | None,
    set_passed: bool,
    clear_passed: bool,
    buffered: list[int] | None,
    dead: dict[str, int] | None,
    made_empty: bool,
    in_flight: bool,
) -> None:
    state = ScheduleState("s", DEF, None)
    state.last_fired_ms, state.next_ms = last_ms, next_ms
    if in_flight and last_ms is not None:
        run = RunState(state, f"s@{format_ms(last_ms)}", last_ms, None, 1, 1)
        run.fired_ms, run.deadline_ms = last_ms + 1, last_ms + 2
        state.runs[run.run_id] = run
    if set_passed:
        state.passed_ms = passed_ms
        if clear_passed:
            state.passed_ms = None
    if buffered is not None:
        state.buffered = list(buffered)
    if dead is not None:
        state.dead = dict(dead)
    if made_empty:
        _ = state.buffered, state.dead  # an aside with empty containers
    fire_value = encode_fire(state)
    assert fire_value == _encode_fire_general(state)
    assert encode_schedule(state) == _encode_general(state)
    definitions = {definition_key(DEF).encode(): DEF}
    for restored in (
        decode_schedule(fire_value, definitions),
        decode_schedule(encode_schedule(state)),
    ):
        assert restored.handled_ms() == state.handled_ms()
        assert (restored.buffered_or_none or []) == (state.buffered_or_none or [])
        assert (restored.dead_or_none or {}) == (state.dead_or_none or {})
        again = decode_schedule(encode_fire(restored), definitions)  # restored twice
        assert again.handled_ms() == state.handled_ms()
        assert encode_fire(again) == fire_value
    fast = decode_idle(b"s", fire_value)
    if fast is not None:  # the fast decoder takes only records with nothing aside
        assert fast.handled_ms() == state.handled_ms()
        assert not (state.buffered_or_none or state.dead_or_none)
        fast.def_bytes = DEF
        assert encode_fire(fast) == fire_value


def test_an_occurrence_while_a_run_is_in_flight_makes_no_aside() -> None:
    shard = Shard()
    shard.send(upsert(overlap="allow", spec={"every": "60s"}), at_ms=T0 + 5)
    shard.advance(T0 + MINUTE)
    shard.advance(T0 + 2 * MINUTE)  # the first run is still in flight: overlap decides
    state = shard.core.schedule("s")
    assert state is not None and len(state.runs) == 2
    assert state._aside is None


def test_a_definition_drawn_from_the_id_is_never_shared_by_its_bytes() -> None:
    """Jenkins H and a spread window draw from the schedule's id: such a definition
    is cached under (bytes, id), never under its bytes alone, which a restored
    schedule's first fire looks up."""
    clear_caches()
    for spec, spread_s in (
        ({"cron": "H * * * *"}, 0),
        ({"cron": "h/5 * * * *"}, 0),
        ({"every": "1h"}, 60),
    ):
        doc = {
            "spec": spec,
            "job": {"name": "x", "args": {}},
            "misfire": {"policy": "skip", "grace_s": 60, "catch_up_max": 1},
            "overlap": "skip",
            "dst": {"gap": "shift", "fold": "once"},
            "spread_window_s": spread_s,
            "retry": {
                "max_attempts": 1,
                "initial_s": 1,
                "coefficient": 2.0,
                "max_interval_s": 10,
                "jitter": "none",
                "non_retryable": [],
            },
            "timeout_s": 60,
            "start": None,
            "end": None,
        }
        def_bytes = orjson.dumps(doc)
        first = restored_definition("a", def_bytes)
        other = restored_definition("zzz", def_bytes)
        assert first is not other
        assert cached_definition(def_bytes) is None
