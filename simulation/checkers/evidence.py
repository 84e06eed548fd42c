"""What the checkers look at: the topics as a read_committed reader sees them at the end.

Instants called ``append_ms`` are the broker's (true time, LogAppendTime), never a
node's clock: "early" and "late" are judged by the truth, not by the clock that
may be wrong.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from actors.audit.versions import ChangelogTracker, DefinitionRow
from actors.audit.walk import Version
from simulation.checkers.pauses import PauseLog, PauseWindow
from simulation.checkers.target_records import TargetDelivery, deliveries
from simulation.jobs import Execution
from simulation.targets import TargetSeen, committed_targets
from topics.alerts import Alert, parse_alert
from topics.codec import loads
from topics.commands import DagUpsert, ScheduleBackfill, ScheduleUpsert, decode_command
from topics.covers import Covers
from topics.messages import (
    PROGRESS_STATUS,
    covers_of,
    is_cancel,
    parse_cancel,
    parse_dlq,
    parse_result,
    parse_run,
)
from topics.names import TopicKind
from topics.timefmt import parse_instant
from topics.vocabulary import SHARD_DECIDED, RunStatus

DETAIL_MAX = 10
# A run's outcomes that end it (a dead letter ends one too).
_ENDS = frozenset((RunStatus.SUCCEEDED, RunStatus.CANCELLED))


@dataclass(frozen=True, slots=True)
class RunRecord:
    run_id: str
    schedule_id: str
    scheduled_ms: int
    attempt: int
    append_ms: int
    partition: int
    offset: int
    task: str | None = None  # DAG task runs
    fired_ms: int | None = None  # the record's fired_at (the shard's clock)


@dataclass(frozen=True, slots=True)
class ResultRecord:
    run_id: str
    schedule_id: str
    scheduled_ms: int
    attempt: int
    status: str
    append_ms: int
    worker: str
    message: str
    task: str | None = None
    covers: Covers | None = None
    """A folded missed/skipped result's range (`topics.messages.covers_of`)."""
    started: bool = True
    """Whether the attempt's job started here (a result's ``started_at`` not null)."""


@dataclass(slots=True)
class Verdict:
    name: str
    rule: str
    violations: list[str] = field(default_factory=list)
    checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    def fail(self, text: str) -> None:
        self.violations.append(text)


@dataclass(slots=True)
class Evidence:
    runs: list[RunRecord]
    results: list[ResultRecord]
    dead: list[tuple[str, str, int]]  # run_id, schedule_id, append_ms
    definitions: dict[str, ScheduleUpsert]
    dags: dict[str, DagUpsert]
    first_next_ms: dict[str, int | None]  # the first occurrence the shard planned
    final_state: dict[str, dict[str, Any]]
    start_ms: int
    heal_ms: int
    end_ms: int
    lateness_bound_ms: int
    settle_ms: int  # after healing, how long the system may take to be on time again
    ledger_calls: dict[str, int]
    ledger_applied: dict[str, int]
    idempotent_runs: set[str]
    owners: dict[str, dict[int, list[str]]]  # group -> partition -> live owners at the end
    partitions: dict[str, int]
    # Breaches of the lease rule (docs/DESIGN.md §8): a worker dropped its partitions
    # while the group counted it, or adopted after the group removed it (worker, ms, what).
    lease_breaches: list[tuple[str, int, str]] = field(default_factory=list)
    # Cancel records on {ns}.runs: (run_id, attempt, append ms).
    cancels: list[tuple[str, int, int]] = field(default_factory=list)
    # Kafka targets' records a read_committed reader of their topics sees, and those
    # topics' partition counts (`checkers.target_once`).
    targets: list[TargetDelivery] = field(default_factory=list)
    target_partitions: dict[str, int] = field(default_factory=dict)
    # Pauses with an end, from the changelog's history (`checkers.pauses`).
    pauses: list[PauseWindow] = field(default_factory=list)
    # Each schedule's definitions over time, as the history's recorder keeps them
    # from the changelog (`actors.audit.versions`), and the definitions by key
    # (`checkers.audit_view`).
    versions: dict[str, list[Version]] = field(default_factory=dict)
    version_defs: dict[str, str] = field(default_factory=dict)
    # Backfills by id: their plans and their changelog history (`checkers.backfill`).
    backfills: dict[str, BackfillSeen] = field(default_factory=dict)
    # Every job's start and exit, as the jobs themselves would log them
    # (`checkers.concurrency_keys`); empty for evidence read from topics alone.
    executions: list[Execution] = field(default_factory=list)
    # {ns}.calendars as committed: (append ms, name, value; None: deleted), in order
    # (`checkers.excluded_days` judges a fire by the calendar then in effect).
    calendars: list[tuple[int, str, bytes | None]] = field(default_factory=list)
    # Deadlines (`checkers.deadlines`): the alerts, and what the runs' results said.
    deadlines: DeadlineSeen = field(default_factory=lambda: DeadlineSeen())

    def folded_ranges(self) -> dict[str, list[tuple[int, int]]]:
        """Per schedule, the [first, last] ranges that folded missed/skipped results cover."""
        out: dict[str, list[tuple[int, int]]] = {}
        for r in self.results:
            if r.covers is not None:
                out.setdefault(r.schedule_id, []).append((r.covers.from_ms, r.covers.to_ms))
        return out


