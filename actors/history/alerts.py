"""The deadline alerts in the history database: the ``alerts`` table and its reads.

The recorder copies every ``{ns}.alerts`` record into ``alerts``, one row per
``(run_id, deadline, type)`` (one ``deadline_missed`` per run and deadline broken,
at most one ``deadline_recovered`` closing it: what is unique on the wire, so a
redelivered record changes nothing), in the transaction of its batch. The console's
*Alerts* page, `kafkron alerts` and `kafkron slo` read it here instead of reading the
whole topic at every request.

The reads are SQL and a row decoder shared by the async store (`HistoryStore`) and the
audit's synchronous reader (`actors.history.audit.AuditSource`), so both say the same.
An alert is *open* from its ``deadline_missed`` until the ``deadline_recovered`` of the
same run and deadline, as `actors.views.alerts.open_alerts` folds the topic.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from topics.alerts import Alert, AlertType, DeadlineKind

ALERTS_DDL = (
    """
    CREATE TABLE IF NOT EXISTS alerts (
        run_id        TEXT    NOT NULL,
        deadline      TEXT    NOT NULL,
        type          TEXT    NOT NULL,
        schedule_id   TEXT    NOT NULL,
        task          TEXT,
        scheduled_ms  INTEGER NOT NULL,
        due_ms        INTEGER NOT NULL,
        attempt       INTEGER NOT NULL,
        late_by_ms    INTEGER NOT NULL,
        at_ms         INTEGER NOT NULL,
        seen_ms       INTEGER,
        PRIMARY KEY (run_id, deadline, type)
    )
    """,
    "CREATE INDEX IF NOT EXISTS alerts_by_time ON alerts (at_ms)",
    "CREATE INDEX IF NOT EXISTS alerts_by_schedule ON alerts (schedule_id, at_ms)",
)

_COLUMNS = (
    "type, deadline, run_id, schedule_id, task, scheduled_ms, due_ms, attempt, late_by_ms, "
    "at_ms, seen_ms"
)

UPSERT_SQL = f"INSERT OR REPLACE INTO alerts ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

_MISSED = AlertType.MISSED.value
_RECOVERED = AlertType.RECOVERED.value


def row_of(alert: Alert) -> tuple[Any, ...]:
    """The parameters of `UPSERT_SQL` for ``alert``."""
    return (
        alert.type.value,
        alert.deadline.value,
        alert.run_id,
        alert.schedule_id,
        alert.task,
        alert.scheduled_ms,
        alert.due_ms,
        alert.attempt,
        alert.late_by_ms,
        alert.at_ms,
        alert.seen_ms,
    )


def alert_of(row: Any) -> Alert:
    """An `Alert` from a row selected as `_COLUMNS` (a tuple, or a sqlite3 row)."""
    return Alert(
        AlertType(row[0]),
        DeadlineKind(row[1]),
        str(row[2]),
        str(row[3]),
        None if row[4] is None else str(row[4]),
        int(row[5]),
        int(row[6]),
        int(row[7]),
        int(row[8]),
        int(row[9]),
        None if row[10] is None else int(row[10]),
    )


def query(
    *, open_only: bool, ids: Sequence[str] = (), since_ms: int | None = None
) -> tuple[str, tuple[Any, ...]]:
    """The SQL and parameters of the alerts asked for.

    ``open_only``: the ``deadline_missed`` rows no ``deadline_recovered`` closed,
    latest first (the console's order); else every row, oldest first. ``ids``: of these
    schedules only; ``since_ms``: decided at or after it."""
    where: list[str] = []
    params: list[Any] = []
    if open_only:
        where.append(
            f"a.type = '{_MISSED}' AND NOT EXISTS (SELECT 1 FROM alerts r WHERE "
            f"r.run_id = a.run_id AND r.deadline = a.deadline AND r.type = '{_RECOVERED}')"
        )
    if ids:
        where.append(f"a.schedule_id IN ({', '.join('?' for _ in ids)})")
        params.extend(ids)
    if since_ms is not None:
        where.append("a.at_ms >= ?")
        params.append(since_ms)
    columns = ", ".join(f"a.{name.strip()}" for name in _COLUMNS.split(","))
    order = "a.at_ms DESC, a.run_id DESC" if open_only else "a.at_ms, a.run_id, a.deadline"
    sql = f"SELECT {columns} FROM alerts a"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return f"{sql} ORDER BY {order}", tuple(params)


def missed_counts(alerts: Iterable[Alert]) -> dict[str, dict[str, int]]:
    """Per schedule, how many ``deadline_missed`` of each deadline (``start``,
    ``finish``) there are among ``alerts``."""
    counts: dict[str, dict[str, int]] = {}
    for alert in alerts:
        if alert.type is AlertType.MISSED:
            found = counts.setdefault(alert.schedule_id, {"start": 0, "finish": 0})
            found[alert.deadline.value] += 1
    return counts


def read_sync(
    db: sqlite3.Connection, *, ids: Sequence[str] = (), since_ms: int | None = None
) -> list[Alert] | None:
    """Every alert recorded (`query`), through a synchronous connection (the audit's);
    None when the database has no ``alerts`` table yet (no recorder of this version
    opened it), which is not the same as no alert."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'alerts'").fetchone() is None:
        return None
    sql, params = query(open_only=False, ids=ids, since_ms=since_ms)
    return [alert_of(row) for row in db.execute(sql, params)]
