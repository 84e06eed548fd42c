"""What a running job knows about its run, and how it talks back to the worker."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from actors.worker.errors import RunCancelled
from topics.messages import PROGRESS_INTERVAL_MS, Run, idempotency_key
from topics.timefmt import to_datetime

ProgressCallback = Callable[[Any, int], None]
"""``(details, at_ms)``: called from the job's thread; must be thread-safe."""


class RunContext:
    """The first argument of every job.

    ``run_id`` names the run (``{schedule_id}@{scheduled_at}``, plus ``/{task}`` in a
    DAG) and is the same for every attempt, so ``idempotency_key(*parts)`` returns
    the same key on a retry or a redelivery after a crash: pass it to every external
    effect (a payment provider, an email service) and the effect happens once.

    Instants are UTC ``datetime``s; ``scheduled_ms`` and friends give the same in
    epoch milliseconds. ``logical_date`` and ``data_interval`` are set for DAG runs
    (the period a run processes, Airflow's convention) and ``None`` otherwise.

    Safe to use from the job's thread: ``heartbeat`` and ``cancelled`` only read and
    write single attributes.

    Example::

        @job("billing.invoice_nightly")
        async def invoice_nightly(ctx: RunContext, region: str = "eu") -> None:
            period = (ctx.logical_date or ctx.scheduled_at).strftime("%Y-%m")
            key = ctx.idempotency_key("invoice", region, period)  # same on every attempt
            await provider.invoice(region, period, idempotency_key=key)
    """

    __slots__ = (
        "_cancel_reason",
        "_on_progress",
        "_progress_sent_ms",
        "_run",
        "heartbeat_details",
        "last_heartbeat_ms",
        "worker",
    )

    def __init__(
        self, run: Run, *, worker: str, on_progress: ProgressCallback | None = None
    ) -> None:
        self._run = run
        self.worker = worker
        self._on_progress = on_progress
        self._progress_sent_ms: int | None = None
        self.heartbeat_details: Any = None
        self.last_heartbeat_ms: int | None = None
        # Set (once) by the worker's thread, read by the job's: a plain attribute is
        # enough, an assignment is atomic in Python.
        self._cancel_reason: str | None = None

    @property
    def run_id(self) -> str:
        return self._run.run_id

    @property
    def schedule_id(self) -> str:
        return self._run.schedule_id

    @property
    def task(self) -> str | None:
        return self._run.task

    @property
    def attempt(self) -> int:
        return self._run.attempt

    @property
    def job_name(self) -> str:
        return self._run.job.name

    @property
    def scheduled_ms(self) -> int:
        return self._run.scheduled_ms

    @property
    def scheduled_at(self) -> datetime:
        return to_datetime(self._run.scheduled_ms)

    @property
    def deadline_ms(self) -> int:
        return self._run.deadline_ms

    @property
    def logical_date(self) -> datetime | None:
        ms = self._run.logical_date_ms
        return None if ms is None else to_datetime(ms)

    @property
    def data_interval(self) -> tuple[datetime, datetime] | None:
        interval = self._run.data_interval
        return None if interval is None else (to_datetime(interval[0]), to_datetime(interval[1]))

    def idempotency_key(self, *parts: object) -> str:
        """A key stable across attempts of this run: ``ctx.idempotency_key("charge", 8812)``."""
        return idempotency_key(self.run_id, *(str(p) for p in parts))

    def heartbeat(self, details: Any = None) -> None:
        """Say "still working"; raises ``RunCancelled`` once the worker wants us to stop.

        Call it between units of work. ``details`` (progress, say: any JSON value) is
        published, at most once per ``PROGRESS_INTERVAL_MS`` (10 s) per attempt, as a
        ``running`` result on ``{ns}.results`` carrying the details and the time; the
        history shows the latest. The lease itself never depends on heartbeats: the
        worker keeps its partition for as long as the job runs.
        """
        self.last_heartbeat_ms = now = time.time_ns() // 1_000_000
        if details is not None:
            self.heartbeat_details = details
            sent = self._progress_sent_ms
            if self._on_progress is not None and (
                sent is None or now - sent >= PROGRESS_INTERVAL_MS
            ):
                self._progress_sent_ms = now
                self._on_progress(details, now)
        reason = self._cancel_reason
        if reason is not None:
            raise RunCancelled(reason)

    @property
    def cancelled(self) -> bool:
        """True once the worker asked this run to stop (see ``heartbeat``)."""
        return self._cancel_reason is not None

    @property
    def cancel_reason(self) -> str:
        return self._cancel_reason or ""

    def request_cancel(self, reason: str) -> None:
        """Worker side: ask the job to stop at its next ``heartbeat``."""
        if self._cancel_reason is None:
            self._cancel_reason = reason or "cancelled"

    def __repr__(self) -> str:
        return f"RunContext(run_id={self.run_id!r}, attempt={self.attempt})"
