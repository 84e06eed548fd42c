"""A changelog written in the first record format (v1) still restores, exactly.

`tests/fixtures/changelog_v1.json` was written by the v1 code: a shard with plain,
cron-in-a-zone, Jenkins-H, paused, retrying, buffering, dead-lettered, deleted,
one-off and DAG schedules, its changelog as a compacted topic holds it, and what
a shard restored from that changelog wrote next (runs, results, DLQ records and
rejections; not the changelog itself, whose format may move on). A shard of
today restored from the same records must write the same, call by call.
"""

from __future__ import annotations

import json
from typing import Any

from actors.shard import ShardCore
from actors.shard.definition import clear_caches
from actors.shard.state import decode_schedule
from tests.kit.paths import FIXTURES
from tests.kit.shard import Out, Shard
from topics.names import TopicKind

FIXTURE = FIXTURES / "changelog_v1.json"


def _load() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return doc


def _comparable(out: Out) -> list[list[Any]]:
    return sorted(
        [
            r.topic.value,
            (r.key or b"").decode(),
            None if r.value is None else r.value.decode(),
            r.partition,
        ]
        for r in out.records
        if r.topic != TopicKind.SCHEDULES
    )


def test_a_v1_changelog_restores_to_a_shard_that_writes_what_v1_wrote_next() -> None:
    doc = _load()
    clear_caches()
    at_ms = doc["restored_at_ms"]
    core = ShardCore(partition=0, partitions=1, now_ms=at_ms)
    for key, value in doc["changelog"]:
        core.restore(key.encode(), None if value is None else value.encode())
    shard = Shard(now_ms=at_ms, core=core)
    outputs = [Out(core.finish_restore(at_ms))]
    for kind, to_ms in doc["steps"][1:]:
        assert kind == "advance"
        outputs.append(shard.run_until(to_ms))
    assert core.stats["errors_total"] == 0
    assert [_comparable(out) for out in outputs] == doc["expected"]
    # Something happened in every kind of state, or the comparison proves little.
    written = [record for out in outputs[1:] for record in out.records]
    assert {r.topic for r in written} >= {TopicKind.RUNS, TopicKind.RESULTS, TopicKind.SCHEDULES}


def test_every_v1_record_decodes_with_its_fields() -> None:
    doc = _load()
    states = {
        key: decode_schedule(value.encode()) for key, value in doc["changelog"] if value is not None
    }
    assert set(states) == {
        "plain",
        'café "quoted"',
        "jenkins",
        "paused",
        "retrying",
        "buffered",
        "dead",
        "dag",
        "at-once",
    }
    assert states["paused"].paused
    assert states["retrying"].runs and all(
        run.retry_ms is not None for run in states["retrying"].runs.values()
    )
    assert states["buffered"].buffered
    assert states["dead"].dead
    assert states["dag"].dag is not None
    assert states['café "quoted"'].definition.compiled is not None
    assert dict(doc["changelog"])["gone"] is None  # a tombstone
