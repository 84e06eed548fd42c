"""The console's schedule page shows the schedule's backfill (docs/DESIGN.md §6.9)."""

from __future__ import annotations

from actors.views.backfill_status import backfill_json
from actors.web import data
from actors.web.app import _env
from tests.kit.shard import MINUTE, SECOND, T0, Shard, command, upsert
from tests.kit.views import state_of
from topics.timefmt import format_ms


def test_the_schedule_page_shows_done_running_left_and_an_eta() -> None:
    shard = Shard()
    shard.send(upsert("s", spec={"every": "60s"}, timeout_s=600), at_ms=T0 + 5)
    for m in range(1, 11):
        for run in shard.advance(T0 + m * MINUTE).runs:
            shard.report(run, "succeeded", at_ms=T0 + m * MINUTE + SECOND)
    ranges = [[format_ms(T0 + MINUTE), format_ms(T0 + 6 * MINUTE), 2]]
    body = command("schedule.backfill", backfill_id="fix", ranges=ranges, max_parallel=2)
    shard.send(body, at_ms=T0 + 10 * MINUTE + SECOND)
    [first, _] = [r for r in shard.in_flight() if r.attempt == 2]
    shard.report(first, "succeeded", at_ms=T0 + 10 * MINUTE + 11 * SECOND)
    state = state_of(shard, "s")
    row = backfill_json(state, T0 + 10 * MINUTE + 11 * SECOND)
    assert (row["status"], row["done"], row["running"], row["left"]) == ("running", 1, 2, 3)
    assert row["eta_s"] == 30.0  # one done in 10 s: three left
    page = _env().get_template("schedule.html").render(
        ns="t", sent=None, failed=None, here="/", can_act=False, token_mode=False,
        history_error=None, schedule_id="s", row=data.row_of(state), definition="{}",
        dst=None, runs=[], charts=[], backfill=row,
    )  # fmt: skip
    assert '<h2>Backfill <span class="mono">fix</span></h2>' in page
    assert '<td class="state">running</td><td>1</td><td>2</td><td>3</td>' in page
