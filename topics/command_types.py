"""The typed commands of ``{ns}.commands``: what `topics.commands.decode_command` returns.

Every field carries its default and meaning, in the manner of Temporal's schedule
types, because this is the public schema a user writes by hand. All types are
frozen and slotted: a decoded command is a value, shared freely between the shard's
state, its changelog and the simulation.

Defaults (what an omitted field means):

=================  ===========================================================
field              default
=================  ===========================================================
spec.tz            ``UTC``
misfire            ``run_once`` with ``grace_s`` 300 (``catch_up_max`` 100)
overlap            ``skip``
dst                ``{"gap": "shift", "fold": "once"}`` (cronie's rule)
spread.window_s    0 (fire exactly on the spec); at most 86400
retry              1 s initial, ×2, capped at 100 s, full jitter, 5 attempts
timeout_s          3600
start / end        none (the spec alone bounds the schedule)
max_runs           none (no limit)
deadline           none (no alerts); ``start_within_s`` / ``finish_within_s``
                   (a DAG's: per task run, from when the task became ready)
job.args           ``{}``
max_active_runs    1 (DAG runs do not overlap)
=================  ===========================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from topics.alerts import Deadline
from topics.backfill_commands import BackfillCancel, ScheduleBackfill
from topics.calendar_commands import CalendarDelete, CalendarUpsert
from topics.concurrency import Concurrency
from topics.ratelimits import RateLimit, RatePause, RateResume
from topics.spec_compiler import CompiledSpec
from topics.vocabulary import DstFold, DstGap, JitterMode, MisfireMode, OverlapPolicy

OVERLAP_POLICIES = tuple(OverlapPolicy)
"""What to do when an occurrence comes due while the previous run is still going.

``allow``: run both. ``skip``: drop the new one (reported as a ``skipped`` result).
``buffer_one``: start the newest waiting one after the current run ends, dropping
older waiting ones. ``buffer_all``: start every waiting one, in order.
``cancel_other``: cancel the running one and start the new one once it has stopped
(it waits meanwhile, replacing an older waiting one).
"""

MISFIRE_POLICIES = tuple(MisfireMode)
"""What to do with occurrences missed while no shard owned the schedule.

``run_once``: fire the latest missed occurrence once if it is within ``grace_s``,
report the others ``missed``. ``catch_up``: fire every missed occurrence within
``grace_s`` (at most ``catch_up_max``), report the rest ``missed``. ``skip``: fire
none, report all ``missed``.
"""

JITTER_MODES = tuple(JitterMode)
DST_GAP_POLICIES = tuple(DstGap)
DST_FOLD_POLICIES = tuple(DstFold)
DEFAULT_DST: Mapping[str, str] = {"gap": DstGap.SHIFT, "fold": DstFold.ONCE}
DEFAULT_TIMEOUT_S = 3600
DEFAULT_CANCEL_REASON = "cancelled by an operator"
MAX_CANCEL_REASON_CHARS = 500


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failed or timed-out attempt is retried (the owning shard holds the timer).

    Attempt n+1 waits ``min(initial_s * coefficient ** (n - 1), max_interval_s)``
    seconds; with ``jitter="full"`` the wait is drawn uniformly in ``[0, that]``,
    deterministically from the run id and attempt so a simulation replays it.
    """

    max_attempts: int = 5
    """Attempts in total, the first included; 1 means never retry."""
    initial_s: float = 1.0
    """Wait before the second attempt, in seconds."""
    coefficient: float = 2.0
    """Growth of the wait from one retry to the next (>= 1)."""
    max_interval_s: float = 100.0
    """Cap of the wait between attempts, in seconds."""
    jitter: JitterMode = JitterMode.FULL
    """``full`` (uniform in [0, wait]: spreads a thundering herd) or ``none``."""
    non_retryable: tuple[str, ...] = ()
    """Error types (the result's ``error.type``) that go straight to the DLQ."""


@dataclass(frozen=True, slots=True)
class MisfirePolicy:
    """What to do with occurrences that came due while the schedule had no owner."""

    policy: MisfireMode = MisfireMode.RUN_ONCE
    """One of `MisfireMode`."""
    grace_s: int = 300
    """How late an occurrence may still fire; older ones are reported ``missed``."""
    catch_up_max: int = 100
    """``catch_up`` fires at most this many missed occurrences; the rest are ``missed``."""