@dataclass(slots=True)
class BackfillSeen:
    """One backfill: its plan (the ``schedule.backfill`` commands submitted), and what the
    changelog's history says of it (`checkers.backfill`)."""

    schedule_id: str
    backfill_id: str
    max_parallel: int
    ranges: list[tuple[int, int, int]] = field(default_factory=list)
    cancelled_ms: int | None = None  # the first changelog record that says it was cancelled
    final: dict[str, Any] | None = None  # its last state in the changelog


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """One committed record as a read_committed reader sees it: where it sits, the
    broker's append time (the runs topic's LogAppendTime; the record's timestamp on
    other topics), its key and its value (None: a tombstone)."""

    partition: int
    offset: int
    append_ms: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TopicEvidence:
    """What the topics alone say, read from the simulated Kafka (`gather`) or from a
    real broker (`from_topics`'s callers in the broker tests) the same way."""

    runs: list[RunRecord]
    results: list[ResultRecord]
    dead: list[tuple[str, str, int]]
    cancels: list[tuple[str, int, int]]
    definitions: dict[str, ScheduleUpsert]
    dags: dict[str, DagUpsert]
    first_next_ms: dict[str, int | None]
    final_state: dict[str, dict[str, Any]]
    targets: list[TargetDelivery] = field(default_factory=list)
    pauses: list[PauseWindow] = field(default_factory=list)
    versions: dict[str, list[Version]] = field(default_factory=dict)
    version_defs: dict[str, str] = field(default_factory=dict)
    backfills: dict[str, BackfillSeen] = field(default_factory=dict)
    deadlines: DeadlineSeen = field(default_factory=lambda: DeadlineSeen())


@dataclass(slots=True)
class DeadlineSeen:
    """For `checkers.deadlines`: each run's first reported start, its end, and the
    ``{ns}.alerts`` records, each with the broker's append instant."""

    # run_id -> (started_at, append ms) of the first result that said it started.
    starts: dict[str, tuple[int, int]] = field(default_factory=dict)
    # run_id -> (ended at, append ms): a succeeded or cancelled result's finished_at,
    # or a dead letter's dead_at.
    ends: dict[str, tuple[int, int]] = field(default_factory=dict)
    alerts: list[tuple[Alert, int]] = field(default_factory=list)


