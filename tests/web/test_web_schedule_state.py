"""The console's schedule list and page say what a pause said and why a schedule is completed."""

from __future__ import annotations

from actors.shard.state import ScheduleState
from actors.web import data
from actors.web.app import _env
from tests.kit.shard import MINUTE, T0, Shard, command, upsert
from tests.kit.views import state_of as _state
from topics.timefmt import format_ms

UNTIL = T0 + 14 * 60 * MINUTE  # 2026-10-10 14:00 UTC
PAUSED = f"paused until {format_ms(UNTIL)[:10]} 14:00 UTC by ops: db migration"


def paused_and_completed() -> tuple[ScheduleState, ScheduleState]:
    shard = Shard()
    shard.send(upsert("nightly", overlap="allow"), at_ms=T0 - 1)
    pause = command(
        "schedule.pause", "nightly", note="db migration", until=format_ms(UNTIL), by="ops"
    )
    shard.send(pause, at_ms=T0 + 1)
    shard.send(upsert("welcome", max_runs=3, overlap="allow"), at_ms=T0 - 1)
    shard.run_until(T0 + 10 * MINUTE)
    return _state(shard, "nightly"), _state(shard, "welcome")


def _page(template: str, **more: object) -> str:
    page = _env().get_template(template)
    common = {"ns": "t", "sent": None, "failed": None, "here": "/", "can_act": False}
    return page.render(**common, token_mode=False, history_error=None, **more)


def test_the_list_shows_the_pause_note_author_and_end_and_the_completion() -> None:
    paused, completed = paused_and_completed()
    rows = [data.row_of(paused), data.row_of(completed)]
    assert [r.state for r in rows] == [PAUSED, "completed (max_runs 3/3)"]
    page = _page("schedules.html", rows=rows, latest={}, topic="t.schedules")
    assert "<th>state</th>" in page
    assert f'<span class="status paused">{PAUSED}</span>' in page
    assert "completed (max_runs 3/3)" in page


def test_the_schedule_page_shows_its_state() -> None:
    paused, completed = paused_and_completed()
    for state, text in ((paused, PAUSED), (completed, "completed (max_runs 3/3)")):
        page = _page(
            "schedule.html", schedule_id=state.id, row=data.row_of(state), definition="{}",
            dst=None, runs=[], charts=[],
        )  # fmt: skip
        assert f'<td class="state">{text}</td>' in page


def test_a_schedule_past_its_end_and_one_counting_say_so() -> None:
    shard = Shard()
    shard.send(upsert("once", spec={"at": format_ms(T0 + MINUTE)}), at_ms=T0)
    shard.send(upsert("counting", max_runs=3, overlap="allow"), at_ms=T0 - 1)
    shard.run_until(T0 + MINUTE)
    assert data.row_of(_state(shard, "once")).state == "completed (end)"
    assert data.row_of(_state(shard, "counting")).state == "active (runs 2/3)"
