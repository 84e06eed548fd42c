"""Restoring from the changelog a shard wrote gives a shard that writes the same future.

The property: drive a shard with a random stream of commands, results and time;
at a random point build a second shard from nothing but the first one's
changelog (as a new owner would after a failover), then feed both the same
remaining stream. Every later call must return the same records (compared as a
multiset per call: one call is one transaction, and the order of records of
different runs inside it carries no meaning), and the changelogs must end equal.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.shard.definition import clear_caches
from tests.kit.shard import HOUR, MINUTE, SECOND, T0, Out, Shard, command, upsert
from topics.records import OutRecord
from topics.timefmt import format_ms

IDS = ("a", "b", "c")

specs = st.sampled_from(
    [
        {"every": "30s"},
        {"every": "60s"},
        {"every": "1h"},
        {"every": "7s", "anchor": "2026-10-10T00:00:03Z"},
        {"cron": "*/2 * * * *"},
        {"cron": "H * * * *"},
        {"cron": "*/5 * * * *", "tz": "Europe/London"},
        "at",
    ]
)
upserts = st.fixed_dictionaries(
    {
        "spec": specs,
        "overlap": st.sampled_from(["allow", "skip", "buffer_one", "buffer_all", "cancel_other"]),
        "misfire": st.fixed_dictionaries(
            {
                "policy": st.sampled_from(["run_once", "catch_up", "skip"]),
                "grace_s": st.sampled_from([0, 5, 60, 300]),
                "catch_up_max": st.integers(1, 5),
            }
        ),
        "retry": st.fixed_dictionaries(
            {
                "max_attempts": st.integers(1, 4),
                "initial_s": st.sampled_from([1, 5, 30]),
                "jitter": st.sampled_from(["full", "none"]),
            }
        ),
        "timeout_s": st.sampled_from([10, 60, 600]),
        "spread": st.sampled_from([None, {"window_s": 20}]),
    }
)
ops = st.one_of(
    st.tuples(st.just("upsert"), st.sampled_from(IDS), upserts),
    st.tuples(
        st.sampled_from(["delete", "pause", "resume", "trigger"]), st.sampled_from(IDS), st.none()
    ),
    st.tuples(
        st.just("result"),
        st.integers(0, 20),
        st.sampled_from(["succeeded", "failed", "failed-final", "timed_out", "cancelled", "stale"]),
    ),
    st.tuples(st.just("replay"), st.sampled_from(IDS), st.integers(0, 5)),
    st.tuples(
        st.just("advance"),
        st.sampled_from(
            [1, 10, 999, SECOND, 7 * SECOND, 30 * SECOND, MINUTE, 10 * MINUTE, 3 * HOUR]
        ),
        st.none(),
    ),
)


def _apply(shard: Shard, op: tuple[Any, ...]) -> list[OutRecord]:
    kind, first, arg = op
    if kind == "upsert":
        fields = dict(arg)
        if fields["spec"] == "at":
            fields["spec"] = {"at": format_ms(shard.now_ms + 90 * SECOND)}
        if fields["spread"] is None:
            del fields["spread"]
        return shard.send(upsert(first, **fields)).records
    if kind in ("delete", "pause", "resume", "trigger"):
        return shard.send(command(f"schedule.{kind}", first)).records
    if kind == "advance":
        return shard.advance(shard.now_ms + first).records
    if kind == "replay":
        state = shard.core.schedule(first)
        dead = sorted(state.dead) if state is not None else []
        run_id = dead[arg % len(dead)] if dead else f"{first}@2026-10-10T00:00:00.000Z"
        return shard.send(command("dlq.replay", first, run_id=run_id)).records
    # a result for one of the runs in flight, chosen by index
    flying = sorted((sid, run_id) for sid in IDS for run_id in _runs(shard, sid))
    if not flying:
        return []
    _, run_id = flying[first % len(flying)]
    run = shard.last_attempt(run_id)
    if arg == "stale":
        return shard.report(run, "succeeded", attempt=run.attempt + 5).records
    if arg == "failed-final":
        error = {"type": "NonRetryable", "message": "gave up"}
        return shard.report(run, "failed", error=error).records
    return shard.report(run, arg).records


def _runs(shard: Shard, schedule_id: str) -> list[str]:
    state = shard.core.schedule(schedule_id)
    if state is None:
        return []
    return [run_id for run_id, run in state.runs.items() if run.retry_ms is None]


def _canonical(
    records: list[OutRecord],
) -> list[tuple[str, bytes | None, bytes | None, int | None]]:
    return sorted(
        ((r.topic.value, r.key, r.value, r.partition) for r in records),
        key=lambda t: (t[0], t[1] or b"", t[2] or b"", t[3] or 0),
    )


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(before=st.lists(ops, max_size=40), after=st.lists(ops, max_size=40))
def test_a_restored_shard_emits_exactly_the_same_future_records(
    before: list[tuple[Any, ...]], after: list[tuple[Any, ...]]
) -> None:
    original = Shard(now_ms=T0 + 5)
    for op in before:
        _apply(original, op)
    clear_caches()  # the restored shard must rebuild definitions from the changelog alone
    restored, restore_out = original.restored()
    assert restore_out.records == []
    for op in after:
        expected = _apply(original, op)
        got = _apply(restored, op)
        assert _canonical(got) == _canonical(expected), op
    assert restored.changelog == original.changelog
    # and a long quiet period after that, as the shard would live through it
    for _ in range(3):
        assert _canonical(_apply(restored, ("advance", 3 * HOUR, None))) == _canonical(
            _apply(original, ("advance", 3 * HOUR, None))
        )


def test_the_changelog_round_trips_every_field() -> None:
    shard = Shard(now_ms=T0 + 5)
    shard.send(
        upsert(
            "a",
            overlap="buffer_all",
            retry={"max_attempts": 2, "jitter": "none", "non_retryable": ["X"]},
            spread={"window_s": 30},
            start="2026-10-10T00:00:00Z",
            end="2027-10-10T00:00:00Z",
        )
    )
    shard.run_until(T0 + 4 * MINUTE)
    [run] = shard.in_flight("a")
    shard.report(run, "failed")
    shard.send(command("schedule.pause", "a"))
    value = shard.changelog[b"a"]
    assert value is not None
    restored, _ = shard.restored()
    assert restored.changelog[b"a"] == value
    state = restored.core.schedule("a")
    assert state is not None and state.paused and len(state.buffered) >= 1
    doc = orjson.loads(value)
    assert doc["runs"][0]["outcomes"][0]["status"] == "failed"
    assert doc["def"]["retry"]["non_retryable"] == ["X"]
    # re-encoding the restored state reproduces the record byte for byte
    from actors.shard.state import encode_schedule

    assert encode_schedule(state) == value


def test_a_tombstone_in_the_changelog_removes_the_schedule_on_restore() -> None:
    shard = Shard(now_ms=T0 + 5)
    shard.send(upsert("a"))
    shard.send(upsert("b"))
    shard.send(command("schedule.delete", "a"))
    restored, _ = shard.restored()
    assert restored.core.stats["schedules"] == 1
    assert restored.core.schedule("a") is None


def test_an_unreadable_changelog_record_is_reported_and_the_rest_restored() -> None:
    shard = Shard(now_ms=T0 + 5)
    shard.send(upsert("a"))
    shard.changelog[b"zz"] = b'{"v": 1, "kind": "schedule"}'
    restored, out = shard.restored()
    [rejected] = Out(out.records).rejected
    assert "b'zz'" in rejected.reason and "upsert it again" in rejected.reason
    assert rejected.topic == "kafkron.schedules"
    assert restored.core.stats["schedules"] == 1
    assert len(restored.run_until(T0 + MINUTE).runs) == 1


def test_a_restore_slices_the_definition_out_of_the_record_or_encodes_it_again() -> None:
    from actors.shard.state import decode_schedule

    shard = Shard(now_ms=T0 + 5)
    shard.send(upsert("a", job={"name": "x", "args": {"def": 1, "note": ',"def":'}}))
    value = shard.changelog[b"a"]
    assert value is not None
    doc = orjson.loads(value)
    expected = orjson.dumps(doc["def"])
    assert decode_schedule(value).def_bytes == expected
    # The same state laid out differently (say, rewritten by a tool) still restores.
    definition = doc.pop("def")
    rewritten = orjson.dumps({"def": definition, **doc})
    assert decode_schedule(rewritten).def_bytes == expected
    doc["def_bytes"] = 5
    assert decode_schedule(orjson.dumps({**doc, "def": definition})).def_bytes == expected


@given(st.integers(-(10**12), 4 * 10**12))
def test_instant_text_and_instant_ms_agree_with_the_wire_format(instant: int) -> None:
    from actors.shard.state import instant_ms, instant_text

    assert instant_text(instant) == format_ms(instant)
    assert instant_ms(format_ms(instant)) == instant


@given(
    schedule_id=st.text(min_size=1, max_size=12).filter(lambda t: "@" not in t and "/" not in t),
    paused=st.booleans(),
    next_ms=st.one_of(st.none(), st.integers(0, 4 * 10**12)),
    last_ms=st.one_of(st.none(), st.integers(0, 4 * 10**12)),
    runs=st.lists(st.tuples(st.integers(0, 4 * 10**12), st.integers(1, 9)), max_size=3),
)
def test_the_fast_changelog_encoding_is_byte_for_byte_what_orjson_writes(
    schedule_id: str,
    paused: bool,
    next_ms: int | None,
    last_ms: int | None,
    runs: list[tuple[int, int]],
) -> None:
    from actors.shard.state import RunState, ScheduleState, _encode_general, encode_schedule

    state = ScheduleState(schedule_id, b'{"spec":{"every":"1h"}}', None)
    state.paused, state.next_ms, state.last_fired_ms = paused, next_ms, last_ms
    for scheduled_ms, attempt in runs:
        run = RunState(state, f"{schedule_id}@{format_ms(scheduled_ms)}", scheduled_ms, None, 1, 1)
        run.attempt, run.fired_ms, run.deadline_ms = attempt, scheduled_ms + 5, scheduled_ms + 9
        state.runs[run.run_id] = run
    assert encode_schedule(state) == _encode_general(state)


def test_attempts_due_in_one_wheel_tick_keep_their_order_after_a_restore() -> None:
    # Found by the property above: two runs' retries fall in one 10 ms tick, which
    # the wheel returns in insertion order, and a restored shard inserts in another;
    # both runs die in that call, so the memory of dead runs came out reordered.
    policy = {
        "spec": {"every": "30s"},
        "overlap": "allow",
        "misfire": {"policy": "run_once", "grace_s": 60, "catch_up_max": 1},
        "retry": {"max_attempts": 2, "initial_s": 1, "jitter": "full"},
        "timeout_s": 10,
        "spread": {"window_s": 20},
    }
    other = {**policy, "spread": None, "retry": {"max_attempts": 1, "initial_s": 1}}
    original = Shard(now_ms=T0 + 5)
    for op in [
        ("upsert", "b", policy),
        ("advance", MINUTE, None),
        ("upsert", "a", other),
        ("result", 0, "failed"),
        ("result", 0, "failed"),
        ("advance", 999, None),
    ]:
        _apply(original, op)
    clear_caches()
    restored, _ = original.restored()
    expected = _canonical(_apply(original, ("advance", 3 * HOUR, None)))
    assert _canonical(_apply(restored, ("advance", 3 * HOUR, None))) == expected
    assert restored.changelog == original.changelog
