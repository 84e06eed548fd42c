"""`decode_schedule` skips the fields a record does not have: a run with only the four
fields every run has, and a schedule with none of the rare fields, decode as they did
when every field was looked up (the same record with those fields spelled at their
defaults takes the full path: both must give the same state)."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from actors.shard.state import RunState, ScheduleState, decode_schedule, encode_fire
from tests.kit.shard import T0
from topics.timefmt import format_ms

DEF = orjson.dumps({"spec": {"every": "1h"}, "job": {"name": "x"}})
instants = st.one_of(st.none(), st.integers(0, 4 * 10**12))


def _state(
    paused: bool, next_ms: int | None, passed_ms: int | None, runs: list[tuple[int, int]]
) -> ScheduleState:
    state = ScheduleState("tenant/job-1", DEF, None)
    state.paused, state.next_ms, state.last_fired_ms = paused, next_ms, T0
    state.passed_ms = passed_ms
    for scheduled_ms, attempt in runs:
        run = RunState(state, f"tenant/job-1@{format_ms(scheduled_ms)}", scheduled_ms, None, 1, 1)
        run.attempt, run.fired_ms, run.deadline_ms = attempt, scheduled_ms + 5, scheduled_ms + 9
        state.runs[run.run_id] = run
    return state


def _spelled_at_defaults(value: bytes) -> bytes:
    doc = orjson.loads(value)
    doc["fired_count"] = 0  # a rare field at its default: the full path for the schedule
    for entry in doc.get("runs") or ():
        entry["task"] = None  # and for each run
    return orjson.dumps(doc)


def _assert_same(got: ScheduleState, want: ScheduleState) -> None:
    for name in ScheduleState.__slots__:
        if name not in ("_runs", "_aside"):
            assert getattr(got, name) == getattr(want, name), name
    for name in ("passed_ms", "buffered_or_none", "dead_or_none", "fired_count", "completed"):
        assert getattr(got, name) == getattr(want, name), name
    assert (got.pause, got.backfill) == (want.pause, want.backfill)
    assert (got._aside is None) == (want._aside is None)
    assert list(got.runs) == list(want.runs)
    for run_id, run in got.runs.items():
        other = want.runs[run_id]
        for name in RunState.__slots__:
            if name != "schedule":
                assert getattr(run, name) == getattr(other, name), name
        assert run.schedule is got


@given(
    paused=st.booleans(),
    next_ms=instants,
    passed_ms=instants,
    runs=st.lists(st.tuples(st.integers(0, 4 * 10**12), st.integers(1, 9)), max_size=4),
)
def test_a_record_without_rare_fields_decodes_as_with_them_at_their_defaults(
    paused: bool, next_ms: int | None, passed_ms: int | None, runs: list[tuple[int, int]]
) -> None:
    value = encode_fire(_state(paused, next_ms, passed_ms, runs))
    _assert_same(decode_schedule(value), decode_schedule(_spelled_at_defaults(value)))


def test_a_run_with_a_fifth_field_still_reads_it() -> None:
    value = encode_fire(_state(False, T0, None, [(T0, 1)]))
    doc = orjson.loads(value)
    doc["runs"][0]["task"] = "extract"
    (run,) = decode_schedule(orjson.dumps(doc)).runs.values()
    assert run.task == "extract" and run.series_start == 1
