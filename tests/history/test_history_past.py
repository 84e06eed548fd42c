"""The schedule's past as `kafkron backfill` reads it (actors/history/past.py), from a
database the recorder's own rows filled, joined by the planner."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from actors.cli.backfill_cmd import print_plan
from actors.history.past import SchedulePast
from actors.history.recorder import to_row
from actors.history.store import HistoryError, HistoryStore, Row
from actors.shard.backfill_plan import Action, KnowledgeError, PastRun, Reprocess
from actors.timespec import compile_spec
from actors.views.backfill_planning import Target, plan
from topics.command_types import Job
from topics.covers import Covers
from topics.messages import dlq_value, result_value, run_id_for, run_value
from topics.names import TopicKind
from topics.vocabulary import RunStatus

T0 = 1_789_999_980_000  # on a minute
M = 60_000


def _rows() -> list[Row]:
    """Minute 0 succeeded; 1 dead-lettered after 3 attempts; 2..6 missed, 2 alone and
    3..6 folded; 7 never fired; 8 succeeded; another schedule's run in between."""
    job = Job("billing.x", {})
    records: list[tuple[TopicKind, bytes]] = []

    def result(
        at: int, attempt: int, status: RunStatus, covers: Covers | None = None, schedule: str = "s"
    ) -> None:
        records.append(
            (
                TopicKind.RESULTS,
                result_value(
                    run_id=run_id_for(schedule, at),
                    schedule_id=schedule,
                    task=None,
                    attempt=attempt,
                    status=status,
                    scheduled_ms=at,
                    started_ms=None,
                    finished_ms=at + 5,
                    worker="w",
                    error=None,
                    covers=covers,
                ),
            )
        )

    def fired(at: int, attempt: int) -> None:
        records.append(
            (
                TopicKind.RUNS,
                run_value(
                    run_id=run_id_for("s", at),
                    schedule_id="s",
                    task=None,
                    scheduled_ms=at,
                    fired_ms=at + 1,
                    attempt=attempt,
                    job=job,
                    idempotency_key="k",
                    deadline_ms=at + 60_000,
                ),
            )
        )

    fired(T0, 1)
    result(T0, 1, RunStatus.SUCCEEDED)
    for attempt in (1, 2, 3):
        fired(T0 + M, attempt)
        result(T0 + M, attempt, RunStatus.FAILED)
    records.append(
        (
            TopicKind.DLQ,
            dlq_value(
                run_id=run_id_for("s", T0 + M),
                schedule_id="s",
                task=None,
                job=job,
                last_error={"type": "E", "message": "m"},
                attempts=[{"attempt": 3}],
                dead_at_ms=T0 + M + 999,
            ),
        )
    )
    result(T0 + 2 * M, 1, RunStatus.MISSED)
    result(T0 + 3 * M, 1, RunStatus.MISSED, Covers(T0 + 3 * M, T0 + 6 * M, 4))
    result(T0 + 7 * M + 1, 1, RunStatus.SUCCEEDED, schedule="other")
    fired(T0 + 8 * M, 1)
    result(T0 + 8 * M, 1, RunStatus.SUCCEEDED)
    rows = []
    for offset, (kind, value) in enumerate(records):
        row = to_row(kind, 0, offset, b"s", value, T0)
        assert row is not None
        rows.append(row)
    return rows


@pytest.fixture
async def db(tmp_path: Path) -> Path:
    path = tmp_path / "h.db"
    async with await HistoryStore.open(path, namespace="ns") as store:
        await store.write(_rows(), {})
    return path


async def test_the_runs_come_ordered_with_a_fold_reaching_into_the_range(db: Path) -> None:
    with SchedulePast(db) as past:
        assert past.known_range("s") == (T0, T0 + 8 * M)
        assert past.known_range("nobody") == (None, None)
        rows = list(past.runs("s", T0 + 4 * M, T0 + 9 * M))
    assert rows == [
        PastRun(T0 + 3 * M, "missed", 1, T0 + 6 * M),
        PastRun(T0 + 8 * M, "succeeded", 1, None),
    ]


def _plan(
    db: Path,
    reprocess: Reprocess,
    from_ms: int = T0,
    to_ms: int = T0 + 10 * M,
    live_next_ms: int | None = T0 + 10 * M,
) -> tuple[str, list[tuple[str, ...]]]:
    compiled = compile_spec({"every": "1m"}, schedule_id="s")
    out = io.StringIO()
    with SchedulePast(db) as past:
        print_plan(
            past,
            "s",
            Target(compiled, None, live_next_ms, T0 + 9 * M),
            from_ms,
            to_ms,
            reprocess,
            as_json=False,
            out=out,
        )
    lines = out.getvalue().splitlines()
    return lines[-1], [tuple(line.split("  ")[2].split(":")[0].split()) for line in lines[:-1]]


