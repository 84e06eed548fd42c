"""Simulated jobs and their side effects.

A job's duration and outcome are drawn from its `JobModel` when it starts: a
duration in the model's range (times the slow factor while a slow-job fault is on
the worker), a failure with probability ``fail_p``, or a failure of the window's
error type while the true time is inside one of its ``fail_windows`` (an email
service that is down for a minute fails every reminder sent in it).

Side effects go to the `Ledger`, the stand-in for the outside world (a payment
provider). A job that uses idempotency keys hands the run's key with its effect,
and the provider applies each key once (the Stripe pattern); a job that does not
is applied every time it runs. The effects checker reads the ledger.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from actors.worker.core import Outcome
from simulation.scenario import JobModel
from topics.messages import Run
from topics.vocabulary import RunStatus

DEFAULT_MODEL = JobModel()


class Ledger:
    """Calls the outside world received, and effects it applied, per run."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()  # run_id -> times a job made the call
        self.applied: Counter[str] = Counter()  # run_id -> times the effect happened
        self._keys: set[str] = set()
        self.idempotent_runs: set[str] = set()

    def call(self, run: Run, idempotent: bool) -> bool:
        """The call of a job; whether it applied the effect (False: a repeated key)."""
        self.calls[run.run_id] += 1
        if idempotent:
            self.idempotent_runs.add(run.run_id)
            if run.idempotency_key in self._keys:
                return False  # the provider answers with the first call's result
            self._keys.add(run.idempotency_key)
        self.applied[run.run_id] += 1
        return True


@dataclass(slots=True)
class Execution:
    """One job's life as the job itself would log it: from its start to its exit (or
    its process's death), in true time; ``end_ms`` None while it still runs."""

    run_id: str
    attempt: int
    worker: str
    key: str | None  # its concurrency key (`topics.concurrency`)
    limit: int
    start_ms: int
    end_ms: int | None = None
    effect: bool = False  # its call applied the run's effect (`checkers.effects`)
    # Its rate limit (`topics.ratelimits`): key, per_s and burst (`checkers.rate_limits`).
    rate_key: str | None = None
    per_s: float = 0.0
    burst: int = 0


class Jobs:
    def __init__(self, models: dict[str, JobModel], rng: random.Random) -> None:
        self.models = models
        self.rng = rng
        self.ledger = Ledger()
        self.executions: list[Execution] = []

    def started(self, run: Run, worker: str, true_ms: int) -> Execution:
        """A job starts now: its entry in the jobs' own start/end log."""
        concurrency = run.job.concurrency
        entry = Execution(
            run.run_id,
            run.attempt,
            worker,
            None if concurrency is None else concurrency.key,
            0 if concurrency is None else concurrency.limit,
            true_ms,
        )
        rate = run.job.rate_limit
        if rate is not None:
            entry.rate_key, entry.per_s, entry.burst = rate.key, rate.per_s, rate.burst
        self.executions.append(entry)
        return entry

    def known(self, name: str) -> bool:
        return name in self.models

    def draw(self, run: Run, true_ms: int, slow_factor: float) -> tuple[int, Outcome]:
        """How long this attempt takes and how it ends (drawn now, at its start)."""
        model = self.models.get(run.job.name, DEFAULT_MODEL)
        low_ms, high_ms = model.duration_ms
        duration_ms = int(self.rng.randint(low_ms, max(low_ms, high_ms)) * slow_factor)
        for start_ms, end_ms, error_type in model.fail_windows:
            if start_ms <= true_ms < end_ms:
                return duration_ms // 10 + 1, Outcome(
                    RunStatus.FAILED,
                    {"type": error_type, "message": f"{error_type} during the attempt"},
                )
        if model.fail_p and self.rng.random() < model.fail_p:
            return duration_ms, Outcome(
                RunStatus.FAILED, {"type": "JobError", "message": "the job raised (drawn failure)"}
            )
        return max(1, duration_ms), Outcome(RunStatus.SUCCEEDED)

    def heartbeat_every_ms(self, run: Run) -> int:
        """How often this run's job checks in (0: it stops the moment it is asked)."""
        return self.models.get(run.job.name, DEFAULT_MODEL).heartbeat_every_ms

    def effect(self, run: Run, execution: Execution | None = None) -> None:
        model = self.models.get(run.job.name, DEFAULT_MODEL)
        if self.ledger.call(run, model.idempotent) and execution is not None:
            execution.effect = True
