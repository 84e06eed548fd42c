"""The version-2 changelog records: exact encodings, the fast decoder, definitions' records.

A fire writes the schedule's state without its definition (``"v": 2``), the
definition has its own record, shared by the schedules that say the same and
tombstoned when none does any more; a command still writes the full record.
"""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from actors.shard.definition import clear_caches
from actors.shard.state import (
    DEF_KEY_PREFIX,
    RunState,
    ScheduleState,
    _encode_fire_general,
    decode_definition,
    decode_idle,
    decode_schedule,
    definition_key,
    encode_definition,
    encode_fire,
    encode_schedule,
    full_size,
    is_definition_key,
)
from tests.kit.shard import HOUR, MINUTE, T0, Shard, command, upsert
from topics.timefmt import format_ms

DEF = orjson.dumps({"spec": {"every": "1h"}, "job": {"name": "x", "args": {"q": '"é,"def":'}}})

ids = st.text(min_size=1, max_size=12).filter(lambda t: "@" not in t and "/" not in t)
instants = st.one_of(st.none(), st.integers(0, 4 * 10**12))


def _state(
    schedule_id: str,
    paused: bool,
    next_ms: int | None,
    last_ms: int | None,
    runs: list[tuple[int, int]],
    def_bytes: bytes = DEF,
) -> ScheduleState:
    state = ScheduleState(schedule_id, def_bytes, None)
    state.paused, state.next_ms, state.last_fired_ms = paused, next_ms, last_ms
    for scheduled_ms, attempt in runs:
        run = RunState(state, f"{schedule_id}@{format_ms(scheduled_ms)}", scheduled_ms, None, 1, 1)
        run.attempt, run.fired_ms, run.deadline_ms = attempt, scheduled_ms + 5, scheduled_ms + 9
        state.runs[run.run_id] = run
    return state


@given(
    schedule_id=ids,
    paused=st.booleans(),
    next_ms=instants,
    last_ms=instants,
    runs=st.lists(st.tuples(st.integers(0, 4 * 10**12), st.integers(1, 9)), max_size=3),
    def_len=st.integers(0, 3000),
    passed_ms=instants,
)
def test_the_fire_record_is_what_orjson_writes_and_its_full_size_is_exact(
    schedule_id: str,
    paused: bool,
    next_ms: int | None,
    last_ms: int | None,
    runs: list[tuple[int, int]],
    def_len: int,
    passed_ms: int | None,
) -> None:
    def_bytes = orjson.dumps({"pad": "p" * def_len})
    state = _state(schedule_id, paused, next_ms, last_ms, runs, def_bytes)
    state.passed_ms = passed_ms
    value = encode_fire(state)
    assert value == _encode_fire_general(state)
    assert full_size(value, def_bytes) == len(encode_schedule(state))
    doc = orjson.loads(value)
    assert doc["v"] == 2 and doc["id"] == schedule_id and "kind" not in doc
    assert doc["def"] == definition_key(def_bytes)
    # decoded back (with its definition), it is the same state
    key = doc["def"].encode()
    again = decode_schedule(value, {key: def_bytes})
    assert encode_fire(again) == value and again.def_bytes == def_bytes
    assert again.handled_ms() == state.handled_ms()  # "passed" only when it is later
    assert encode_schedule(again) == encode_schedule(state)
    # without its definition, the key stands in for the caller to resolve
    assert decode_schedule(value).def_bytes == key


@given(
    schedule_id=ids,
    next_ms=st.integers(0, 4 * 10**12),
    last_ms=instants,
    runs=st.lists(st.tuples(st.integers(0, 4 * 10**12), st.integers(1, 10**6)), max_size=1),
)
def test_the_fast_decoder_reads_idle_and_one_run_records_as_the_parser_does(
    schedule_id: str, next_ms: int, last_ms: int | None, runs: list[tuple[int, int]]
) -> None:
    if runs and last_ms is None:
        last_ms = runs[0][0]  # a run in flight was fired: the last fired is set
    state = _state(schedule_id, False, next_ms, last_ms, runs)
    value = encode_fire(state)
    parsed = decode_schedule(value)
    fast = decode_idle(schedule_id.encode(), value)
    if '"' in schedule_id or "\\" in schedule_id or not schedule_id.isprintable():
        return  # escaped in the JSON: the fast decoder may decline, the parser reads it
    assert fast is not None
    # built without __init__: every slot is set, and to what the parser sets it
    for name in ScheduleState.__slots__:
        if name not in ("_runs", "_aside"):
            assert getattr(fast, name) == getattr(parsed, name), name
    # What an aside holds, one by one (an Aside compares by identity).
    assert fast._aside is None
    assert (fast.passed_ms, fast.buffered_or_none, fast.dead_or_none) == (
        parsed.passed_ms,
        parsed.buffered_or_none,
        parsed.dead_or_none,
    )
    assert not fast.paused and list(fast.runs) == list(parsed.runs)
    for run_id, run in fast.runs.items():
        other = parsed.runs[run_id]
        for name in RunState.__slots__:
            if name != "schedule":
                assert getattr(run, name) == getattr(other, name), name
        assert run.schedule is fast


