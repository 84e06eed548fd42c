"""The shard's backfill part (actors/shard/backfill.py): the command, the cursor in the
changelog, max_parallel, the live schedule's own timing, cancel, restore mid-backfill."""

from __future__ import annotations

import random

import pytest

from tests.kit.shard import MINUTE, SECOND, T0, Shard, command, upsert
from topics.backfill_commands import RANGES_PER_COMMAND, ScheduleBackfill
from topics.commands import Rejection, decode_command
from topics.messages import Run, run_id_for
from topics.timefmt import format_ms


def ran(minutes: int = 10, **fields: object) -> Shard:
    """A schedule every minute from T0+1m that ran (and succeeded) ``minutes`` times."""
    shard = Shard()
    shard.send(upsert(spec={"every": "60s"}, timeout_s=600, **fields), at_ms=T0 + 5)
    for m in range(1, minutes + 1):
        for run in shard.advance(T0 + m * MINUTE).runs:
            shard.report(run, "succeeded", at_ms=T0 + m * MINUTE + SECOND)
    return shard


def backfill(
    ranges: list[tuple[int, int, int]], backfill_id: str = "b1", **fields: object
) -> dict[str, object]:
    return command(
        "schedule.backfill",
        backfill_id=backfill_id,
        ranges=[[format_ms(a), format_ms(b), n] for a, b, n in ranges],
        **fields,
    )


def at(m: int) -> int:
    return T0 + m * MINUTE


def test_the_command_is_validated_like_every_command() -> None:
    good = backfill([(at(1), at(3), 1)], max_parallel=4)
    import orjson

    decoded = decode_command(b"s", orjson.dumps(good), T0)
    assert decoded == ScheduleBackfill("s", "b1", ((at(1), at(3), 1),), 4)
    for body, field in (
        (backfill([(at(3), at(1), 1)]), "ranges[0]"),
        (backfill([(at(1), at(3), 1), (at(3), at(4), 1)]), "ranges[1]"),
        (backfill([(at(1), at(1), 0)]), "ranges[0][2]"),
        (backfill([(at(1), at(1), 1)], max_parallel=0), "max_parallel"),
        (backfill([(at(1), at(1), 1)], max_paralel=3), "max_paralel"),
        (backfill([(at(i), at(i), 1) for i in range(RANGES_PER_COMMAND + 1)]), "ranges"),
        (backfill([], backfill_id="x"), "ranges"),
        (backfill([(at(1), at(1), 1)], backfill_id="a/b"), "backfill_id"),
        (command("schedule.backfill_cancel", backfill_id="b1", running="yes"), "running"),
    ):
        rejection = decode_command(b"s", orjson.dumps(body), T0)
        assert isinstance(rejection, Rejection), body
        assert rejection.reason.startswith(field), rejection.reason


def test_reruns_fire_at_their_next_attempt_at_most_max_parallel_at_once() -> None:
    shard = ran()
    out = shard.send(backfill([(at(2), at(6), 2)], max_parallel=2), at_ms=at(10) + 30 * SECOND)
    assert [(r.run_id, r.attempt) for r in out.runs] == [
        (run_id_for("s", at(2)), 2),
        (run_id_for("s", at(3)), 2),
    ]
    fired = list(out.runs)
    while True:
        in_flight = [r for r in shard.in_flight() if r.scheduled_ms < at(10)]
        assert len(in_flight) <= 2
        if not in_flight:
            break
        more = shard.report(in_flight[0], "succeeded")
        fired += more.runs
    assert [r.scheduled_ms for r in fired] == [at(m) for m in range(2, 7)]
    assert {r.attempt for r in fired} == {2}
    doc = shard.state_doc()["backfill"]
    assert doc["fired"] == 5 and "ranges" not in doc and "running" not in doc and "ended" in doc


def test_a_backfill_s_runs_leave_the_live_schedule_its_own_timing() -> None:
    shard = ran()  # overlap skip: a live run in flight would skip the next occurrence
    shard.send(backfill([(at(1), at(5), 2)], max_parallel=3), at_ms=at(10) + SECOND)
    out = shard.advance(at(11))
    assert [r.scheduled_ms for r in out.runs] == [at(11)]  # fired, not skipped
    assert out.results == []