def from_topics(
    *,
    runs: Iterable[TopicRecord],
    results: Iterable[TopicRecord],
    dlq: Iterable[TopicRecord],
    schedules: Iterable[TopicRecord],
    commands: Iterable[tuple[bytes, bytes, int]],
    ignore_workers: Collection[str] = (),
    targets: Iterable[TargetSeen] = (),
    alerts: Iterable[TopicRecord] = (),
) -> TopicEvidence:
    """The checkers' view of the topics' committed records.

    ``schedules`` is the changelog in log order (per partition); the first record
    of a schedule with a ``next`` is the first occurrence its shard planned.
    ``commands`` are the (key, value, timestamp ms) of the commands submitted; the
    upserts among them say what each schedule should fire. ``ignore_workers``: results
    of these workers are left out (a test's stand-in worker, which is not under test
    and may answer a run twice). ``targets``: the records of the Kafka targets' topics.
    """
    run_records = []
    cancels = []
    for record in runs:
        if record.value is None:
            continue
        if is_cancel(record.value):
            cancel = parse_cancel(record.value)
            cancels.append((cancel.run_id, cancel.attempt, record.append_ms))
            continue
        run = parse_run(record.value)
        run_records.append(
            RunRecord(
                run.run_id,
                run.schedule_id,
                run.scheduled_ms,
                run.attempt,
                record.append_ms,
                record.partition,
                record.offset,
                run.task,
                run.fired_ms,
            )
        )
    run_records.sort(key=lambda r: (r.append_ms, r.partition, r.offset))
    result_records = []
    told = DeadlineSeen()
    for record in sorted(results, key=lambda r: (r.append_ms, r.partition, r.offset)):
        if record.value is None:
            continue
        res = parse_result(record.value)
        if (
            res.started_ms is not None
            and res.status not in SHARD_DECIDED
            and res.run_id not in told.starts
            and res.run_id not in told.ends
        ):
            told.starts[res.run_id] = (res.started_ms, record.append_ms)
        if res.status in _ENDS and res.run_id not in told.ends and res.finished_ms is not None:
            told.ends[res.run_id] = (res.finished_ms, record.append_ms)
        if res.status == PROGRESS_STATUS or res.worker in ignore_workers:
            continue  # a progress report is not an outcome (none of the one-result rules)
        message = "" if res.error is None else str(res.error.get("message", ""))
        result_records.append(
            ResultRecord(
                res.run_id,
                res.schedule_id,
                res.scheduled_ms,
                res.attempt,
                res.status,
                record.append_ms,
                res.worker,
                message,
                res.task,
                covers_of(res),
                res.started_ms is not None,
            )
        )
    result_records.sort(key=lambda r: r.append_ms)
    dead = []
    for record in dlq:
        if record.value is None:
            continue
        d = parse_dlq(record.value)
        dead.append((d.run_id, d.schedule_id, record.append_ms))
        told.ends.setdefault(d.run_id, (d.dead_at_ms, record.append_ms))
    for record in alerts:
        if record.value is not None:
            told.alerts.append((parse_alert(record.value), record.append_ms))
    definitions: dict[str, ScheduleUpsert] = {}
    dags: dict[str, DagUpsert] = {}
    backfills: dict[str, BackfillSeen] = {}
    for key, value, submitted_ms in commands:
        command = decode_command(key, value, submitted_ms)
        if isinstance(command, ScheduleUpsert):
            definitions[command.id] = command
        elif isinstance(command, DagUpsert):
            dags[command.id] = command
        elif isinstance(command, ScheduleBackfill):
            seen = backfills.setdefault(
                command.backfill_id,
                BackfillSeen(command.id, command.backfill_id, command.max_parallel),
            )
            seen.ranges.extend(command.ranges)
    first_next: dict[str, int | None] = {}
    final: dict[str, dict[str, Any]] = {}
    pauses = PauseLog()
    tracker = ChangelogTracker()
    versions: dict[str, list[Version]] = {}
    version_defs: dict[str, str] = {}
    for record in schedules:
        if record.key is None:
            continue
        try:
            rows = tracker.feed(
                record.partition, record.offset, record.key, record.value, record.append_ms
            )
        except (ValueError, KeyError, TypeError):
            rows = []  # not a record the history could read (as the recorder, it skips it)
        for row in rows:
            if isinstance(row, DefinitionRow):
                version_defs[row.def_key] = row.def_json
            else:
                versions.setdefault(row.schedule_id, []).append(
                    Version(row.effective_ms, row.def_key, row.paused, row.completed, row.created)
                )
        schedule_id = record.key.decode()
        state = None if record.value is None else loads(record.value)
        if schedule_id not in first_next and state is not None:
            nxt = state.get("next")
            first_next[schedule_id] = None if nxt is None else parse_instant(nxt)
        if state is None:
            final.pop(schedule_id, None)
        else:
            final[schedule_id] = state
        pauses.see(schedule_id, record.append_ms, state)
        backfill = None if state is None else state.get("backfill")
        if isinstance(backfill, dict) and backfill.get("id") in backfills:
            seen = backfills[backfill["id"]]
            seen.final = backfill
            if seen.cancelled_ms is None and backfill.get("cancelled") is not None:
                seen.cancelled_ms = record.append_ms
    return TopicEvidence(
        runs=run_records,
        results=result_records,
        dead=dead,
        cancels=cancels,
        definitions=definitions,
        dags=dags,
        first_next_ms=first_next,
        final_state=final,
        targets=deliveries(targets),
        pauses=pauses.windows,
        versions=versions,
        version_defs=version_defs,
        backfills=backfills,
        deadlines=told,
    )


