"""A schedule's past as the history holds it, streamed for the backfill planner.

The planner (`actors.shard.backfill_plan`) joins a schedule's occurrences with its
runs in one ascending walk, so what it needs is one ordered range query over the
``runs_by_schedule`` index, read row by row: a year of an every-minute schedule is
never in memory at once. This reads with the standard library's ``sqlite3`` in
read-only mode, synchronously: the planner is a plain generator and the command
that drives it (`kafkron backfill`) has nothing else to do meanwhile; WAL lets it
read while the recorder writes (`actors.history.schema`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from actors.history.store import HistoryError
from actors.shard.backfill_plan import PastRun
from topics.vocabulary import RunStatus

# Rows fetched per round trip to SQLite: enough to amortise the call, small enough
# to keep memory flat.
_FETCH_ROWS = 4096


class SchedulePast:
    """Read-only access to one history database for backfill plans. Close it."""

    def __init__(self, path: Path | str) -> None:
        path = Path(path)
        if not path.exists():
            raise HistoryError(
                f"no history database at {path}; run `kafkron recorder` to build one, "
                "or pass --db (env KAFKRON_HISTORY_DB) to point at it"
            )
        self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self._db.execute("PRAGMA busy_timeout=5000")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SchedulePast:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def known_range(self, schedule_id: str) -> tuple[int | None, int | None]:
        """The earliest and the latest occurrence the history holds of the schedule
        (a folded result's last occurrence counts), or ``(None, None)``."""
        try:
            row = self._db.execute(
                "SELECT MIN(scheduled_ms), MAX(COALESCE(covers_to_ms, scheduled_ms)) "
                "FROM runs WHERE schedule_id = ? AND task IS NULL",
                (schedule_id,),
            ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"cannot read the history database: {exc}") from None
        if row is None:
            return None, None
        return row[0], row[1]

    def runs(
        self, schedule_id: str, from_ms: int, to_ms: int, dag: bool = False
    ) -> Iterator[PastRun]:
        """The schedule's runs that touch ``[from_ms, to_ms)``, ascending: the folded
        result that starts before ``from_ms`` and covers into it (if any), then every
        run scheduled in the range. ``dag``: one row per instant that has the DAG
        run's own row or task rows (`PastRun.tasks_started`): a DAG run's own row
        exists only once it ended, so a running one shows by its tasks alone."""
        db = self._db
        before = db.execute(
            "SELECT scheduled_ms, status, attempts, covers_to_ms FROM runs "
            "WHERE schedule_id = ? AND task IS NULL AND scheduled_ms < ? "
            "ORDER BY scheduled_ms DESC LIMIT 1",
            (schedule_id, from_ms),
        ).fetchone()
        if before is not None and before[3] is not None and before[3] >= from_ms:
            yield PastRun(before[0], before[1], before[2], before[3])
        if dag:
            yield from self._dag_runs(schedule_id, from_ms, to_ms)
            return
        cursor = db.execute(
            "SELECT scheduled_ms, status, attempts, covers_to_ms FROM runs "
            "WHERE schedule_id = ? AND task IS NULL AND scheduled_ms >= ? AND scheduled_ms < ? "
            "ORDER BY scheduled_ms",
            (schedule_id, from_ms, to_ms),
        )
        while True:
            batch = cursor.fetchmany(_FETCH_ROWS)
            if not batch:
                return
            for scheduled_ms, status, attempts, covers_to_ms in batch:
                yield PastRun(scheduled_ms, status, attempts, covers_to_ms)

    def _dag_runs(self, schedule_id: str, from_ms: int, to_ms: int) -> Iterator[PastRun]:
        cursor = self._db.execute(
            "SELECT scheduled_ms, MAX(CASE WHEN task IS NULL THEN status END), "
            "MAX(CASE WHEN task IS NULL THEN attempts END), "
            "MAX(CASE WHEN task IS NULL THEN covers_to_ms END), MAX(task IS NOT NULL) "
            "FROM runs WHERE schedule_id = ? AND scheduled_ms >= ? AND scheduled_ms < ? "
            "GROUP BY scheduled_ms ORDER BY scheduled_ms",
            (schedule_id, from_ms, to_ms),
        )
        while True:
            batch = cursor.fetchmany(_FETCH_ROWS)
            if not batch:
                return
            for scheduled_ms, status, attempts, covers_to_ms, tasks in batch:
                if status is None:  # task rows only: the DAG run has not ended
                    yield PastRun(scheduled_ms, RunStatus.RUNNING, 0, None, True)
                else:
                    yield PastRun(scheduled_ms, status, attempts, covers_to_ms, bool(tasks))

    def failed_since(self, schedule_id: str, first_ms: int, last_ms: int, since_ms: int) -> int:
        """Runs of the schedule in ``[first_ms, last_ms]`` fired at or after ``since_ms``
        (a backfill's) whose latest status is a failure."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM runs r WHERE r.schedule_id = ? AND r.task IS NULL "
            "AND r.scheduled_ms >= ? AND r.scheduled_ms <= ? "
            "AND r.status IN ('failed', 'timed_out', 'dead_lettered') "
            "AND EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = r.run_id "
            "AND a.fired_ms >= ?)",
            (schedule_id, first_ms, last_ms, since_ms),
        ).fetchone()
        return int(row[0]) if row else 0