@given(
    paused=st.booleans(),
    next_ms=instants,
    runs=st.lists(st.tuples(st.integers(0, 4 * 10**12), st.integers(1, 9)), max_size=2),
    retrying=st.booleans(),
)
def test_the_fast_decoder_declines_what_is_not_idle_or_one_plain_run(
    paused: bool, next_ms: int | None, runs: list[tuple[int, int]], retrying: bool
) -> None:
    state = _state("s", paused, next_ms, T0, runs)
    if retrying:
        for run in state.runs.values():
            run.retry_ms = T0 + 7  # waiting for its next attempt: not a plain run
    plain = len(state.runs) == 1 and not retrying  # two runs of one instant are one
    if not paused and next_ms is not None and (not runs or plain):
        return
    assert decode_idle(b"s", encode_fire(state)) is None
    assert decode_idle(b"other", encode_fire(_state("s", False, T0, None, []))) is None


def test_a_definition_record_round_trips_and_its_key_never_names_a_schedule() -> None:
    value = encode_definition(DEF)
    assert orjson.loads(value) == {"v": 2, "kind": "definition", "def": orjson.loads(DEF)}
    assert decode_definition(value) == DEF
    reordered = orjson.dumps({"def": orjson.loads(DEF), "kind": "definition", "v": 2})
    assert decode_definition(reordered) == DEF  # another layout of the same JSON
    key = definition_key(DEF).encode()
    assert is_definition_key(key) and key.startswith(DEF_KEY_PREFIX) and len(key) == 37
    assert b"@" in key  # never in a schedule id


def test_a_fire_writes_the_small_record_after_its_definition_and_a_command_the_full_one() -> None:
    shard = Shard()
    upserted = shard.send(upsert("a", spec={"every": "1h"}), at_ms=T0 + 5)
    assert upserted.definitions == []
    assert orjson.loads(upserted.changelog[0].value or b"")["v"] == 1
    fired = shard.run_until(T0 + HOUR)
    [definition] = fired.definitions
    [record] = fired.changelog
    assert orjson.loads(record.value or b"")["def"] == (definition.key or b"").decode()
    assert b'"spec"' not in (record.value or b"") and len(record.value or b"") < 300
    # A second schedule with the same definition shares its record.
    shard.send(upsert("b", spec={"every": "1h"}))
    assert shard.run_until(T0 + 2 * HOUR).definitions == []
    # Deleting one keeps it; deleting the last writes its tombstone.
    assert shard.send(command("schedule.delete", "a")).definitions == []
    [tombstone] = shard.send(command("schedule.delete", "b")).definitions
    assert tombstone.key == definition.key and tombstone.value is None
    # What is left are the floors of the two deleted ids (`actors.shard.retired`).
    assert [key for key, value in shard.changelog.items() if value is not None] == [
        b"@gone/a",
        b"@gone/b",
    ]


def test_a_redefined_schedule_drops_its_old_definition_record_and_restores() -> None:
    shard = Shard()
    shard.send(upsert("a", spec={"every": "1h"}), at_ms=T0 + 5)
    [old] = shard.run_until(T0 + HOUR).definitions
    redefined = shard.send(upsert("a", spec={"every": "30m"}))
    assert [(d.key, d.value) for d in redefined.definitions] == [(old.key, None)]
    [new] = shard.run_until(T0 + HOUR + 30 * MINUTE).definitions
    assert new.key != old.key
    clear_caches()
    restored, out = shard.restored()
    assert out.records == []
    later = T0 + 2 * HOUR
    assert [r.run_id for r in restored.run_until(later).runs] == [
        r.run_id for r in shard.run_until(later).runs
    ]


def test_a_schedule_whose_definition_record_is_missing_is_reported_not_restored() -> None:
    shard = Shard()
    shard.send(upsert("a", spec={"every": "1h"}), at_ms=T0 + 5)
    shard.send(upsert("b", spec={"every": "2h"}))
    [definition] = [d for d in shard.run_until(T0 + HOUR).definitions]
    assert definition.key is not None
    del shard.changelog[definition.key]
    restored, out = shard.restored()
    [rejected] = out.rejected
    assert "definition record" in rejected.reason and "b'a'" in rejected.reason
    assert restored.core.schedule("a") is None and restored.core.schedule("b") is not None


@given(
    batch=st.lists(
        st.tuples(
            ids,
            st.booleans(),
            instants,
            instants,
            st.lists(st.tuples(st.integers(0, 4 * 10**12), st.integers(1, 9)), max_size=2),
            st.sampled_from([DEF, orjson.dumps({"spec": {"at": "2026-01-01T00:00:00Z"}})]),
        ),
        max_size=12,
    )
)
def test_a_batch_encoded_with_one_memo_writes_each_record_as_alone(
    batch: list[tuple[str, bool, int | None, int | None, list[tuple[int, int]], bytes]],
) -> None:
    """The memo a changelog pass shares (`encode_fire`'s ``middles``) never lends one
    schedule's definition, pause or instants to another of the same batch."""
    middles: dict[tuple[bytes, bool, int | None, int | None], str] = {}
    states = [_state(*fields) for fields in batch]
    together = [encode_fire(state, middles) for state in states]
    assert together == [encode_fire(state) for state in states]
    assert together == [_encode_fire_general(state) for state in states]


def test_a_herd_s_batch_spells_its_shared_middle_once() -> None:
    middles: dict[tuple[bytes, bool, int | None, int | None], str] = {}
    herd = [_state(f"s{i}", False, T0 + HOUR, T0, [(T0, 1)]) for i in range(100)]
    values = [encode_fire(state, middles) for state in herd]
    assert len(middles) == 1
    assert values[7] == _encode_fire_general(herd[7])
