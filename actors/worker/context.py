"""What a running job knows about its run, and how it talks back to the worker."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any

from actors.worker.errors import RunCancelled
from topics.messages import Run, idempotency_key
from topics.timefmt import to_datetime


class RunContext:
    """The first argument of every job.

    ``run_id`` names the run (``{schedule_id}@{scheduled_at}``, plus ``/{task}`` in a
    DAG) and is the same for every attempt, so ``idempotency_key(*parts)`` returns
    the same key on a retry or a redelivery after a crash: pass it to every external
    effect (a payment provider, an email service) and the effect happens once.

    Instants are UTC ``datetime``s; ``scheduled_ms`` and friends give the same in
    epoch milliseconds. ``logical_date`` and ``data_interval`` are set for DAG runs
    (the period a run processes, Airflow's convention) and ``None`` otherwise.

    Safe to use from the job's thread: ``heartbeat`` and ``cancelled`` only touch a
    ``threading.Event`` and two attributes.
    """

    __slots__ = (
        "_cancel",
        "_cancel_reason",
        "attempt",
        "data_interval",
        "deadline_ms",
        "heartbeat_details",
        "job_name",
        "last_heartbeat_ms",
        "logical_date",
        "run_id",
        "schedule_id",
        "scheduled_at",
        "scheduled_ms",
        "task",
        "worker",
    )

    def __init__(self, run: Run, *, worker: str) -> None:
        self.run_id: str = run.run_id
        self.schedule_id: str = run.schedule_id
        self.task: str | None = run.task
        self.attempt: int = run.attempt
        self.job_name: str = run.job.name
        self.scheduled_ms: int = run.scheduled_ms
        self.scheduled_at: datetime = to_datetime(run.scheduled_ms)
        self.deadline_ms: int = run.deadline_ms
        self.logical_date: datetime | None = (
            None if run.logical_date_ms is None else to_datetime(run.logical_date_ms)
        )
        interval = run.data_interval
        self.data_interval: tuple[datetime, datetime] | None = (
            None if interval is None else (to_datetime(interval[0]), to_datetime(interval[1]))
        )
        self.worker = worker
        self.heartbeat_details: Any = None
        self.last_heartbeat_ms: int | None = None
        self._cancel = threading.Event()
        self._cancel_reason = ""

    def idempotency_key(self, *parts: object) -> str:
        """A key stable across attempts of this run: ``ctx.idempotency_key("charge", 8812)``."""
        return idempotency_key(self.run_id, *(str(p) for p in parts))

    def heartbeat(self, details: Any = None) -> None:
        """Say "still working"; raises ``RunCancelled`` once the worker wants us to stop.

        Call it between units of work. ``details`` (progress, say) is kept for the
        worker's view of running jobs. The lease itself never depends on heartbeats:
        the worker keeps its partition for as long as the job runs.
        """
        self.last_heartbeat_ms = time.time_ns() // 1_000_000
        if details is not None:
            self.heartbeat_details = details
        if self._cancel.is_set():
            raise RunCancelled(self._cancel_reason)

    @property
    def cancelled(self) -> bool:
        """True once the worker asked this run to stop (see ``heartbeat``)."""
        return self._cancel.is_set()

    @property
    def cancel_reason(self) -> str:
        return self._cancel_reason

    def request_cancel(self, reason: str) -> None:
        """Worker side: ask the job to stop at its next ``heartbeat``."""
        self._cancel_reason = reason
        self._cancel.set()

    def __repr__(self) -> str:
        return f"RunContext(run_id={self.run_id!r}, attempt={self.attempt})"
