"""What the checkers look at: the topics as a read_committed reader sees them at the end.

Instants called ``append_ms`` are the broker's (true time, LogAppendTime), never a
node's clock: "early" and "late" are judged by the truth, not by the clock that
may be wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from topics.codec import loads
from topics.commands import DagUpsert, ScheduleUpsert, decode_command
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

DETAIL_MAX = 10


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
    # Workers that dropped their partitions for a lost lease while the group still
    # counted them as live members: (worker, true ms, what they were doing).
    false_lease_losses: list[tuple[str, int, str]] = field(default_factory=list)
    # Cancel records on {ns}.runs: (run_id, attempt, append ms).
    cancels: list[tuple[str, int, int]] = field(default_factory=list)

    def folded_ranges(self) -> dict[str, list[tuple[int, int]]]:
        """Per schedule, the [first, last] ranges that folded missed/skipped results cover."""
        out: dict[str, list[tuple[int, int]]] = {}
        for r in self.results:
            if r.covers is not None:
                out.setdefault(r.schedule_id, []).append((r.covers.from_ms, r.covers.to_ms))
        return out


def gather(world: Any) -> Evidence:
    """Read the evidence out of a finished `simulation.world.World`."""
    kafka = world.kafka
    runs = []
    cancels = []
    for p, offset, entry in kafka.committed_records(TopicKind.RUNS):
        if is_cancel(entry.value):
            cancel = parse_cancel(entry.value)
            cancels.append((cancel.run_id, cancel.attempt, entry.append_ms))
            continue
        run = parse_run(entry.value)
        runs.append(
            RunRecord(
                run.run_id,
                run.schedule_id,
                run.scheduled_ms,
                run.attempt,
                entry.append_ms,
                p,
                offset,
                run.task,
            )
        )
    runs.sort(key=lambda r: (r.append_ms, r.partition, r.offset))
    results = []
    for _, _, entry in kafka.committed_records(TopicKind.RESULTS):
        res = parse_result(entry.value)
        if res.status == PROGRESS_STATUS:
            continue  # a progress report, not an outcome (none of the one-result rules)
        message = "" if res.error is None else str(res.error.get("message", ""))
        results.append(
            ResultRecord(
                res.run_id,
                res.schedule_id,
                res.scheduled_ms,
                res.attempt,
                res.status,
                entry.append_ms,
                res.worker,
                message,
                res.task,
                covers_of(res),
            )
        )
    results.sort(key=lambda r: r.append_ms)
    dead = []
    for _, _, entry in kafka.committed_records(TopicKind.DLQ):
        d = parse_dlq(entry.value)
        dead.append((d.run_id, d.schedule_id, entry.append_ms))
    definitions: dict[str, ScheduleUpsert] = {}
    dags: dict[str, DagUpsert] = {}
    for s in world.submitted:
        command = decode_command(s.key, s.value, s.submitted_ms)
        if isinstance(command, ScheduleUpsert):
            definitions[s.schedule_id] = command
        elif isinstance(command, DagUpsert):
            dags[s.schedule_id] = command
    first_next: dict[str, int | None] = {}
    final: dict[str, dict[str, Any]] = {}
    for log in kafka.logs[TopicKind.SCHEDULES]:
        for entry in log.entries:  # compacted records too: the history, not the topic
            if entry.control or entry.key is None:
                continue
            if entry.txn is not None and entry.txn.status != "committed":
                continue
            schedule_id = entry.key.decode()
            state = None if entry.value is None else loads(entry.value)
            if schedule_id not in first_next and state is not None:
                nxt = state.get("next")
                first_next[schedule_id] = None if nxt is None else parse_instant(nxt)
            if state is None:
                final.pop(schedule_id, None)
            else:
                final[schedule_id] = state
    scenario = world.scenario
    owners: dict[str, dict[int, list[str]]] = {"scheduler": {}, "worker": {}}
    for node in world.nodes.values():
        if node.state != "up":
            continue
        for p in node.held():
            owners[node.role].setdefault(p, []).append(node.name)
    ledger = world.jobs.ledger
    false_losses = [
        (node.name, at_ms, why)
        for node in world.nodes.values()
        for at_ms, why in getattr(node, "false_lease_losses", ())
    ]
    return Evidence(
        false_lease_losses=sorted(false_losses, key=lambda f: f[1]),
        cancels=cancels,
        runs=runs,
        results=results,
        dead=dead,
        definitions=definitions,
        dags=dags,
        first_next_ms=first_next,
        final_state=final,
        start_ms=scenario.start_ms,
        heal_ms=scenario.heal_ms,
        end_ms=scenario.end_ms,
        lateness_bound_ms=scenario.lateness_bound_ms,
        settle_ms=scenario.session_timeout_ms + 10_000,
        ledger_calls=dict(ledger.calls),
        ledger_applied=dict(ledger.applied),
        idempotent_runs=set(ledger.idempotent_runs),
        owners=owners,
        partitions={"scheduler": scenario.shards, "worker": scenario.runs_partitions},
    )
