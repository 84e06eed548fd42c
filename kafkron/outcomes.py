"""When a run has ended for good, read from ``{ns}.results`` and ``{ns}.dlq``.

A run's attempts each get one result (docs/DESIGN.md §3.5); which one is final is
not written on it, so it is decided here, from what the shard writes:

- ``succeeded``, ``cancelled``, ``skipped``, ``missed`` and ``upstream_failed`` end a
  run (none is retried);
- ``failed`` and ``timed_out`` end it only once the shard dead-letters it: a dead
  letter whose last recorded attempt is that result's attempt (the shard writes both
  in one transaction; a replay later starts new attempts of the same run id);
- a DAG run's own result (run id without a task, with ``counts``) ends the DAG run;
- a folded ``missed`` or ``skipped`` result (`topics.covers`) ends every occurrence
  of its schedule in its range, which has no result of its own;
- ``running`` is a progress report, never an end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from topics.command_builders import InvalidCommand
from topics.command_fields import FieldError, instant
from topics.command_parts import Instant, instant_text
from topics.messages import DeadLetter, Result, covers_of, parse_run_id, run_id_for
from topics.timefmt import to_datetime
from topics.vocabulary import RunStatus

ENDS_A_RUN = frozenset(
    (
        RunStatus.SUCCEEDED,
        RunStatus.CANCELLED,
        RunStatus.SKIPPED,
        RunStatus.MISSED,
        RunStatus.UPSTREAM_FAILED,
    )
)
"""Statuses after which a run has no further attempt."""
RETRIED_UNLESS_DEAD = frozenset((RunStatus.FAILED, RunStatus.TIMED_OUT))
"""Statuses that end a run only when the shard dead-letters it."""


def run_id(schedule_id: str, scheduled_at: Instant, task: str | None = None) -> str:
    """The id of the run of ``schedule_id`` at ``scheduled_at`` (plus ``/{task}`` for a
    DAG task), as the shards name it: every attempt of an occurrence shares it, so it
    is known before the run fires (``At(t)`` runs as ``run_id(id, t)``).

    Example: ``run_id("remind-42", "2026-12-04T14:05:00Z")`` is
    ``"remind-42@2026-12-04T14:05:00.000Z"``.
    """
    try:
        scheduled_ms = instant(instant_text(scheduled_at, "scheduled_at"), "scheduled_at")
    except FieldError as error:
        raise InvalidCommand(str(error)) from None
    return run_id_for(schedule_id, scheduled_ms, task)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended: its final result, and its dead letter if it was dead-lettered.

    Example::

        outcome = await client.wait_for("invoice-nightly@2026-10-10T00:00:00.000Z")
        if outcome.dead_letter is not None:
            print("dead:", outcome.error)
        elif outcome.status == "succeeded":
            print("done in", outcome.finished_at - outcome.started_at)
    """

    run_id: str
    """The run waited for (``{schedule}@{scheduled_at}``, plus ``/{task}`` for a task)."""
    status: RunStatus
    """The final status (a `topics.vocabulary.RunStatus`, equal to its wire string)."""
    result: Result
    """The final result record (for a folded one, the result standing for this run)."""
    dead_letter: DeadLetter | None
    """The dead letter of a run that failed for good, else None."""

    @property
    def succeeded(self) -> bool:
        """True for ``succeeded``."""
        return self.status == RunStatus.SUCCEEDED

    @property
    def error(self) -> Mapping[str, str] | None:
        """The final result's ``{"type", "message"}``, None on success."""
        return self.result.error

    @property
    def attempt(self) -> int:
        """The attempt the run ended on (1 for the first)."""
        return self.result.attempt

    @property
    def started_at(self) -> datetime | None:
        """When the final attempt started, None if it never did (missed, skipped...)."""
        started = self.result.started_ms
        return None if started is None else to_datetime(started)

    @property
    def finished_at(self) -> datetime | None:
        """When the final attempt ended (None for a shard's verdict on a run never started)."""
        finished = self.result.finished_ms
        return None if finished is None else to_datetime(finished)

    @property
    def counts(self) -> Mapping[str, int] | None:
        """A DAG run's tasks by final state (``{"succeeded": 3}``), else None."""
        return self.result.counts


class OutcomeTracker:
    """Follows one run's results and dead letters until it has ended.

    Feed it every result and dead letter of the run's schedule, in each topic's
    order; `on_result` and `on_dead_letter` return the `RunOutcome` once it is final.

    Example::

        tracker = OutcomeTracker("fx-rates@2026-10-10T00:00:00.000Z")
        for result in results:
            if (outcome := tracker.on_result(result)) is not None:
                break
    """

    __slots__ = ("_dead", "_latest", "_schedule_id", "_scheduled_ms", "_task", "run_id")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._schedule_id, self._scheduled_ms, self._task = parse_run_id(run_id)
        self._latest: Result | None = None
        self._dead: dict[int, DeadLetter] = {}

    def on_result(self, result: Result) -> RunOutcome | None:
        """The outcome if ``result`` ends the run, else None."""
        if result.status == RunStatus.RUNNING:
            return None
        if result.run_id != self.run_id:
            return self._folded(result)
        latest = self._latest
        if latest is not None and result.attempt < latest.attempt:
            return None  # an older attempt's result, read late
        self._latest = result
        return self._final()

    def on_dead_letter(self, letter: DeadLetter) -> RunOutcome | None:
        """The outcome if ``letter`` (a dead letter of this run) ends it, else None."""
        if letter.run_id != self.run_id:
            return None
        attempts = [a.get("attempt") for a in letter.attempts]
        numbers = [n for n in attempts if isinstance(n, int)]
        last = max(numbers) if numbers else (self._latest.attempt if self._latest else 0)
        self._dead[last] = letter
        return self._final()

    def _final(self) -> RunOutcome | None:
        result = self._latest
        if result is None:
            return None
        if result.counts is not None or result.status in ENDS_A_RUN:
            return RunOutcome(self.run_id, result.status, result, None)
        dead = self._dead.get(result.attempt)
        if result.status in RETRIED_UNLESS_DEAD and dead is not None:
            return RunOutcome(self.run_id, result.status, result, dead)
        return None

    def _folded(self, result: Result) -> RunOutcome | None:
        if self._task is not None or result.schedule_id != self._schedule_id:
            return None
        covers = covers_of(result)
        if covers is None or not covers.from_ms <= self._scheduled_ms <= covers.to_ms:
            return None
        return RunOutcome(self.run_id, result.status, result, None)