def test_the_cursor_survives_any_restore_neither_repeating_nor_skipping() -> None:
    for seed in range(20):
        rng = random.Random(seed)
        shard = ran(30)
        shard.send(
            backfill([(at(1), at(12), 2), (at(15), at(27), 2)], max_parallel=3),
            at_ms=at(30) + SECOND,
        )
        fired: list[Run] = [r for r in shard.written_runs() if r.attempt == 2]
        for _ in range(200):
            if rng.random() < 0.3:
                shard, _ = shard.restored()
            in_flight = [r for r in shard.in_flight() if r.scheduled_ms < at(30)]
            assert len(in_flight) <= 3
            if not in_flight:
                break
            run = rng.choice(in_flight)
            shard.report(run, "succeeded")
            shard.advance(shard.now_ms + SECOND)
            fired = [r for r in shard.written_runs() if r.attempt == 2]
        ids = [r.run_id for r in fired]
        assert len(ids) == len(set(ids)), f"seed {seed}: an instant fired twice"
        assert sorted(r.scheduled_ms for r in fired) == [
            at(m) for m in [*range(1, 13), *range(15, 28)]
        ], f"seed {seed}"


def test_the_live_schedule_s_future_is_refused_and_so_is_a_non_occurrence() -> None:
    shard = ran()
    [rejected] = shard.send(backfill([(at(9), at(11), 1)]), at_ms=at(10) + SECOND).rejected
    assert rejected.reason.startswith("ranges") and "live schedule" in rejected.reason
    [rejected] = shard.send(backfill([(at(2) + 1, at(3), 1)]), at_ms=at(10) + SECOND).rejected
    assert "not an occurrence" in rejected.reason
    [rejected] = shard.send(
        backfill([(at(2), at(3), 1)], schedule_id="nobody"), at_ms=at(10)
    ).rejected
    assert rejected.reason.startswith("id")


def test_one_backfill_at_a_time_and_the_same_id_appends() -> None:
    shard = ran()
    shard.send(backfill([(at(1), at(2), 2)], max_parallel=1), at_ms=at(10) + SECOND)
    [rejected] = shard.send(
        backfill([(at(5), at(5), 2)], backfill_id="b2"), at_ms=at(10) + SECOND
    ).rejected
    assert rejected.reason.startswith("backfill_id")
    out = shard.send(backfill([(at(4), at(5), 2)], max_parallel=1), at_ms=at(10) + SECOND)
    assert out.rejected == []
    assert shard.state_doc()["backfill"]["ranges"] == [
        [format_ms(at(2)), format_ms(at(2)), 2],
        [format_ms(at(4)), format_ms(at(5)), 2],
    ]


def test_an_instant_the_live_schedule_has_in_flight_is_let_pass() -> None:
    shard = Shard()
    shard.send(upsert(spec={"every": "60s"}, timeout_s=600), at_ms=T0 + 5)
    for m in range(1, 4):
        shard.advance(at(m))  # at(1) runs on; overlap skip reports at(2), at(3) skipped
    out = shard.send(
        backfill([(at(1), at(1), 2), (at(2), at(3), 2)], max_parallel=5), at_ms=at(3) + SECOND
    )
    assert [(r.scheduled_ms, r.attempt) for r in out.runs] == [(at(2), 2), (at(3), 2)]
    assert shard.state_doc()["backfill"]["passed"] == 1  # at(1): the live run's
    assert len(shard.in_flight()) == 3


def test_a_paused_schedule_s_backfill_waits_for_the_resume() -> None:
    shard = ran()
    shard.send(command("schedule.pause"), at_ms=at(10) + SECOND)
    out = shard.send(backfill([(at(1), at(3), 2)]), at_ms=at(10) + 2 * SECOND)
    assert out.runs == []
    out = shard.send(command("schedule.resume"), at_ms=at(10) + 3 * SECOND)
    assert [r.scheduled_ms for r in out.runs] == [at(1), at(2)]


def test_cancel_stops_what_has_not_started_and_with_running_what_has() -> None:
    shard = ran()
    shard.send(backfill([(at(1), at(8), 2)], max_parallel=2), at_ms=at(10) + SECOND)
    out = shard.send(
        command("schedule.backfill_cancel", backfill_id="b1"), at_ms=at(10) + 2 * SECOND
    )
    assert out.runs == [] and out.cancels == []
    for run in [r for r in shard.in_flight() if r.scheduled_ms < at(10)]:
        assert shard.report(run, "succeeded").runs == []  # nothing more starts
    assert "ended" in shard.state_doc()["backfill"]

    shard = ran()
    shard.send(backfill([(at(1), at(8), 2)], max_parallel=2), at_ms=at(10) + SECOND)
    out = shard.send(
        command("schedule.backfill_cancel", backfill_id="b1", running=True, reason="wrong input"),
        at_ms=at(10) + 2 * SECOND,
    )
    assert sorted(c.run_id for c in out.cancels) == [run_id_for("s", at(1)), run_id_for("s", at(2))]
    assert {c.reason for c in out.cancels} == {"wrong input"}
    [rejected] = shard.send(
        command("schedule.backfill_cancel", backfill_id="zz"), at_ms=at(10) + 3 * SECOND
    ).rejected
    assert rejected.reason.startswith("backfill_id")


