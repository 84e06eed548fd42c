"""`kafkron ls`: a schedule's state column and its --json fields (pause, completed, max_runs)."""

from __future__ import annotations

from actors.cli.ls_cmd import _table_row
from actors.views.schedule_status import when_text
from actors.views.schedules import schedule_json
from tests.kit.shard import MINUTE, SECOND, T0, Shard, command, upsert
from tests.kit.views import state_of
from topics.timefmt import format_ms

UNTIL = T0 + 14 * 60 * MINUTE


def test_a_paused_schedule_says_until_when_by_whom_and_why() -> None:
    shard = Shard()
    shard.send(upsert("nightly"), at_ms=T0 - 1)
    pause = command(
        "schedule.pause", "nightly", note="db migration", until=format_ms(UNTIL), by="ops"
    )
    shard.send(pause, at_ms=T0 + 1)
    row = schedule_json(state_of(shard, "nightly"))
    assert row["state"] == "paused until 2026-10-10 14:00 UTC by ops: db migration"
    assert row["paused"] is True and row["completed"] is None and row["max_runs"] is None
    assert row["pause"] == {
        "at": format_ms(T0 + 1), "note": "db migration", "until": format_ms(UNTIL), "by": "ops"
    }  # fmt: skip
    assert _table_row(row)[5] == row["state"]


def test_a_plain_pause_and_one_waiting_for_the_run_in_flight() -> None:
    shard = Shard()
    shard.send(upsert("plain"), at_ms=T0 - 1)
    shard.send(command("schedule.pause", "plain"), at_ms=T0 - 1)
    assert schedule_json(state_of(shard, "plain"))["state"] == "paused"
    shard.send(upsert("busy", overlap="allow"), at_ms=T0 - 1)
    shard.run_until(T0)  # busy's first run is in flight
    later = command("schedule.pause", "busy", after_current=True, by="ops", note="deploy")
    shard.send(later, at_ms=T0 + SECOND)
    row = schedule_json(state_of(shard, "busy"))
    assert row["state"] == "pausing after the current run, then paused by ops: deploy"
    # Paused at once (nothing new starts); said to be pausing until the run ends.
    assert row["paused"] is True and row["pause"]["pending"] is True


def test_max_runs_counts_then_completes_and_an_end_completes() -> None:
    shard = Shard()
    shard.send(upsert("welcome", max_runs=3, overlap="allow"), at_ms=T0 - 1)
    shard.run_until(T0)
    row = schedule_json(state_of(shard, "welcome"))
    assert (row["state"], row["fired_count"], row["max_runs"]) == ("active (runs 1/3)", 1, 3)
    shard.run_until(T0 + 5 * MINUTE)
    row = schedule_json(state_of(shard, "welcome"))
    assert row["state"] == "completed (max_runs 3/3)" and row["completed"] == "max_runs"
    assert row["next_fire"] is None and _table_row(row)[5] == "completed (max_runs 3/3)"
    shard.send(upsert("once", spec={"at": format_ms(T0 + 6 * MINUTE)}), at_ms=T0 + 5 * MINUTE)
    shard.run_until(T0 + 7 * MINUTE)
    assert schedule_json(state_of(shard, "once"))["state"] == "completed (end)"
    shard.send(upsert("plain"), at_ms=T0 + 7 * MINUTE)
    assert schedule_json(state_of(shard, "plain"))["state"] == "active"


def test_instants_drop_zero_seconds_and_milliseconds() -> None:
    assert when_text(UNTIL) == "2026-10-10 14:00 UTC"
    assert when_text(UNTIL + 5 * SECOND) == "2026-10-10 14:00:05 UTC"
    assert when_text(UNTIL + 5 * SECOND + 250) == "2026-10-10 14:00:05.250 UTC"
