"""The history store alone: idempotent upserts, run summaries, queries (no Kafka)."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.history.recorder import to_row
from actors.history.store import (
    DEAD_LETTERED,
    RUNNING,
    AttemptFinished,
    AttemptFired,
    DeadLetterRow,
    HistoryError,
    HistoryStore,
    RejectionRow,
    Row,
)
from topics.covers import Covers
from topics.messages import result_value
from topics.names import TopicKind
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus

T0 = 1_790_000_000_000  # an instant in 2026


def fired(run: str, attempt: int, scheduled_ms: int, fired_ms: int) -> AttemptFired:
    schedule_id = run.split("@")[0]
    return AttemptFired(run, attempt, schedule_id, None, "billing.x", scheduled_ms, fired_ms, None)


def finished(
    run: str, attempt: int, status: str, started_ms: int, finished_ms: int, err: str | None = None
) -> AttemptFinished:
    schedule_id = run.split("@")[0]
    return AttemptFinished(
        run_id=run,
        attempt=attempt,
        schedule_id=schedule_id,
        task=None,
        status=status,
        scheduled_ms=None,
        started_ms=started_ms,
        finished_ms=finished_ms,
        worker="w1",
        error_type="RuntimeError" if err else None,
        error_message=err,
    )


async def open_store(tmp_path: Path) -> HistoryStore:
    return await HistoryStore.open(tmp_path / "h.db", namespace="ns-a")


async def test_a_succeeded_run_has_duration_and_lateness(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    async with store:
        await store.write(
            [fired("a@1", 1, T0, T0 + 7), finished("a@1", 1, "succeeded", T0 + 20, T0 + 520)],
            {("ns-a.runs", 0): 1, ("ns-a.results", 0): 1},
        )
        run = await store.run("a@1")
        assert run is not None
        assert (run.status, run.attempts, run.worker) == ("succeeded", 1, "w1")
        assert run.lateness_ms == 7
        assert run.duration_ms == 500
        assert run.job_name == "billing.x"
        assert await store.offsets() == {("ns-a.runs", 0): 1, ("ns-a.results", 0): 1}


async def test_result_before_run_record_merges_into_one_attempt(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    async with store:
        await store.write([finished("a@1", 1, "succeeded", T0 + 20, T0 + 30)], {})
        first = await store.run("a@1")
        assert first is not None and first.lateness_ms is None
        await store.write([fired("a@1", 1, T0, T0 + 3)], {})
        run = await store.run("a@1")
        assert run is not None
        assert (run.status, run.lateness_ms, run.duration_ms) == ("succeeded", 3, 10)
        assert len(await store.attempts("a@1")) == 1


async def test_fired_without_result_is_running(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    async with store:
        await store.write([fired("a@1", 1, T0, T0)], {})
        run = await store.run("a@1")
        assert run is not None and run.status == RUNNING and run.duration_ms is None


def retried_then_dead() -> list[Row]:
    return [
        fired("f@1", 1, T0, T0 + 1),
        finished("f@1", 1, "failed", T0 + 2, T0 + 3, "boom 1"),
        fired("f@1", 2, T0, T0 + 1000),
        finished("f@1", 2, "failed", T0 + 1001, T0 + 1002, "boom 2"),
        DeadLetterRow(
            0, 0, "f@1", "f", None, "billing.fail", "RuntimeError", "boom 2", 2, T0 + 1010
        ),
    ]


async def test_redelivery_is_idempotent(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    async with store:
        rows = retried_then_dead()
        await store.write(rows, {("ns-a.runs", 0): 2})
        before = (await store.run("f@1"), await store.attempts("f@1"), await store.status_counts())
        # The same records again, in another order and split over batches.
        await store.write(rows[::-1][:2], {("ns-a.runs", 0): 1})
        await store.write(rows, {})
        after = (await store.run("f@1"), await store.attempts("f@1"), await store.status_counts())
        assert before == after
        assert len(await store.dead_letters()) == 1
        # An offset never goes backwards, even when an old batch is redelivered.
        assert await store.offsets() == {("ns-a.runs", 0): 2}


async def test_dead_letter_after_retries(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    async with store:
        await store.write(retried_then_dead(), {})
        run = await store.run("f@1")
        assert run is not None
        assert run.status == DEAD_LETTERED
        assert run.attempts == 2
        assert run.error_message == "boom 2"
        assert run.lateness_ms == 1  # of the first attempt, not of the retry
        counts = await store.status_counts()
        assert counts[DEAD_LETTERED] == 1 and counts["retried"] == 1


async def test_replay_after_dead_letter_is_a_live_run_again(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    async with store:
        await store.write(retried_then_dead(), {})
        await store.write([fired("f@1", 3, T0, T0 + 5000)], {})
        run = await store.run("f@1")
        assert run is not None and run.status == RUNNING and run.attempts == 3
        await store.write([finished("f@1", 3, "succeeded", T0 + 5001, T0 + 5002)], {})
        run = await store.run("f@1")
        assert run is not None and run.status == "succeeded" and run.error_message is None


async def test_latest_per_schedule_lists_failures_first(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    async with store:
        await store.write(
            [
                fired("ok@1", 1, T0, T0),
                finished("ok@1", 1, "failed", T0, T0 + 1, "old failure"),
                fired("ok@2", 1, T0 + 60_000, T0 + 60_000),
                finished("ok@2", 1, "succeeded", T0 + 60_000, T0 + 60_001),
                *retried_then_dead(),
                fired("slow@1", 1, T0, T0),
            ],
            {},
        )
        latest = await store.latest_per_schedule()
        assert [(v.schedule_id, v.status) for v in latest] == [
            ("f", DEAD_LETTERED),
            ("slow", RUNNING),
            ("ok", "succeeded"),
        ]
        ok_runs = await store.runs(schedule_id="ok")
        assert [v.run_id for v in ok_runs] == ["ok@2", "ok@1"]
        assert [v.run_id for v in await store.runs(schedule_id="ok", limit=1)] == ["ok@2"]
        assert [v.run_id for v in await store.runs(status="failed")] == ["ok@1"]
        assert [v.run_id for v in await store.runs(since_ms=T0 + 1)] == ["ok@2"]


async def test_rejections_are_kept_by_position(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    async with store:
        row = RejectionRow(1, 4, b"bad", "spec.cron: 'nope' is not valid", b"{}", "c", 2, 9, T0)
        await store.write([row, row], {})
        assert await store.rejections() == [row]


async def test_clear_forgets_rows_and_offsets(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    async with store:
        await store.write(retried_then_dead(), {("ns-a.dlq", 0): 1})
        await store.clear()
        assert await store.offsets() == {}
        assert await store.latest_per_schedule() == []


async def test_a_database_belongs_to_one_namespace(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    await store.close()
    with pytest.raises(HistoryError, match="ns-a"):
        await HistoryStore.open(tmp_path / "h.db", namespace="ns-b")
    reader = await HistoryStore.open(tmp_path / "h.db", readonly=True)
    async with reader:
        assert reader.namespace == "ns-a"


async def test_readonly_open_of_a_missing_database_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="kafkron recorder"):
        await HistoryStore.open(tmp_path / "nothing.db", readonly=True)


def _folded_result(covers: Covers | None, message: str) -> bytes:
    return result_value(
        run_id=f"a@{format_ms(T0)}",
        schedule_id="a",
        task=None,
        attempt=1,
        status=RunStatus.MISSED,
        scheduled_ms=T0,
        started_ms=None,
        finished_ms=None,
        worker="shard-0",
        error={"type": "Misfire", "message": message},
        covers=covers,
    )


@pytest.mark.parametrize("written_before_covers", [False, True])
async def test_a_folded_result_keeps_the_range_it_stands_for(
    tmp_path: Path, written_before_covers: bool
) -> None:
    to_ms = T0 + 9 * 60_000
    message = f"10 occurrences from {format_ms(T0)} to {format_ms(to_ms)} (late)"
    covers = None if written_before_covers else Covers(T0, to_ms, 10)
    row = to_row(TopicKind.RESULTS, 0, 0, b"a", _folded_result(covers, message), T0)
    assert isinstance(row, AttemptFinished)
    store = await open_store(tmp_path)
    async with store:
        await store.write([row], {("ns-a.results", 0): 1})
        run = await store.run(f"a@{format_ms(T0)}")
        assert run is not None
        assert (run.status, run.covers_to_ms, run.covers_count) == ("missed", to_ms, 10)
        [attempt] = await store.attempts(f"a@{format_ms(T0)}")
        assert (attempt.covers_to_ms, attempt.covers_count) == (to_ms, 10)
        plain = to_row(TopicKind.RESULTS, 0, 1, b"a", _folded_result(None, "late"), T0)
        assert isinstance(plain, AttemptFinished) and plain.covers_count is None