def _fields_of(topics: TopicEvidence) -> dict[str, Any]:
    """`Evidence`'s fields that the topics give, as `TopicEvidence` holds them (not copied)."""
    return {f.name: getattr(topics, f.name) for f in fields(TopicEvidence)}


def of_topics(
    topics: TopicEvidence, *, end_ms: int, target_partitions: dict[str, int] | None = None
) -> Evidence:
    """Evidence of nothing but topics (records read from a real broker), for the
    checkers that judge topics alone (`simulation.checkers.TOPIC_CHECKERS`).

    ``end_ms``: occurrences due up to it must be accounted for (no settle time is
    subtracted: the caller has waited for the system to catch up). The fields of a
    simulated world (its ledger of effects, its group members, its healing) are empty.
    """
    return Evidence(
        **_fields_of(topics),
        start_ms=end_ms,
        heal_ms=end_ms,
        end_ms=end_ms,
        lateness_bound_ms=0,
        settle_ms=0,
        ledger_calls={},
        ledger_applied={},
        idempotent_runs=set(),
        owners={},
        partitions={},
        target_partitions=dict(target_partitions or {}),
    )


def gather(world: Any) -> Evidence:
    """Read the evidence out of a finished `simulation.world.World`."""
    kafka = world.kafka

    def committed(kind: TopicKind) -> Iterator[TopicRecord]:
        for p, offset, entry in kafka.committed_records(kind):
            yield TopicRecord(p, offset, entry.append_ms, entry.key, entry.value)

    def changelog() -> Iterator[TopicRecord]:
        for log in kafka.logs[TopicKind.SCHEDULES]:
            for offset, entry in enumerate(log.entries):  # compacted ones too: the history
                if entry.control or (entry.txn is not None and entry.txn.status != "committed"):
                    continue
                yield TopicRecord(log.partition, offset, entry.append_ms, entry.key, entry.value)

    topics = from_topics(
        runs=committed(TopicKind.RUNS),
        results=committed(TopicKind.RESULTS),
        dlq=committed(TopicKind.DLQ),
        alerts=committed(TopicKind.ALERTS),
        schedules=changelog(),
        commands=((s.key, s.value, s.submitted_ms) for s in world.submitted),
        targets=committed_targets(kafka),
    )
    scenario = world.scenario
    owners: dict[str, dict[int, list[str]]] = {"scheduler": {}, "worker": {}}
    for node in world.nodes.values():
        if node.state != "up":
            continue
        for p in node.held():
            owners[node.role].setdefault(p, []).append(node.name)
    ledger = world.jobs.ledger
    breaches = [
        (node.name, at_ms, what)
        for node in world.nodes.values()
        for at_ms, what in getattr(node, "lease_breaches", ())
    ]
    return Evidence(
        lease_breaches=sorted(breaches, key=lambda f: f[1]),
        **_fields_of(topics),
        start_ms=scenario.start_ms,
        heal_ms=scenario.heal_ms,
        end_ms=scenario.end_ms,
        lateness_bound_ms=scenario.lateness_bound_ms,
        settle_ms=scenario.session_timeout_ms + 10_000,
        ledger_calls=dict(ledger.calls),
        ledger_applied=dict(ledger.applied),
        idempotent_runs=set(ledger.idempotent_runs),
        executions=list(world.jobs.executions),
        owners=owners,
        partitions={"scheduler": scenario.shards, "worker": scenario.runs_partitions},
        target_partitions=dict(scenario.targets.topics),
        calendars=[
            (r.append_ms, r.key.decode("utf-8", "replace"), r.value)
            for r in committed(TopicKind.CALENDARS)
            if r.key is not None
        ],
    )