@dataclass(frozen=True, slots=True)
class Job:
    """The work a run asks a worker to do."""

    name: str
    """The registered job name (``@job("billing.invoice_nightly")``)."""
    args: Mapping[str, Any]
    """Keyword arguments, any JSON object; ``{}`` when omitted."""
    queue: str = "default"
    """The worker queue its runs go to (`topics.queues`); ``default``: ``{ns}.runs``."""
    concurrency: Concurrency | None = None
    """Its concurrency key (`topics.concurrency`): at most ``limit`` runs of the key at
    once across every schedule naming it; None: no limit but the workers' slots."""
    priority: int = 0
    """0-9, higher first (`topics.priority`); 5 and above go to the queue's high lane."""

    rate_limit: RateLimit | None = None
    """Its rate limit (`topics.ratelimits`): at most ``per_s`` starts a second of the
    key's runs (bursts of ``burst``) across every schedule naming it; None: none."""

    def wire(self) -> dict[str, Any]:
        """The job as every record carries it: ``queue``, ``concurrency``, ``priority``
        and ``rate_limit`` only when set, so a job that names none keeps the bytes it always
        had."""
        args = self.args
        found: dict[str, Any] = {
            "name": self.name,
            "args": args if type(args) is dict else dict(args),
        }
        if self.queue != "default":
            found["queue"] = self.queue
        if self.concurrency is not None:
            found["concurrency"] = self.concurrency.wire()
        if self.priority:
            found["priority"] = self.priority
        if self.rate_limit is not None:
            found["rate_limit"] = self.rate_limit.wire()
        return found


@dataclass(frozen=True, slots=True)
class ScheduleUpsert:
    """``schedule.upsert``: create or replace the schedule ``id``."""

    id: str
    """The schedule id, also the Kafka key of every record about it."""
    spec: Mapping[str, Any]
    """When it fires, as written: ``{"cron", "tz"?}``, ``{"every", "anchor"?}`` or ``{"at"}``."""
    compiled: CompiledSpec
    """``spec`` compiled (by the installed `topics.spec_compiler`) with dst, spread, start, end."""
    job: Job
    """What each run does."""
    misfire: MisfirePolicy
    """Missed occurrences after downtime; default run_once, grace 300 s."""
    overlap: OverlapPolicy
    """Default ``skip``."""
    dst: Mapping[str, str]
    """``{"gap": shift|skip, "fold": once|twice}``, both keys always present."""
    spread_window_s: int
    """Stable per-id offset inside this window (EventBridge's flexible window); default 0."""
    retry: RetryPolicy
    """Retries of failed attempts; default like Temporal."""
    timeout_s: int
    """An attempt running longer is cancelled and counts as ``timed_out``; default 3600."""
    start_ms: int | None
    """No occurrence before this instant (``start``), or None."""
    end_ms: int | None
    """No occurrence after this instant (``end``), or None."""
    raw: Mapping[str, Any]
    """The decoded command object as received, kept in the changelog to rebuild."""
    max_runs: int | None = None
    """At most this many runs are ever started (triggers count); then it is
    ``completed``. Counted in the changelog, so exactly across failovers."""
    deadline: Deadline | None = None
    """When each run must start and end after its scheduled instant (`topics.alerts`);
    a run that does not gets one ``deadline_missed`` alert per deadline."""


