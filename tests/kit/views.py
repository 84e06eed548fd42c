"""A schedule as `kafkron ls` and the console read it, from a test shard's changelog."""

from __future__ import annotations

from actors.shard.state import ScheduleState, decode_schedule
from actors.views.schedules import latest_states
from actors.views.tail import Record
from tests.kit.shard import Shard


def state_of(shard: Shard, schedule_id: str) -> ScheduleState:
    """The changelog made whole (`latest_states`: version-2 records with their
    definitions), decoded by the shard's own decoder, as the views do."""
    records = [Record(0, i, 0, k, v) for i, (k, v) in enumerate(shard.changelog.items())]
    return decode_schedule(latest_states(records)[schedule_id])
