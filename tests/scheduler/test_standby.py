"""Warm standbys: a core fed the changelog as it grows is the core a takeover restores.

`actors.scheduler.standby` keeps the shards a process may take over restored
ahead of time. What makes that sound is a property of the pure core, checked
here against the shard helpers (records only, no broker): feeding the changelog
in pieces, interleaved with the owner's life, and finishing later gives a shard
that writes exactly what a fresh restore at the same instant writes. The
decisions (which shards to keep warm, what a takeover does) are the lifecycle
machine's (tests/scheduler/test_scheduler_standby_lifecycle.py).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.scheduler.warm import WarmShard
from actors.shard import ShardCore
from actors.shard.definition import clear_caches
from tests.kit.shard import HOUR, MINUTE, SECOND, T0, Shard, command, upsert
from topics.names import TopicKind


def _core(partition: int, now_ms: int) -> ShardCore:
    return ShardCore(partition=partition, partitions=1, now_ms=now_ms)


steps = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.sampled_from("abc"), st.sampled_from(["30s", "1m", "7m"])),
        st.tuples(st.just("delete"), st.sampled_from("abc"), st.none()),
        st.tuples(st.just("pause"), st.sampled_from("abc"), st.none()),
        st.tuples(st.just("succeed"), st.integers(0, 5), st.none()),
        st.tuples(st.just("advance"), st.sampled_from([SECOND, MINUTE, 10 * MINUTE]), st.none()),
        st.tuples(st.just("tail"), st.none(), st.none()),
    ),
    max_size=30,
)


def _step(shard: Shard, step: tuple[Any, Any, Any]) -> None:
    kind, arg, extra = step
    if kind == "upsert":
        shard.send(upsert(arg, spec={"every": extra}, overlap="allow", timeout_s=600))
    elif kind in ("delete", "pause"):
        if shard.core.schedule(arg) is not None:
            shard.send(command(f"schedule.{kind}", arg))
    elif kind == "succeed":
        runs = sorted(
            (run_id, state_id)
            for state_id in "abc"
            if (state := shard.core.schedule(state_id)) is not None
            for run_id in state.runs
        )
        if runs:
            shard.report(shard.last_attempt(runs[arg % len(runs)][0]), "succeeded")
    elif kind == "advance":
        shard.run_until(shard.now_ms + arg)


@settings(max_examples=25, deadline=None)
@given(steps=steps)
def test_a_standby_fed_as_the_changelog_grows_restores_what_a_fresh_restore_does(
    steps: list[tuple[Any, Any, Any]],
) -> None:
    owner = Shard(now_ms=T0 + 5)
    warm = WarmShard(0, _core(0, owner.now_ms))
    fed = 0

    def tail() -> None:  # what the tailer does: the log's new records, in order
        nonlocal fed
        log = [r for r in owner.written if r.topic is TopicKind.SCHEDULES]
        for offset in range(fed, len(log)):
            warm.feed(offset, log[offset].key, log[offset].value)
        fed = len(log)
        warm.reached(fed, owner.now_ms)

    for step in steps:
        if step[0] == "tail":
            tail()
        else:
            _step(owner, step)
    tail()  # the catch-up after the fence
    at_ms = owner.now_ms + SECOND
    clear_caches()
    fresh, fresh_out = owner.restored(at_ms)
    got = warm.core.finish_restore(at_ms)
    assert got == fresh_out.records
    standby = Shard(now_ms=at_ms, core=warm.core)
    for later in (at_ms + MINUTE, at_ms + HOUR):
        expected = sorted((r.topic.value, r.key, r.value) for r in fresh.run_until(later).records)
        actual = sorted((r.topic.value, r.key, r.value) for r in standby.run_until(later).records)
        assert actual == expected


def test_a_warm_shard_ignores_records_it_already_has() -> None:
    warm = WarmShard(0, _core(0, T0))
    warm.feed(0, b"a", None)
    warm.feed(1, None, None)  # an unkeyed record moves the position only
    warm.feed(0, b"a", b"not read again")
    assert warm.position == 2 and warm.core.finish_restore(T0) == []