async def test_missing_runs_the_missed_and_the_never_fired(db: Path) -> None:
    totals, actions = _plan(db, Reprocess.MISSING)
    assert actions == [
        ("keep",),  # succeeded
        ("keep",),  # dead-lettered: only with --reprocess failed
        ("rerun", "attempt", "2"),  # missed alone: its result was attempt 1
        ("rerun", "attempt", "2"),  # the fold's own run id: its result was attempt 1
        ("run", "attempt", "1"),  # inside the fold: no result of its own
        ("run", "attempt", "1"),
        ("run", "attempt", "1"),
        ("run", "attempt", "1"),  # never fired
        ("keep",),  # succeeded
        ("unknown",),  # handled by the shard, past what the history holds
    ]
    assert totals.startswith("10 occurrences in [")
    assert "): 4 run, 2 rerun, 3 keep, 1 unknown; 6 to fire (" in totals


async def test_failed_also_reruns_the_dead_lettered_at_its_next_attempt(db: Path) -> None:
    _, actions = _plan(db, Reprocess.FAILED)
    assert actions[1] == ("rerun", "attempt", "4")
    assert actions[0] == ("keep",)


async def test_all_reruns_the_succeeded_and_leaves_the_live_ones(db: Path) -> None:
    _, actions = _plan(db, Reprocess.ALL, live_next_ms=T0 + 8 * M)
    assert actions[0] == ("rerun", "attempt", "2")
    assert actions[8:] == [("live",), ("live",)]


async def test_a_range_older_than_the_history_is_refused(db: Path) -> None:
    with pytest.raises(KnowledgeError):
        _plan(db, Reprocess.MISSING, from_ms=T0 - M)
    _, actions = _plan(db, Reprocess.ALL, from_ms=T0 - M)
    assert actions[0] == ("run", "attempt", "1")


def test_no_database_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="kafkron recorder"):
        SchedulePast(tmp_path / "none.db")


def test_actions_are_the_planner_s() -> None:
    assert {a.value for a in Action} == {"run", "rerun", "keep", "live", "unknown"}


def _dag_rows() -> list[Row]:
    """DAG ``d``, every minute: 0 ended (own row and task rows); 1 running (a task
    row, no own row yet); 2 missed and already started again by a backfill (task
    rows beside the missed row); 3 missed alone; 4 ended."""
    job = Job("billing.x", {})
    records: list[tuple[TopicKind, bytes]] = []

    def task_fired(at: int) -> None:
        records.append(
            (
                TopicKind.RUNS,
                run_value(
                    run_id=run_id_for("d", at, "a"),
                    schedule_id="d",
                    task="a",
                    scheduled_ms=at,
                    fired_ms=at + 1,
                    attempt=1,
                    job=job,
                    idempotency_key="k",
                    deadline_ms=at + 60_000,
                ),
            )
        )

    def own(at: int, status: RunStatus) -> None:
        records.append(
            (
                TopicKind.RESULTS,
                result_value(
                    run_id=run_id_for("d", at),
                    schedule_id="d",
                    task=None,
                    attempt=1,
                    status=status,
                    scheduled_ms=at,
                    started_ms=None,
                    finished_ms=at + 5,
                    worker="w",
                    error=None,
                ),
            )
        )

    task_fired(T0)
    own(T0, RunStatus.SUCCEEDED)
    task_fired(T0 + M)
    own(T0 + 2 * M, RunStatus.MISSED)
    task_fired(T0 + 2 * M)
    own(T0 + 3 * M, RunStatus.MISSED)
    task_fired(T0 + 4 * M)
    own(T0 + 4 * M, RunStatus.SUCCEEDED)
    rows = []
    for offset, (kind, value) in enumerate(records):
        row = to_row(kind, 0, offset, b"d", value, T0)
        assert row is not None
        rows.append(row)
    return rows


async def test_a_dag_instant_with_task_rows_is_kept_its_dag_run_started(tmp_path: Path) -> None:
    """A DAG run's own row comes only once it ended: a running one (or one a backfill
    started again) shows by its task rows, and is never planned again (its tasks at
    attempt 1 would run twice)."""
    path = tmp_path / "d.db"
    async with await HistoryStore.open(path, namespace="ns") as store:
        await store.write(_dag_rows(), {})
    compiled = compile_spec({"every": "1m"}, schedule_id="d")
    target = Target(compiled, None, T0 + 5 * M, T0 + 4 * M, dag=True)
    with SchedulePast(path) as past:
        steps = list(plan(past, "d", target, T0, T0 + 5 * M, Reprocess.MISSING))
    assert [(s.action, s.attempt) for s in steps] == [
        (Action.KEEP, None),
        (Action.KEEP, None),  # running: task rows only
        (Action.KEEP, None),  # missed, started again by a backfill
        (Action.RERUN, 2),  # missed, never started
        (Action.KEEP, None),
    ]
    assert "DAG run started" in steps[1].reason and "none yet" in steps[1].reason
    assert "missed at attempt 1" in steps[2].reason
