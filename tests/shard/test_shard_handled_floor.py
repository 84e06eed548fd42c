"""No occurrence is handled twice: not by a re-upsert, nor by an id deleted and
created again (its run ids name the same instants), nor across a restore."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.shard import ShardCore
from actors.shard.retired import GONE_KEY_PREFIX, decode_gone, encode_gone, gone_key
from actors.views.schedules import latest_states
from actors.views.tail import Record
from tests.kit.shard import HOUR, MINUTE, SECOND, T0, Out, Shard, command, upsert
from topics.timefmt import format_ms

GONE = GONE_KEY_PREFIX + b"s"


def _handled(*outs: Out) -> list[str]:
    """Every run id fired (first attempts) or reported by the shard, in order."""
    ids: list[str] = []
    for out in outs:
        ids += [r.run_id for r in out.runs if r.attempt == 1]
        ids += [r.run_id for r in out.results if r.worker.startswith("shard-")]
    return ids


def _fired_then_deleted(shard: Shard) -> int:
    """s fires T0+1m; a delete produced just before that occurrence is applied just
    after it (the shard was a little behind); returns when it was produced, as the
    re-creating upsert sent with it."""
    shard.send(upsert(overlap="allow"), at_ms=T0 + 5)
    first = _handled(shard.advance(T0 + MINUTE))
    assert first == [f"s@{format_ms(T0 + MINUTE)}"]
    produced_ms = T0 + MINUTE - 100
    shard.send(command("schedule.delete"), at_ms=T0 + MINUTE + 10, produced_ms=produced_ms)
    return produced_ms


def test_an_id_deleted_and_created_again_never_fires_what_its_predecessor_fired() -> None:
    shard = Shard()
    produced_ms = _fired_then_deleted(shard)
    out = shard.send(upsert(overlap="allow"), at_ms=T0 + MINUTE + 10, produced_ms=produced_ms)
    later = _handled(out, shard.run_until(T0 + 3 * MINUTE))
    assert later == [f"s@{format_ms(T0 + 2 * MINUTE)}", f"s@{format_ms(T0 + 3 * MINUTE)}"]
    assert shard.changelog[GONE] is None  # the floor went with the re-creation


def test_the_floor_of_a_deleted_id_survives_a_failover() -> None:
    shard = Shard()
    produced_ms = _fired_then_deleted(shard)
    assert decode_gone(shard.changelog[GONE] or b"")[0] == T0 + MINUTE
    restored, _ = shard.restored()
    out = restored.send(upsert(overlap="allow"), at_ms=T0 + MINUTE + 20, produced_ms=produced_ms)
    later = _handled(out, restored.run_until(T0 + 2 * MINUTE))
    assert later == [f"s@{format_ms(T0 + 2 * MINUTE)}"]


def test_a_re_created_id_keeps_the_floor_through_its_own_re_upserts() -> None:
    shard = Shard()
    produced_ms = _fired_then_deleted(shard)
    shard.send(upsert(overlap="allow"), at_ms=T0 + MINUTE + 10, produced_ms=produced_ms)
    # A one-off at the very instant already fired, within its grace: not again.
    out = shard.send(
        upsert(overlap="allow", spec={"at": format_ms(T0 + MINUTE)}), at_ms=T0 + MINUTE + 30
    )
    assert _handled(out, shard.run_until(T0 + 5 * MINUTE)) == []


def test_a_deleted_ids_floor_is_removed_once_no_covered_look_back_reaches_it() -> None:
    shard = Shard()
    _fired_then_deleted(shard)
    # Kept for two graces of an hour (the longest the delete covers), from 00:01.
    shard.advance(T0 + MINUTE + 2 * HOUR)
    assert shard.changelog[GONE] is not None
    out = shard.advance(T0 + MINUTE + 2 * HOUR + 1)
    assert [(r.key, r.value) for r in out.gone] == [(GONE, None)] and out.changelog == []


@pytest.mark.parametrize("lag", [False, True])
def test_a_re_created_id_with_a_grace_of_an_hour_never_reaches_its_predecessors_instant(
    lag: bool,
) -> None:
    shard = Shard()
    _fired_then_deleted(shard)
    # 11 minutes later (two default graces have passed): a one-off at the instant
    # fired, or the same schedule from a producer whose clock is 11 minutes slow.
    spec = {"every": "60s"} if lag else {"at": format_ms(T0 + MINUTE)}
    body = upsert(spec=spec, misfire={"grace_s": 3600})
    produced_ms = T0 + MINUTE - 100 if lag else 0
    out = shard.send(body, at_ms=T0 + 12 * MINUTE, produced_ms=produced_ms)
    assert f"s@{format_ms(T0 + MINUTE)}" not in _handled(out, shard.run_until(T0 + 20 * MINUTE))


def test_a_floor_below_the_re_created_ids_anchor_still_guards_its_re_upserts() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    shard.advance(T0 + MINUTE)
    shard.send(command("schedule.delete"), at_ms=T0 + MINUTE + 10)
    shard.send(upsert(), at_ms=T0 + MINUTE + 30 * SECOND)  # no lag: starts after now
    # A one-off at the instant the predecessor fired, within its grace: not again.
    out = shard.send(upsert(spec={"at": format_ms(T0 + MINUTE)}), at_ms=T0 + MINUTE + 31 * SECOND)
    assert _handled(out, shard.run_until(T0 + 10 * MINUTE)) == []


def test_a_standby_tailing_deletes_and_re_creations_keeps_no_expiry_entries() -> None:
    core = ShardCore(partition=0, partitions=1, now_ms=T0)
    for i in range(1_000):  # a floor written and then claimed, as a standby reads them
        key = gone_key(f"reminder-{i}")
        core.restore(key, encode_gone(T0 + i, T0 + i + HOUR))
        core.restore(key, None)
    retired = core._retired
    assert len(retired) == 0 and retired._expiry == []
    core.restore(gone_key("kept"), encode_gone(T0, T0 + HOUR))
    core.finish_restore(T0)
    assert core.advance(T0 + HOUR + 1) != [] and len(retired) == 0  # its tombstone


def test_a_schedule_whose_definition_no_longer_builds_can_still_be_deleted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    shard.advance(T0 + MINUTE)
    state = shard.core.schedule("s")
    assert state is not None
    state._definition = None  # as after a restore, built on first use: it fails

    def lost_zone(schedule_id: str, def_bytes: bytes) -> None:
        raise ValueError("the zone database lost its zone")

    monkeypatch.setattr("actors.shard.state.restored_definition", lost_zone)
    out = shard.send(command("schedule.delete"), at_ms=T0 + MINUTE + 10)
    assert out.rejected == [] and [(r.key, r.value) for r in out.changelog] == [(b"s", None)]
    assert decode_gone(shard.changelog[GONE] or b"")[0] == T0 + MINUTE


def test_a_delete_of_a_schedule_that_never_fired_leaves_no_floor() -> None:
    shard = Shard()
    shard.send(upsert(), at_ms=T0 + 5)
    out = shard.send(command("schedule.delete"), at_ms=T0 + 10)
    assert [(r.key, r.value) for r in out.changelog] == [(b"s", None)] and out.gone == []


def test_the_console_does_not_list_a_deleted_ids_floor() -> None:
    shard = Shard()
    _fired_then_deleted(shard)
    records = [
        Record(partition=0, offset=i, timestamp_ms=0, key=key, value=value)
        for i, (key, value) in enumerate(shard.changelog.items())
    ]
    assert latest_states(records) == {}


def test_an_unchanged_re_upsert_in_the_millisecond_of_a_skip_does_not_report_it_again() -> None:
    shard = Shard()
    shard.send(upsert(overlap="skip"), at_ms=T0 + 5)
    [run] = shard.advance(T0 + MINUTE).runs
    assert shard.advance(T0 + 2 * MINUTE).statuses() == ["skipped"]
    # The run ends and the same definition comes again, all in that millisecond:
    # the skipped occurrence must neither fire now nor be reported twice.
    shard.report(run, "succeeded", at_ms=T0 + 2 * MINUTE)
    out = shard.send(upsert(overlap="skip"), at_ms=T0 + 2 * MINUTE)
    assert _handled(out, shard.advance(T0 + 2 * MINUTE)) == []
    assert _handled(shard.run_until(T0 + 3 * MINUTE)) == [f"s@{format_ms(T0 + 3 * MINUTE)}"]


def test_a_one_off_reported_skipped_while_paused_does_not_fire_on_a_re_upsert() -> None:
    shard = Shard()
    at = format_ms(T0 + MINUTE)
    shard.send(upsert(spec={"at": at}), at_ms=T0 + 5)
    shard.send(command("schedule.pause"), at_ms=T0 + 10)
    assert shard.send(command("schedule.resume"), at_ms=T0 + MINUTE + SECOND).statuses() == [
        "skipped"
    ]
    # Within its grace the same at again: it was handled (reported skipped).
    out = shard.send(upsert(spec={"at": at}), at_ms=T0 + MINUTE + 2 * SECOND)
    assert _handled(out, shard.run_until(T0 + 10 * MINUTE)) == []


def test_the_instant_let_pass_survives_a_restore() -> None:
    shard = Shard()
    shard.send(upsert(overlap="skip"), at_ms=T0 + 5)
    [run] = shard.advance(T0 + MINUTE).runs
    shard.advance(T0 + 2 * MINUTE)
    assert orjson.loads(shard.changelog[b"s"] or b"")["passed"] == format_ms(T0 + 2 * MINUTE)
    restored, _ = shard.restored()
    restored.report(run, "succeeded", at_ms=T0 + 2 * MINUTE)
    out = restored.send(upsert(overlap="skip"), at_ms=T0 + 2 * MINUTE)
    assert _handled(out, restored.advance(T0 + 2 * MINUTE)) == []


def test_a_trigger_at_the_instant_of_a_skipped_occurrence_is_rejected() -> None:
    shard = Shard()
    shard.send(upsert(overlap="skip"), at_ms=T0 + 5)
    shard.advance(T0 + MINUTE)
    assert shard.advance(T0 + 2 * MINUTE).statuses() == ["skipped"]
    # Redefined in that millisecond so that the instant is no occurrence any more:
    # a trigger now would still reuse the run id that was reported skipped.
    shard.send(upsert(overlap="skip", spec={"cron": "30 * * * *"}), at_ms=T0 + 2 * MINUTE)
    [rejection] = shard.send(command("schedule.trigger"), at_ms=T0 + 2 * MINUTE).rejected
    assert "at this very instant" in rejection.reason
    assert "reported skipped or missed" in rejection.reason


# --- the property: whatever the commands, their lag and failovers, once per run id --

_IDS = ["a", "b"]
_ops = st.one_of(
    st.tuples(
        st.just("upsert"),
        st.sampled_from(_IDS),
        st.sampled_from([{"every": "30s"}, {"every": "1m"}, {"cron": "*/2 * * * *"}, "at"]),
        st.sampled_from(["allow", "skip", "buffer_one", "cancel_other"]),
        st.sampled_from([0, 1, 50, 20 * SECOND, 3 * MINUTE]),  # how long ago produced
        st.sampled_from([0, 60, 3600]),  # misfire.grace_s
    ),
    st.tuples(st.just("delete"), st.sampled_from(_IDS), st.sampled_from([0, 50, 20 * SECOND])),
    st.tuples(st.sampled_from(["pause", "resume", "trigger"]), st.sampled_from(_IDS)),
    st.tuples(st.just("result"), st.integers(0, 9), st.sampled_from(["succeeded", "failed"])),
    st.tuples(st.just("advance"), st.sampled_from([0, 1, 50, SECOND, 29 * SECOND, MINUTE])),
    st.tuples(st.just("restore")),
)


def _step(shard: Shard, op: tuple[Any, ...]) -> tuple[Shard, list[Out]]:
    kind = op[0]
    now_ms = shard.now_ms
    if kind == "upsert":
        _, schedule_id, spec, overlap, lag_ms, grace_s = op
        if spec == "at":  # on the grid of the others, so that instants coincide
            spec = {"at": format_ms((now_ms - lag_ms) // 30_000 * 30_000 + 30 * SECOND)}
        body = upsert(schedule_id, spec=spec, overlap=overlap, misfire={"grace_s": grace_s})
        produced_ms = max(1, now_ms - lag_ms)
        return shard, [shard.send(body, produced_ms=produced_ms)]
    if kind == "delete":
        _, schedule_id, lag_ms = op
        body = command("schedule.delete", schedule_id)
        return shard, [shard.send(body, produced_ms=max(1, now_ms - lag_ms))]
    if kind in ("pause", "resume", "trigger"):
        return shard, [shard.send(command(f"schedule.{kind}", op[1]))]
    if kind == "result":
        flying = sorted(
            run_id
            for schedule_id in _IDS
            if (state := shard.core.schedule(schedule_id)) is not None
            for run_id, run in state.runs.items()
            if run.retry_ms is None
        )
        if not flying:
            return shard, []
        run = shard.last_attempt(flying[op[1] % len(flying)])
        return shard, [shard.report(run, op[2])]
    if kind == "advance":
        return shard, [shard.run_until(now_ms + op[1])]
    restored, out = shard.restored()
    return restored, [out]


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_ops, max_size=60))
def test_no_run_id_is_fired_or_reported_twice(ops: list[tuple[Any, ...]]) -> None:
    shard = Shard(now_ms=T0 + 5)
    fired: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    for op in ops:
        shard, outs = _step(shard, op)
        for out in outs:
            fired.update(r.run_id for r in out.runs if r.attempt == 1 and r.task is None)
            passed.update(r.run_id for r in out.results if r.status in ("skipped", "missed"))
    assert [run_id for run_id, n in fired.items() if n > 1] == []
    assert [run_id for run_id, n in passed.items() if n > 1] == []
    assert sorted(set(fired) & set(passed)) == []
