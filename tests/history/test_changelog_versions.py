"""The definitions over time the recorder keeps from the changelog (pure, no Kafka).

Records come from a real shard core (`tests.kit.shard`), so the tracker reads the
very bytes a shard writes: version-1 records with their definition inline, version-2
fire records naming it by key, the definitions' own ``@def/`` records, tombstones.
"""

from __future__ import annotations

from pathlib import Path

from actors.audit.versions import ChangelogTracker, DefinitionRow, VersionRow
from actors.history.store import HistoryStore
from actors.shard.state import is_definition_key
from tests.kit.shard import MINUTE, T0, Shard, command, upsert
from topics.names import TopicKind
from topics.records import OutRecord


def changelog(records: list[OutRecord]) -> list[tuple[bytes | None, bytes | None]]:
    return [(r.key, r.value) for r in records if r.topic == TopicKind.SCHEDULES]


def life() -> list[tuple[int, bytes | None, bytes | None]]:
    """(instant, key, value) of a schedule's changelog: created, fired, redefined,
    paused, resumed, deleted."""
    shard = Shard()
    out: list[tuple[int, bytes | None, bytes | None]] = []

    def take(records: list[OutRecord]) -> None:
        out.extend((shard.now_ms, k, v) for k, v in changelog(records))

    take(shard.send(upsert("s"), at_ms=T0, produced_ms=T0).records)
    take(shard.run_until(T0 + 3 * MINUTE).records)
    take(shard.send(upsert("s", spec={"every": "120s"}), at_ms=T0 + 3 * MINUTE + 1).records)
    take(shard.run_until(T0 + 7 * MINUTE).records)
    take(shard.send(command("schedule.pause", "s"), at_ms=T0 + 7 * MINUTE + 1).records)
    take(shard.send(command("schedule.resume", "s"), at_ms=T0 + 8 * MINUTE + 1).records)
    take(shard.run_until(T0 + 10 * MINUTE).records)
    take(shard.send(command("schedule.delete", "s"), at_ms=T0 + 10 * MINUTE + 1).records)
    return out


def feed(
    tracker: ChangelogTracker, records: list[tuple[int, bytes | None, bytes | None]]
) -> list[DefinitionRow | VersionRow]:
    return tracker.feed_all((0, i, k, v, at) for i, (at, k, v) in enumerate(records))


def test_one_version_per_change_that_decides_what_is_owed() -> None:
    records = life()
    rows = feed(ChangelogTracker(), records)
    versions = [r for r in rows if isinstance(r, VersionRow)]
    assert [(v.effective_ms - T0, v.paused, v.def_key is None) for v in versions] == [
        (0, False, False),
        (3 * MINUTE + 1, False, False),
        (7 * MINUTE + 1, True, False),
        (8 * MINUTE + 1, False, False),
        (10 * MINUTE + 1, False, True),
    ]
    assert versions[0].created and not any(v.created for v in versions[1:])
    assert versions[0].def_key != versions[1].def_key == versions[2].def_key
    # Fires wrote version-2 records naming the definition by the key a version-1
    # record's inline definition gets here: no version row for any of them.
    assert sum(1 for at, k, v in records if v is not None and v.startswith(b'{"v":2,"id"')) > 3
    keys = {r.def_key for r in rows if isinstance(r, DefinitionRow)}
    assert {v.def_key for v in versions if v.def_key} <= keys
    assert any(is_definition_key(k or b"") for _, k, _ in records)


def test_a_record_read_again_makes_no_row_twice() -> None:
    records = life()
    tracker = ChangelogTracker()
    first = feed(tracker, records)
    again = feed(tracker, records)
    assert first and not [r for r in again if isinstance(r, VersionRow)]


async def test_the_recorder_restarts_from_the_heads_the_database_keeps(tmp_path: Path) -> None:
    records = life()
    half = len(records) // 2
    path = tmp_path / "h.db"
    async with await HistoryStore.open(path, namespace="ns") as store:
        await store.write(feed(ChangelogTracker(), records[:half]), {})
        restarted = ChangelogTracker(await store.version_heads())
        # The restarted tracker reads everything again: only the second half's changes.
        await store.write(feed(restarted, records), {})
    async with await HistoryStore.open(path, namespace="ns") as store:
        whole = await store.version_heads()
    async with await HistoryStore.open(tmp_path / "o.db", namespace="ns") as other:
        await other.write(feed(ChangelogTracker(), records), {})
        assert await other.version_heads() == whole


async def test_a_rebuild_keeps_the_versions_of_its_own_namespace_only(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    async with await HistoryStore.open(path, namespace="ns") as store:
        await store.write(feed(ChangelogTracker(), life()), {})
    async with await HistoryStore.open(path, namespace="ns", reset=True) as store:
        assert await store.version_heads()  # the compacted changelog could not give them back
    async with await HistoryStore.open(path, namespace="other", reset=True) as store:
        assert await store.version_heads() == {}


def test_a_deletion_of_an_unknown_schedule_and_floors_make_nothing() -> None:
    tracker = ChangelogTracker()
    assert tracker.feed(0, 0, b"never-seen", None, T0) == []
    assert tracker.feed(0, 1, b"@gone/x", b"{}", T0) == []
    assert tracker.feed(0, 2, b"@def/" + b"0" * 32, None, T0) == []
