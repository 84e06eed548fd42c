"""The backfill planner: which occurrences of a range to run, at which attempt, and why.

Pure: occurrences and the schedule's past come in as iterators, decisions come out
as an iterator, so a year of an every-minute schedule (525,600 instants) streams in
constant memory (docs/DESIGN.md §6.9).

Where the past comes from. The shard's changelog keeps a schedule's present (runs in
flight, the latest instant handled), not its past; the recorder's database does
(`actors.history`, one ``runs`` row per run id with its latest status and attempt
number). So a plan is made where the history is, and it is as fresh as the
history: what the recorder has not read yet is not known, and what fell out of the
topics' retention before the recorder read it never will be. The planner therefore

- treats an occurrence after the latest one the history holds of the schedule but
  already handled by the shard (at or before ``handled_ms``, the changelog's own
  latest instant fired or let pass) as ``UNKNOWN``: the recorder lags, and firing
  it at attempt 1 could repeat a ``(run_id, attempt)``; it is never fired;
- leaves every occurrence at or after the live cursor (``live_next_ms``, the
  changelog's ``next``) to the live schedule (``LIVE``): the live path owns those;
- refuses (`KnowledgeError`) a range that starts before the first occurrence the
  history knows of the schedule, unless ``all`` is asked for: what came before may
  have run and been forgotten, and the planner does not guess.

The decision per occurrence, by what the history says of its run id:

===========================  ==========  ==========  ==========
history of the run id        missing     failed      all
===========================  ==========  ==========  ==========
nothing (never fired)        run (1)     run (1)     run (1)
inside a folded missed or    run (1)     run (1)     run (1)
skipped range (``covers``)
missed, skipped              rerun (n+1) rerun (n+1) rerun (n+1)
dead_lettered, upstream_     keep        rerun (n+1) rerun (n+1)
failed
succeeded, cancelled         keep        keep        rerun (n+1)
failed, timed_out (its       keep        keep        keep
retries are still due)
running                      keep        keep        keep
===========================  ==========  ==========  ==========

``n`` is the run's last attempt number: a re-run is the run's next attempt under
the same run id (its idempotency key unchanged), so ``(run_id, attempt)`` stays
unique and no second run id is ever made for an instant. A missed or skipped
occurrence has a shard result at attempt 1, so it is re-run at 2. A run whose
latest attempt failed without a dead letter is still the shard's (it retries it, or
the dead letter is on its way to the recorder): it is never taken over.

A DAG's occurrences are DAG runs, and its history rows (``task`` null) are the DAG
runs' own results. A backfill starts a DAG run only where none started: never fired
(attempt 1) or missed/skipped (its own result then at attempt 2; its tasks, whose run
ids never ran, at 1). A DAG run that started and ended, whatever its status and the
``--reprocess``, is kept: its tasks are rerun with ``dag.clear``, task by task at their
own next attempts, which a whole-run re-run could not number from the runs' rows.

The plan that travels is compact: `compact_ranges` folds consecutive occurrences to
fire at the same attempt into ``(first_ms, last_ms, attempt)`` ranges, both ends
occurrences, which the shard expands with the same compiled spec.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from topics.spec_compiler import CompiledSpec
from topics.vocabulary import RunStatus

DEAD_LETTERED = "dead_lettered"  # the history's own status (actors.history.store)


class Reprocess(StrEnum):
    """Which occurrences a backfill runs (see the module's table)."""

    MISSING = "missing"
    FAILED = "failed"
    ALL = "all"


class Action(StrEnum):
    RUN = "run"  # never ran: attempt 1
    RERUN = "rerun"  # ran: its next attempt under the same run id
    KEEP = "keep"  # left as it is
    LIVE = "live"  # at or after the live cursor: the live schedule's
    UNKNOWN = "unknown"  # handled by the shard, not yet in the history


FIRES = frozenset((Action.RUN, Action.RERUN))


@dataclass(frozen=True, slots=True)
class PastRun:
    """What the history holds of one run id of the schedule (a ``runs`` row)."""

    scheduled_ms: int
    status: str
    attempts: int  # the latest attempt's number
    covers_to_ms: int | None = None  # a folded missed/skipped result's last occurrence
    tasks_started: bool = False
    """A DAG's: task rows exist at this instant, so its DAG run started (the run's
    own row comes only once it ended; ``status`` is then ``running``, attempts 0)."""


@dataclass(frozen=True, slots=True)
class Step:
    """The decision for one occurrence."""

    scheduled_ms: int
    action: Action
    attempt: int | None  # the attempt to fire (RUN, RERUN), else None
    reason: str


class KnowledgeError(ValueError):
    """The range reaches where the history cannot say what ran; the message says why."""


def occurrences(compiled: CompiledSpec, from_ms: int, to_ms: int) -> Iterator[int]:
    """The schedule's occurrences in ``[from_ms, to_ms)``, by its own rules, lazily."""
    next_after = compiled.next_after
    at = next_after(from_ms - 1)
    while at is not None and at < to_ms:
        yield at
        at = next_after(at)


def check_knowledge(from_ms: int, known_from_ms: int | None, reprocess: Reprocess) -> None:
    """Raise `KnowledgeError` if a range from ``from_ms`` starts before what the history
    knows of the schedule (``known_from_ms``: its earliest recorded occurrence),
    unless ``reprocess`` is ``all``."""
    if reprocess is Reprocess.ALL:
        return
    if known_from_ms is None:
        raise KnowledgeError(
            "the history holds no run of this schedule, so it cannot tell what ran; "
            "check that the recorder runs (kafkron recorder), or pass --reprocess all "
            "to run every occurrence of the range"
        )
    if from_ms < known_from_ms:
        raise KnowledgeError(
            f"the range starts before the first run the history knows of this schedule "
            f"({known_from_ms} ms); what came before may have run and been forgotten "
            "(topic retention, a recorder started later): start at or after it, or pass "
            "--reprocess all"
        )


def plan_steps(
    instants: Iterable[int],
    past: Iterable[PastRun],
    reprocess: Reprocess,
    *,
    live_next_ms: int | None,
    handled_ms: int | None,
    known_to_ms: int | None,
    dag: bool = False,
) -> Iterator[Step]:
    """One `Step` per occurrence of ``instants`` (ascending), joined with ``past``
    (ascending by ``scheduled_ms``; a row may start before the first instant when its
    ``covers`` reaches into the range).

    ``live_next_ms``: the changelog's next occurrence not yet handled (None: the
    schedule will fire nothing more); ``handled_ms``: the latest it handled;
    ``known_to_ms``: the latest occurrence the history holds (a fold's end included);
    ``dag``: the schedule is a DAG (see the module's docstring).
    """
    decide = _decide_dag if dag else _decide
    rows = iter(past)
    row = next(rows, None)
    fold: PastRun | None = None  # the latest folded row that started at or before now
    for at in instants:
        while row is not None and row.scheduled_ms < at:
            if row.covers_to_ms is not None:
                fold = row
            row = next(rows, None)
        if (live_next_ms is not None and at >= live_next_ms) or (
            live_next_ms is None and (handled_ms is None or at > handled_ms)
        ):
            yield Step(at, Action.LIVE, None, "not reached yet: the live schedule fires it")
            continue
        if row is not None and row.scheduled_ms == at:
            yield decide(at, row, reprocess)
            continue
        if fold is not None and fold.covers_to_ms is not None and at <= fold.covers_to_ms:
            yield Step(
                at,
                Action.RUN,
                1,
                f"{fold.status} (one of the {fold.status} range from {fold.scheduled_ms} ms)",
            )
            continue
        if known_to_ms is None or at > known_to_ms:
            yield Step(
                at,
                Action.UNKNOWN,
                None,
                "handled by the shard but not in the history yet (the recorder lags): "
                "left alone; plan again once the recorder caught up",
            )
            continue
        yield Step(at, Action.RUN, 1, "never fired")


def _decide(at: int, row: PastRun, reprocess: Reprocess) -> Step:
    status = row.status
    attempts = row.attempts
    again = attempts + 1
    if status in (RunStatus.MISSED, RunStatus.SKIPPED):
        return Step(at, Action.RERUN, again, f"{status} (attempt {attempts})")
    if status == RunStatus.RUNNING:
        return Step(at, Action.KEEP, None, f"running (attempt {attempts})")
    if status in (RunStatus.FAILED, RunStatus.TIMED_OUT):
        return Step(
            at,
            Action.KEEP,
            None,
            f"{status} at attempt {attempts} and not dead-lettered: its retries are the shard's",
        )
    if status in (DEAD_LETTERED, RunStatus.UPSTREAM_FAILED):
        if reprocess is Reprocess.MISSING:
            return Step(at, Action.KEEP, None, f"{status} (attempt {attempts}); --reprocess failed")
        return Step(at, Action.RERUN, again, f"{status} (attempt {attempts})")
    if reprocess is Reprocess.ALL:
        return Step(at, Action.RERUN, again, f"{status} (attempt {attempts}); --reprocess all")
    return Step(at, Action.KEEP, None, f"already {status} (attempt {attempts})")


def _decide_dag(at: int, row: PastRun, reprocess: Reprocess) -> Step:
    """A DAG run: started again only where it never started (missed or skipped, and
    no task row at its instant: a DAG run still running, or one a backfill already
    started again, has task rows but no own row yet, or only the missed one)."""
    if row.tasks_started:
        return Step(
            at,
            Action.KEEP,
            None,
            f"its DAG run started (task rows at this instant; its own result: "
            f"{'none yet' if row.attempts == 0 else f'{row.status} at attempt {row.attempts}'}"
            "): rerun its tasks with dag.clear",
        )
    if row.status in (RunStatus.MISSED, RunStatus.SKIPPED):
        return _decide(at, row, reprocess)
    return Step(
        at,
        Action.KEEP,
        None,
        f"DAG run {row.status} (attempt {row.attempts}): rerun its tasks with dag.clear",
    )


@dataclass(slots=True)
class Totals:
    """How many occurrences got each action, and the first and last to fire."""

    counts: dict[Action, int] = field(default_factory=lambda: {a: 0 for a in Action})
    first_fire_ms: int | None = None
    last_fire_ms: int | None = None

    def add(self, step: Step) -> None:
        self.counts[step.action] += 1
        if step.action in FIRES:
            if self.first_fire_ms is None:
                self.first_fire_ms = step.scheduled_ms
            self.last_fire_ms = step.scheduled_ms

    @property
    def to_fire(self) -> int:
        return self.counts[Action.RUN] + self.counts[Action.RERUN]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


Range = tuple[int, int, int]
"""``(first_ms, last_ms, attempt)``: consecutive occurrences (both ends included) to
fire at one attempt number."""


def compact_ranges(steps: Iterable[Step]) -> Iterator[Range]:
    """Fold consecutive steps that fire at the same attempt into ranges.

    Consecutive means no occurrence between them that is not fired, so expanding a
    range with the schedule's spec gives back exactly its steps."""
    first = last = attempt = None
    for step in steps:
        if step.action not in FIRES:
            if first is not None:
                yield (first, last, attempt)  # type: ignore[misc]
                first = None
            continue
        if first is not None and step.attempt == attempt:
            last = step.scheduled_ms
            continue
        if first is not None:
            yield (first, last, attempt)  # type: ignore[misc]
        first = last = step.scheduled_ms
        attempt = step.attempt
    if first is not None:
        yield (first, last, attempt)  # type: ignore[misc]
