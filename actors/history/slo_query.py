"""The SLO figures of a window, from the history database: how soon runs started after
their instants (docs/DESIGN.md §9.1, "SLO"). `kafkron audit --slo`, `kafkron slo` and the
console read them through `actors.history.audit.slo`."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SloReport:
    """How soon the window's runs started after their scheduled instants."""

    within_ms: int
    started: int
    on_time: int
    missed: int
    p50_ms: int | None
    p95_ms: int | None
    p99_ms: int | None
    outcomes: dict[str, int] = field(default_factory=dict)
    """How the window's runs stand (their latest status: succeeded, failed,
    dead_lettered, missed, ...; a DAG counted by its own run, not its tasks')."""

    @property
    def share(self) -> float | None:
        """On time among every run that should have started (missed ones count late)."""
        total = self.started + self.missed
        return None if total == 0 else self.on_time / total


def slo_of(
    conn: sqlite3.Connection,
    from_ms: int,
    to_ms: int,
    within_ms: int,
    ids: Sequence[str] | None = None,
) -> SloReport:
    """The share of first attempts that started within ``within_ms`` of their instant.

    A run's start is its first attempt's ``started_ms`` (the worker's, or, for a Kafka
    target, its write: the shard's fire); a run fired but not yet started is left
    out; a ``missed`` occurrence (each one a folded result stands for) counts as late.
    """
    where = "a.attempt = 1 AND a.scheduled_ms >= ? AND a.scheduled_ms <= ?"
    params: list[Any] = [from_ms, to_ms]
    if ids is not None:
        where += f" AND a.schedule_id IN ({','.join('?' * len(ids))})"
        params += list(ids)
    lateness = (
        f"SELECT a.started_ms - a.scheduled_ms AS late FROM attempts a WHERE {where} "
        "AND a.started_ms IS NOT NULL AND a.status IS NOT 'missed' AND a.status IS NOT 'skipped'"
    )
    started, on_time = conn.execute(
        f"SELECT COUNT(*), COALESCE(SUM(late <= ?), 0) FROM ({lateness})", (within_ms, *params)
    ).fetchone()
    (missed,) = conn.execute(
        f"SELECT COALESCE(SUM(COALESCE(a.covers_count, 1)), 0) FROM attempts a WHERE {where} "
        "AND a.status = 'missed'",
        params,
    ).fetchone()

    def quantile(q: float) -> int | None:
        if started == 0:
            return None
        row = conn.execute(
            f"{lateness} ORDER BY late LIMIT 1 OFFSET ?",
            (*params, min(started - 1, int(q * started))),
        ).fetchone()
        return int(row[0])

    run_where = where.replace("a.attempt = 1 AND ", "").replace("a.", "r.")
    outcomes = {
        str(status): int(n)
        for status, n in conn.execute(
            f"SELECT r.status, COUNT(*) FROM runs r WHERE {run_where} AND r.task IS NULL "
            "GROUP BY r.status",
            params,
        )
    }
    return SloReport(
        within_ms,
        int(started),
        int(on_time),
        int(missed),
        quantile(0.50),
        quantile(0.95),
        quantile(0.99),
        outcomes,
    )
