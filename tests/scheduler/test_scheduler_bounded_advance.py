"""`ShardCore.advance(now_ms, max_fires)`: bounded calls together equal one unbounded call.

The runtime fires a takeover's backlog in bounded turns (one transaction each), so
the union of bounded advances at one instant must be exactly what one unbounded
advance writes: the same runs in the same order, the same final changelog, nothing
early, nothing twice.
"""

from __future__ import annotations

import pytest

from tests.kit.shard import MINUTE, SECOND, T0, Shard, upsert
from topics.messages import parse_run
from topics.names import TopicKind
from topics.records import OutRecord


def _busy_shard() -> Shard:
    """Schedules of several specs and policies, runs in flight, failed attempts retrying."""
    shard = Shard()
    policies = ("run_once", "catch_up", "skip")
    for i in range(120):
        shard.send(
            upsert(
                f"s{i:03d}",
                spec={"every": f"{5 + i % 11}s"},
                misfire={"policy": policies[i % 3], "grace_s": 20 + i % 40},
                timeout_s=30 + i % 50,
                retry={"max_attempts": 3, "initial_s": 1, "jitter": "none"},
            ),
            produced_ms=T0,
        )
    fired = shard.run_until(T0 + 40 * SECOND).runs
    assert fired
    for n, run in enumerate(fired[: len(fired) // 2]):
        shard.report(run, "failed" if n % 2 else "succeeded")
    return shard


def _advance_bounded(shard: Shard, now_ms: int, max_fires: int) -> tuple[list[OutRecord], int]:
    records: list[OutRecord] = []
    calls = 0
    while True:
        due_ms = shard.core.next_due_ms()
        if due_ms is None or due_ms > now_ms:
            break
        calls += 1
        assert calls < 10_000, "bounded advance made no progress"
        records.extend(shard.core.advance(now_ms, max_fires=max_fires))
    return records, calls


def _runs(records: list[OutRecord]) -> list[tuple[bytes | None, bytes | None]]:
    return [(r.key, r.value) for r in records if r.topic is not TopicKind.SCHEDULES]


def _changelog(records: list[OutRecord]) -> dict[bytes | None, bytes | None]:
    last: dict[bytes | None, bytes | None] = {}
    for r in records:
        if r.topic is TopicKind.SCHEDULES:
            last[r.key] = r.value
    return last


@pytest.mark.parametrize("max_fires", [1, 7, 50])
def test_bounded_advances_of_a_takeover_backlog_equal_one_unbounded_advance(
    max_fires: int,
) -> None:
    busy = _busy_shard()
    later_ms = busy.now_ms + 10 * MINUTE
    unbounded, _ = busy.restored(later_ms)
    bounded, _ = busy.restored(later_ms)

    whole = unbounded.core.advance(later_ms)
    parts, calls = _advance_bounded(bounded, later_ms, max_fires)

    fired = [r for r in whole if r.topic is TopicKind.RUNS]
    assert len(fired) > max_fires  # the bound really split the work
    assert calls > 1
    assert _runs(parts) == _runs(whole)
    assert _changelog(parts) == _changelog(whole)
    assert all(parse_run(r.value).scheduled_ms <= later_ms for r in fired if r.value)
    assert bounded.core.next_due_ms() == unbounded.core.next_due_ms()


def test_a_bounded_call_fires_at_most_its_bound_and_keeps_the_rest_due() -> None:
    busy = _busy_shard()
    later_ms = busy.now_ms + 10 * MINUTE
    shard, _ = busy.restored(later_ms)

    first = shard.core.advance(later_ms, max_fires=5)

    assert 0 < sum(r.topic is TopicKind.RUNS for r in first) <= 5
    due_ms = shard.core.next_due_ms()
    assert due_ms is not None and due_ms <= later_ms  # the rest waits for the next call
