"""Which restored shards must wait for the calendars (docs/DESIGN.md §5.7): only one
whose schedules name a calendar; the runtime lets every other go live without the
calendars follower (`SchedulerRuntime._tell_calendars`)."""

from __future__ import annotations

from actors.shard import ShardCore
from tests.kit.shard import T0, Shard, upsert
from topics.calendar_commands import calendar_value

NAMING = {"any": [{"cron": "0 9 * * *"}], "exclude": ["hol"]}
INLINE = {
    "any": [{"cron": "0 9 * * *"}],
    "exclude": [{"calendar": {"dates": ["2026-12-25"]}}],
}


def _restoring(shard: Shard) -> ShardCore:
    """A new owner's core, fed the changelog, before `finish_restore`."""
    core = ShardCore(partition=0, partitions=1, now_ms=shard.now_ms)
    for key, value in shard.changelog.items():
        core.restore(key, value)
    return core


def test_a_shard_whose_schedules_name_no_calendar_need_not_wait() -> None:
    shard = Shard()
    shard.send(upsert("plain"), at_ms=T0)
    shard.send(upsert("inline", spec=INLINE), at_ms=T0)  # days inline: no name
    shard.run_until(T0 + 120_000)  # fired: their records name their definitions by key
    assert not _restoring(shard).restored_names_calendars()
    assert not ShardCore(partition=0, partitions=1, now_ms=T0).restored_names_calendars()


def test_a_shard_with_one_schedule_naming_a_calendar_waits() -> None:
    shard = Shard()
    shard.learn_calendar("hol", calendar_value({"dates": ["2026-10-12"]}), at_ms=T0)
    shard.send(upsert("plain"), at_ms=T0)
    shard.send(upsert("named", spec=NAMING), at_ms=T0)
    shard.run_until(T0 + 120_000)
    assert _restoring(shard).restored_names_calendars()
    # Deleted: the shard has nothing naming a calendar any more.
    shard.send({"v": 1, "type": "schedule.delete", "id": "named"}, at_ms=T0 + 130_000)
    assert not _restoring(shard).restored_names_calendars()
