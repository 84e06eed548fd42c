"""A folded missed/skipped result says which occurrences it stands for in ``covers``;
readers (the simulation's checkers) read that field, and still understand results
written before it existed, whose message alone stated the range."""

from __future__ import annotations

import orjson
import pytest

from tests.kit.shard import DAY, MINUTE, SECOND, T0, Shard, command, upsert
from topics.covers import Covers, covers_from_message
from topics.messages import covers_of, parse_result, result_value
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus


def test_a_long_pause_folds_into_one_skipped_result_whose_covers_names_the_range() -> None:
    shard = Shard()
    shard.send(upsert(spec={"every": "1s"}), at_ms=T0 - 1)
    shard.send(command("schedule.pause"), at_ms=T0 - 1)
    out = shard.send(command("schedule.resume"), at_ms=T0 + DAY)
    singles, summary = out.results[:-1], out.results[-1]
    assert [r.covers for r in singles] == [None] * 100
    # T0 .. T0 + DAY inclusive: 86,401 occurrences, 100 one by one, the rest folded.
    assert summary.covers == Covers(T0 + 100 * SECOND, T0 + DAY, 86_301, exact=True)
    assert summary.scheduled_ms == summary.covers.from_ms


def test_a_takeover_after_a_day_folds_the_missed_backlog_the_same_way() -> None:
    shard = Shard(now_ms=T0 - 1)
    shard.send(upsert(spec={"every": "1s"}), at_ms=T0 - 1)
    owner, _ = shard.restored(now_ms=T0 + DAY)  # a day without an owner
    out = owner.advance(T0 + DAY)
    missed = [r for r in out.results if r.status == RunStatus.MISSED]
    folded = [r.covers for r in missed if r.covers is not None]
    assert len(folded) == 1 and folded[0] is not None
    covers = folded[0]
    singles = sorted(r.scheduled_ms for r in missed if r.covers is None)
    assert covers.exact and covers.from_ms == singles[-1] + SECOND
    assert covers.count == (covers.to_ms - covers.from_ms) // SECOND + 1
    # The oldest are reported one by one from the first occurrence on; the folded
    # result takes over right after them and ends before the grace period.
    assert singles[0] == T0 and len(singles) == 100
    assert covers.to_ms < T0 + DAY - 300 * SECOND


def _value(covers: Covers | None, message: str, status: RunStatus = RunStatus.MISSED) -> bytes:
    return result_value(
        run_id=f"a@{format_ms(T0)}",
        schedule_id="a",
        task=None,
        attempt=1,
        status=status,
        scheduled_ms=T0,
        started_ms=None,
        finished_ms=None,
        worker="shard-0",
        error={"type": "Misfire", "message": message},
        covers=covers,
    )


def test_covers_round_trips_on_the_wire() -> None:
    covers = Covers(T0, T0 + 9 * MINUTE, 10, exact=False)
    value = _value(covers, "10 occurrences ...")
    assert orjson.loads(value)["covers"] == {
        "from": format_ms(T0),
        "to": format_ms(T0 + 9 * MINUTE),
        "count": 10,
        "exact": False,
    }
    result = parse_result(value)
    assert result.covers == covers
    assert covers_of(result) == covers


def test_a_result_written_before_covers_is_read_from_its_message() -> None:
    old = (
        f"at least 4200 occurrences from {format_ms(T0)} to {format_ms(T0 + DAY)} "
        "(the schedule was paused); one result stands for all of them"
    )
    result = parse_result(_value(None, old, RunStatus.SKIPPED))
    assert result.covers is None
    assert covers_of(result) == Covers(T0, T0 + DAY, 4200, exact=False)
    assert covers_from_message("a run of it was still in flight") is None
    plain = parse_result(_value(None, "a run of it was still in flight", RunStatus.SKIPPED))
    assert covers_of(plain) is None


@pytest.mark.parametrize(
    ("covers", "error"),
    [
        ({"from": "x", "to": "2026-10-10T00:00:00.000Z", "count": 2}, "must be instants"),
        ({"to": "2026-10-10T00:00:00.000Z", "count": 2}, "covers.from: missing"),
        (
            {"from": "2026-10-10T00:00:00.000Z", "to": "2026-10-10T00:00:00.000Z", "count": 0},
            "covers.count",
        ),
        (
            {"from": "2026-10-11T00:00:00.000Z", "to": "2026-10-10T00:00:00.000Z", "count": 2},
            "is before from",
        ),
        ([1, 2], "expected an object"),
    ],
)
def test_a_bad_covers_is_refused_naming_the_field(covers: object, error: str) -> None:
    record = orjson.loads(_value(None, "m"))
    record["covers"] = covers
    with pytest.raises(ValueError, match=error):
        parse_result(orjson.dumps(record))