@dataclass(frozen=True, slots=True)
class DagTask:
    """One task of a DAG: a job that runs once all of ``after`` succeeded."""

    job: Job
    """What the task does."""
    after: tuple[str, ...]
    """Names of the tasks it waits for (deduplicated, declaration order); () for roots."""
    retry: RetryPolicy
    """The task's own ``retry``, else the DAG's, else the default."""
    timeout_s: int
    """The task's own ``timeout_s``, else the DAG's, else 3600."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DagUpsert:
    """``dag.upsert``: create or replace the DAG ``id``; each occurrence runs its tasks."""

    id: str
    """The DAG id (a schedule id: same rules, same key)."""
    spec: Mapping[str, Any]
    """When a DAG run starts; as in `ScheduleUpsert.spec`."""
    compiled: CompiledSpec
    """``actors.timespec.compile_spec`` of ``spec``."""
    misfire: MisfirePolicy
    """Missed DAG runs after downtime; default run_once, grace 300 s."""
    dst: Mapping[str, str]
    """As in `ScheduleUpsert.dst`."""
    spread_window_s: int
    """As in `ScheduleUpsert.spread_window_s`."""
    start_ms: int | None
    """No DAG run before this instant, or None."""
    end_ms: int | None
    """No DAG run after this instant, or None."""
    tasks: Mapping[str, DagTask]
    """The tasks by name, in declaration order (1 to 1000, no cycle)."""
    topo_order: tuple[str, ...]
    """Every task after its dependencies; ties broken by declaration order."""
    max_active_runs: int = 1
    """DAG runs allowed at once; an occurrence beyond it is reported ``skipped``."""
    raw: Mapping[str, Any]
    """The decoded command object as received."""
    deadline: Deadline | None = None
    """When each task run must start and end after it became ready (a root: the DAG
    run's scheduled instant; any other: the instant the shard released it, its last
    upstream's success applied); one ``deadline_missed`` per task run and deadline
    broken (docs/DESIGN.md §6.10)."""


@dataclass(frozen=True, slots=True)
class ScheduleDelete:
    """``schedule.delete``: forget the schedule (or DAG); its changelog gets a tombstone."""

    id: str
    """The schedule (or DAG) id."""


@dataclass(frozen=True, slots=True)
class SchedulePause:
    """``schedule.pause``: stop firing; occurrences while paused are not run later
    (unless it resumes by itself at ``until``: then the misfire policy decides)."""

    id: str
    """The schedule (or DAG) id."""
    note: str | None = None
    """Why it is paused (1-500 characters), shown by ``ls`` and the console."""
    until_ms: int | None = None
    """It resumes by itself at this instant, exactly once; what came due meanwhile is
    handled by its misfire policy (as after a takeover). None: until a resume."""
    after_current: bool = False
    """Pause once the run in flight (if any) has ended; occurrences due before then
    fire as its overlap policy says."""
    by: str | None = None
    """Who paused it (1-200 characters; the CLI sends the user's name), for people."""


@dataclass(frozen=True, slots=True)
class ScheduleResume:
    """``schedule.resume``: fire again from the next occurrence after now."""

    id: str
    """The schedule (or DAG) id."""


@dataclass(frozen=True, slots=True)
class ScheduleTrigger:
    """``schedule.trigger``: fire once now, in addition to the spec (overlap applies)."""

    id: str
    """The schedule (or DAG) id."""


@dataclass(frozen=True, slots=True)
class DagClear:
    """``dag.clear``: re-run ``task`` of the DAG run ``run_id`` and what runs after it."""

    id: str
    """The DAG id."""
    run_id: str
    """The DAG run's id, ``{id}@{scheduled_at}`` (no task part)."""
    task: str
    """The task to run again; the tasks after it run again as they come due."""


@dataclass(frozen=True, slots=True)
class DlqReplay:
    """``dlq.replay``: run a dead-lettered run again, attempts counted afresh."""

    id: str
    """The schedule (or DAG) id the dead run belongs to."""
    run_id: str
    """The dead run's id as in the DLQ record (``{id}@{scheduled_at}`` or ``.../{task}``)."""


@dataclass(frozen=True, slots=True)
class RunCancel:
    """``run.cancel``: stop a run in flight; its attempt ends ``cancelled``, never retried.

    The shard owning ``id`` writes a cancel record to ``{ns}.runs`` under the run's key
    (after the run, on its partition); the worker running the attempt, or the next
    owner of that partition, stops it and writes the one ``cancelled`` result
    (docs/DESIGN.md §6.6). A run waiting to retry or buffered behind another is ended
    by the shard at once; a run no longer in flight is reported, not an error.
    """

    id: str
    """The schedule (or DAG) id the run belongs to."""
    run_id: str
    """The run to stop: ``{id}@{scheduled_at}`` (or ``.../{task}`` for a DAG task)."""
    reason: str = DEFAULT_CANCEL_REASON
    """Why, for people: it becomes the result's ``error.message``."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """A command that cannot be applied; it goes to ``{ns}.rejected`` with ``reason``."""

    reason: str
    """A sentence a person can act on, naming the field."""


Command = (
    ScheduleUpsert
    | ScheduleDelete
    | SchedulePause
    | ScheduleResume
    | ScheduleTrigger
    | DagUpsert
    | DagClear
    | DlqReplay
    | RunCancel
    | ScheduleBackfill
    | BackfillCancel
    | CalendarUpsert
    | CalendarDelete
    | RatePause
    | RateResume
)