@pytest.mark.parametrize("restore", [False, True])
def test_a_never_fired_instant_is_attempt_one(restore: bool) -> None:
    shard = ran()
    out = shard.send(backfill([(at(3), at(3), 1)]), at_ms=at(10) + SECOND)
    [run] = out.runs
    assert (run.run_id, run.attempt) == (run_id_for("s", at(3)), 1)
    if restore:
        shard, _ = shard.restored()
    shard.report(run, "succeeded")
    assert "ended" in shard.state_doc()["backfill"]


def test_the_core_counts_backfills_for_metrics() -> None:
    shard = ran()
    shard.send(backfill([(at(1), at(5), 2)], max_parallel=2), at_ms=at(10) + SECOND)
    stats = shard.core.stats
    assert (stats["backfills_going"], stats["backfill_in_flight"]) == (1, 2)
    assert (stats["backfill_fired_total"], stats["backfill_ranges_total"]) == (2, 1)


def test_a_refused_transaction_rebuilds_the_shard_and_the_backfill_neither_repeats_nor_skips() -> (
    None
):
    """A transaction refused mid-backfill (a batch refused, a broker gone): nothing of it
    is visible, the runtime rebuilds the shard from the changelog as it was before, and
    the record it consumed is read again. What the topics hold is each planned
    occurrence once."""
    for seed in range(20):
        rng = random.Random(seed)
        shard = ran(20)
        shard.send(backfill([(at(1), at(15), 2)], max_parallel=3), at_ms=at(20) + SECOND)
        for _ in range(300):
            in_flight = [r for r in shard.in_flight() if r.scheduled_ms < at(20)]
            if not in_flight:
                break
            run = rng.choice(in_flight)
            changelog, written = dict(shard.changelog), list(shard.written)
            now_ms = shard.now_ms + SECOND
            shard.report(run, "succeeded", at_ms=now_ms)
            if rng.random() < 0.4:  # the transaction is refused: its records never were
                shard.changelog, shard.written = changelog, written
                shard, _ = shard.restored(now_ms)
                shard.report(run, "succeeded", at_ms=now_ms)  # consumed again
        fired = [r for r in shard.written_runs() if r.attempt == 2]
        assert sorted(r.scheduled_ms for r in fired) == [at(m) for m in range(1, 16)], seed
        assert "ended" in shard.state_doc()["backfill"], seed


def test_occurrences_a_re_upsert_removed_are_let_pass() -> None:
    shard = ran()
    shard.send(backfill([(at(1), at(6), 2)], max_parallel=1), at_ms=at(10) + SECOND)
    # Every two minutes from now on: the odd minutes are no occurrences any more.
    shard.send(upsert(spec={"every": "120s"}, timeout_s=600), at_ms=at(10) + 2 * SECOND)
    fired = [r for r in shard.written_runs() if r.attempt == 2]
    while True:
        in_flight = [r for r in shard.in_flight() if r.scheduled_ms < at(10) and r.attempt == 2]
        if not in_flight:
            break
        shard.report(in_flight[0], "succeeded")
        fired = [r for r in shard.written_runs() if r.attempt == 2]
    # at(1) fired before the change; the cursor then walks the new spec's occurrences.
    assert [r.scheduled_ms for r in fired] == [at(1), at(2), at(4), at(6)]
    assert "ended" in shard.state_doc()["backfill"]


def test_a_cursor_left_on_an_instant_a_re_upsert_removed_lets_it_pass() -> None:
    shard = ran()
    shard.send(backfill([(at(3), at(5), 2)], max_parallel=1), at_ms=at(10) + SECOND)
    # The cursor is on at(4) (at(3) in flight); every 2 min from the epoch keeps at(4) but
    # every 3 min does not: at(4) is let pass, at(6) is past the range.
    shard.send(upsert(spec={"every": "180s"}, timeout_s=600), at_ms=at(10) + 2 * SECOND)
    [run] = [r for r in shard.in_flight() if r.attempt == 2]
    shard.report(run, "succeeded")
    fired = [r.scheduled_ms for r in shard.written_runs() if r.attempt == 2]
    doc = shard.state_doc()["backfill"]
    assert fired == [at(3)] and doc["passed"] == 1 and "ended" in doc, (fired, doc)
