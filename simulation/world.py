"""One simulated run: build the world, inject faults, heal, check.

The run is event driven: a heap of (true instant, sequence, action); the clock
jumps from one event to the next, so a quiet hour costs nothing. Ties run in
the order they were scheduled, and every random choice comes from one
`random.Random(seed)`, so a seed replays the same run byte for byte.

Two phases, as TigerBeetle's VOPR: the *safety* phase, where scripted and random
faults happen and only safety invariants must hold, then the *liveness* phase,
where every fault heals (crashed nodes restart, paused ones resume, the broker
answers, clocks are right again) and the system must converge: every shard owned,
every due occurrence accounted for, every run ended, lateness back within bound.
"""

from __future__ import annotations

import functools
import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from simulation.clock import NodeClock, WorldTime
from simulation.faults import FaultInjector, Target
from simulation.group import Group
from simulation.host import exact_bytes
from simulation.jobs import Jobs
from simulation.kafka import SimKafka
from simulation.node import SchedulerNode
from simulation.ownership import Ownership
from simulation.scenario import Sample, Scenario, ScheduleGroup
from simulation.timeline import Timeline
from simulation.worker_node import WorkerNode
from topics.closing import CLOSE_TIMEOUT_S
from topics.codec import dumps
from topics.messages import is_cancel, parse_run
from topics.names import Settings, TopicKind
from topics.partitioner import murmur2_partition

Node = SchedulerNode | WorkerNode
REBALANCE_NOTICE_MS = (100, 3_000)  # members learn of a rebalance at their next heartbeat
LATENCY_MS = (2, 20)
FETCH_MS = (1, 5)
CLOSE_TIMEOUT_MS = int(CLOSE_TIMEOUT_S * 1000)  # the runtime's bound on a client's stop


@dataclass(frozen=True, slots=True)
class Submitted:
    schedule_id: str
    key: bytes
    value: bytes
    submitted_ms: int


class World:
    def __init__(self, scenario: Scenario, seed: int, *, broken: Iterable[str] = ()) -> None:
        self.scenario = scenario
        self.seed = seed
        self.broken = frozenset(broken)
        self.rng = random.Random(seed)
        self.time = WorldTime(scenario.start_ms)
        self.settings = Settings()
        n = scenario.shards
        self.kafka = SimKafka(
            {
                TopicKind.COMMANDS: n,
                TopicKind.SCHEDULES: n,
                TopicKind.RESULTS: n,
                TopicKind.RUNS: scenario.runs_partitions,
                TopicKind.DLQ: n,
                TopicKind.REJECTED: 1,
                TopicKind.CALENDARS: 1,
                TopicKind.ALERTS: n,
                TopicKind.RATELIMITS: 1,
            },
            fencing="no-fencing" not in self.broken,
        )
        self.kafka.worker_faults.max_result_bytes = scenario.worker_client.max_result_bytes
        self.scheduler_group = Group(self.settings.scheduler_group, n, scenario.session_timeout_ms)
        self.worker_group = Group(
            self.settings.worker_group, scenario.runs_partitions, scenario.session_timeout_ms
        )
        self.timeline = Timeline()
        self.ownership = Ownership()
        self.jobs = Jobs(scenario.jobs, self.rng)
        self.nodes: dict[str, Node] = {}
        for spec in scenario.nodes:
            clock = NodeClock(self.time, offset_ms=spec.offset_ms, drift_ppm=spec.drift_ppm)
            if spec.role == "scheduler":
                self.nodes[spec.name] = SchedulerNode(
                    self,
                    spec.name,
                    clock,
                    scenario.session_timeout_ms,
                    max_fires_per_turn=scenario.max_fires_per_turn,
                    max_standbys=scenario.standbys,
                    targets=scenario.targets.snapshot(
                        self.settings.namespace, scenario.runs_partitions
                    ),
                )
            else:
                slots = spec.concurrency
                if scenario.sample is not None:
                    slots = scenario.sample.slots(slots)
                self.nodes[spec.name] = WorkerNode(self, spec.name, clock, self.jobs, slots)
        self.faults = FaultInjector(self, scenario)
        self.submitted: list[Submitted] = []
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self._generations = (0, 0)
        self.events_run = 0

    # -- the Host interface -------------------------------------------------------

    def at(self, true_ms: int, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (true_ms, self._seq, action))

    def arrived(self, parts: Iterable[tuple[TopicKind, int]], true_ms: int) -> None:
        parts = list(parts)
        if not parts:
            return
        for node in self.nodes.values():
            if node.state == "up" and any(node.consumes(kind, p) for kind, p in parts):
                node.wake(true_ms + self.rng.randint(*FETCH_MS))

    def latency_ms(self) -> int:
        return self.rng.randint(*LATENCY_MS)

    def join_ms(self) -> int:
        low, high = self.scenario.worker_client.join_ms
        return 0 if high == 0 else self.rng.randint(low, high)

    def sync_wait_ms(self) -> int:
        low, high = self.scenario.worker_client.sync_wait_ms
        return 0 if high == 0 else self.rng.randint(low, high)

    def adopt_delay_ms(self) -> int:
        low, high = self.scenario.worker_client.adopt_delay_ms
        return 0 if high == 0 else self.rng.randint(low, high)

    def max_fetch_records(self) -> int | None:
        return self.scenario.worker_client.max_fetch_records

    def scenario_flag(self, name: str) -> bool:
        return bool(getattr(self.scenario.worker_client, name))

    # -- the FaultHost interface ------------------------------------------------------

    def now(self) -> int:
        return self.time.true_ms

    def draw_float(self) -> float:
        return self.rng.random()

    def draw_int(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def targets(self) -> list[Target]:
        return list(self.nodes.values())

    def log(self, kind: str, text: str) -> None:
        self.timeline.add(self.time.true_ms, "faults", kind, text)

    def fault(self, kind: str, node: str | None, start: bool, value: int) -> None:
        if kind == "broker":
            self._broker(up=not start)
            return
        if kind == "refuse":
            self.kafka.refusing = frozenset({TopicKind.RUNS}) if start else frozenset()
            return
        if kind == "runs_denied":
            self.kafka.denying = frozenset({TopicKind.RUNS}) if start else frozenset()
            return
        if kind in ("coordinator_busy", "results_refused"):
            self._worker_fault(kind, start)
            return
        assert node is not None
        target = self.nodes[node]
        if kind in ("crash", "worker_crash_mid_job"):
            if start:
                target.crash()
            else:
                target.start()
        elif kind == "pause":
            if start:
                target.pause()
            else:
                target.resume()
        elif kind == "skew":
            target.clock.step(value if start else -value)
            self.timeline.add(
                self.time.true_ms,
                node,
                "clock",
                f"clock now {target.clock.skew_ms:+d} ms off true time",
            )
            target.wake(self.time.true_ms)
        elif kind == "slow_job" and isinstance(target, WorkerNode):
            target.slow_factor = self.scenario.slow_factor if start else 1.0
        elif kind == "group_cut" and isinstance(target, WorkerNode):
            target.cut_from_group(start)

    def _broker(self, *, up: bool) -> None:
        now = self.time.true_ms
        if up == self.kafka.available:
            return
        self.kafka.available = up
        if not up:
            self.kafka.unavailable_since_ms = now
        if up:
            self.scheduler_group.broker_back(now)
            self.worker_group.broker_back(now)
            self.timeline.add(now, "broker", "broker", "answers again")
            for node in self.nodes.values():
                node.wake(now)
        else:
            self.timeline.add(now, "broker", "broker", "stops answering (every call fails)")
            for node in self.nodes.values():  # their leases start running out
                node.wake(now)

    def _worker_fault(self, kind: str, on: bool) -> None:
        faults = self.kafka.worker_faults
        if getattr(faults, kind) == on:
            return
        if kind == "coordinator_busy":
            faults.coordinator_busy = on
            text = "coordinators loading" if on else "coordinators answer again"
        else:
            faults.results_refused = on
            text = "refuses result batches" if on else "accepts result batches again"
        self.timeline.add(self.time.true_ms, "broker", kind, text)
        if not on:
            for node in self.nodes.values():
                node.wake(self.time.true_ms)

    # -- running -----------------------------------------------------------------

    def run(self) -> None:
        scenario = self.scenario
        start = scenario.start_ms
        self.at(start, self._submit)
        for spec in scenario.nodes:
            node = self.nodes[spec.name]
            self.at(start if spec.start_ms is None else spec.start_ms, node.start)
        for step in scenario.script:
            if step.action == "crash_job_worker":
                self.at(step.at_ms, self._crash_job_worker(step.job, step.restart_after_ms))
            elif step.action == "cancel_job_run":
                self.at(step.at_ms, self._cancel_job_run(step.job))
            elif step.action == "send":
                assert step.command is not None
                self.at(step.at_ms, self._send(step.command, step.created_before_ms))
            elif step.action == "stop":
                self.at(step.at_ms, self._scripted_stop(step.node, step.restart_after_ms))
            elif step.action == "pause_owner":
                assert step.shard is not None and step.restart_after_ms is not None
                self.at(step.at_ms, self._pause_owner(step.shard, step.restart_after_ms))
            else:
                self.at(step.at_ms, self._scripted(step.action, step.node, step.value))
        self.faults.install()
        self.at(scenario.heal_ms, self._heal)
        if scenario.compact_every_ms > 0:
            self.at(start + scenario.compact_every_ms, self._compact)
        self._loop(scenario.end_ms)

    def _loop(self, end_ms: int) -> None:
        heap = self._heap
        kafka = self.kafka
        groups = (self.scheduler_group, self.worker_group)
        while heap and heap[0][0] <= end_ms:
            next_ms = heap[0][0]
            # Sessions that expire and transactions that time out before the next event.
            if kafka.available:
                for group in groups:
                    expiry = group.next_expiry_ms()
                    if expiry is not None and expiry <= next_ms:
                        self.time.true_ms = max(self.time.true_ms, expiry)
                        for member in group.expire(expiry):
                            self.timeline.add(
                                expiry,
                                "broker",
                                "expire",
                                f"{group.name}: session of {member} expired; its partitions move",
                            )
                expired = kafka.expire(next_ms)
                for txn in expired:
                    self.timeline.add(
                        next_ms,
                        "broker",
                        "txn",
                        f"transaction of {txn.tx_id} epoch {txn.epoch} timed out and was aborted",
                    )
                    # Its partitions' last stable offset moved: their readers fetch on.
                    self.arrived(txn.first, next_ms)
            self._notice_rebalances()
            true_ms, _, action = heapq.heappop(heap)
            self.time.true_ms = max(self.time.true_ms, true_ms)
            action()
            self.events_run += 1
        self.time.true_ms = end_ms

    def _notice_rebalances(self) -> None:
        generations = (self.scheduler_group.generation, self.worker_group.generation)
        if generations == self._generations:
            return
        self._generations = generations
        for node in self.nodes.values():
            if node.state == "up":
                node.wake(self.time.true_ms + self.rng.randint(*REBALANCE_NOTICE_MS))

    def _submit(self) -> None:
        now = self.time.true_ms
        sample = self.scenario.sample
        for group in self.scenario.schedules:
            for schedule_id, body in _commands(group, sample):
                key = schedule_id.encode()
                value = exact_bytes(dumps(body))
                self.kafka.append(TopicKind.COMMANDS, key, value, None, now)
                self.submitted.append(Submitted(schedule_id, key, value, now))
        sampled = ""
        if sample is not None:
            population = sum(g.count for g in self.scenario.schedules)
            sampled = (
                f" (the schedules of sampled shards {list(sample.shards)}"
                f" of {sample.total}, out of {population:,})"
            )
        self.timeline.add(
            now,
            "client",
            "submit",
            f"{len(self.submitted):,} schedule.upsert commands sent{sampled}",
        )
        self.arrived(((TopicKind.COMMANDS, p) for p in range(self.scenario.shards)), now)

    def _scripted(self, action: str, node: str | None, value: int) -> Callable[[], None]:
        def step() -> None:
            self.timeline.add(
                self.time.true_ms,
                "script",
                "fault",
                f"{action}" + (f" {node}" if node else "") + (f" {value:+d} ms" if value else ""),
            )
            if action == "broker_down":
                self._broker(up=False)
            elif action == "broker_up":
                self._broker(up=True)
            elif action in ("coordinator_busy", "coordinator_ok"):
                self._worker_fault("coordinator_busy", action == "coordinator_busy")
            elif action in ("results_refused", "results_ok"):
                self._worker_fault("results_refused", action == "results_refused")
            elif action in ("group_cut", "group_ok"):
                target = self.nodes[node or ""]
                if isinstance(target, WorkerNode):
                    target.cut_from_group(action == "group_cut")
            elif action in ("closes_hang", "closes_ok"):
                self.kafka.closes_hang = action == "closes_hang"
            elif action == "crash_mid_commit":
                target = self.nodes[node or ""]
                if isinstance(target, WorkerNode):
                    target.dies_mid_commit = True
            else:
                assert node is not None
                target = self.nodes[node]
                if action in ("crash", "pause"):
                    getattr(target, action)()
                elif action == "restart":
                    target.crash()
                    target.start()
                elif action in ("resume", "start"):
                    getattr(target, action)()
                elif action == "leave":
                    self._leave(target)
                elif action == "skew":
                    target.clock.step(value)
                    target.wake(self.time.true_ms)

        return step

    def _scripted_stop(self, name: str | None, restart_after_ms: int | None) -> Callable[[], None]:
        def step() -> None:
            node = self.nodes[name or ""]
            self.timeline.add(self.time.true_ms, "script", "fault", f"stop {name} (SIGTERM)")
            self._stop_process(node, restart_after_ms)

        return step

    def _pause_owner(self, shard: int, resume_after_ms: int) -> Callable[[], None]:
        """Freeze the process serving ``shard`` now (a GC pause, a frozen VM)."""

        def step() -> None:
            now = self.time.true_ms
            for node in self.nodes.values():
                if isinstance(node, SchedulerNode) and node.state == "up" and shard in node.held():
                    self.timeline.add(
                        now,
                        "script",
                        "fault",
                        f"pause {node.name} (it serves shard {shard}) for "
                        f"{resume_after_ms / 1000:g} s",
                    )
                    node.pause()
                    self.at(now + resume_after_ms, node.resume)
                    return
            self.timeline.add(now, "script", "fault", f"nobody serves shard {shard}: no pause")

        return step

    def _crash_job_worker(
        self, job: str | None, restart_after_ms: int | None
    ) -> Callable[[], None]:
        def step() -> None:
            now = self.time.true_ms
            for node in self.nodes.values():
                if isinstance(node, WorkerNode) and any(
                    j.run.job.name == job for j in node.running.values()
                ):
                    self.timeline.add(
                        now, "script", "fault", f"kill -9 {node.name}, which is running {job}"
                    )
                    node.crash()
                    if restart_after_ms is not None:
                        self.at(now + restart_after_ms, node.start)
                    return
            self.timeline.add(now, "script", "fault", f"no worker is running {job}: no kill")

        return step

    def _cancel_job_run(self, job: str | None) -> Callable[[], None]:
        """An operator's ``run.cancel`` (as `kafkron run cancel` sends it) for the
        latest run of ``job`` on the runs topic."""

        def step() -> None:
            now = self.time.true_ms
            latest = None
            for _, _, entry in self.kafka.committed_records(TopicKind.RUNS):
                if entry.value is None or is_cancel(entry.value):
                    continue
                run = parse_run(entry.value)
                if run.job.name == job:
                    latest = run
            if latest is None:
                self.timeline.add(now, "script", "cancel", f"no run of {job} to cancel")
                return
            body = {
                "v": 1,
                "type": "run.cancel",
                "id": latest.schedule_id,
                "run_id": latest.run_id,
                "reason": "cancelled by an operator (scenario)",
            }
            self._append_command(body, now)
            self.timeline.add(now, "script", "cancel", f"run.cancel {latest.run_id}")

        return step

    def _send(self, body: dict[str, Any], created_before_ms: int) -> Callable[[], None]:
        """A client's command, appended now with the timestamp it was created with."""

        def step() -> None:
            now = self.time.true_ms
            self._append_command(body, now - created_before_ms)
            late = f", created {created_before_ms} ms earlier" if created_before_ms else ""
            self.timeline.add(now, "client", "send", f"{body['type']} {body.get('id')}{late}")

        return step

    def _append_command(self, body: dict[str, Any], created_ms: int) -> None:
        """A client's command, appended now (keyed by its schedule id) with the
        timestamp it was created with; the shards' consumers are woken."""
        now = self.time.true_ms
        key = str(body.get("id", "")).encode()
        value = exact_bytes(dumps(body))
        self.kafka.append(TopicKind.COMMANDS, key, value, None, now, created_ms)
        if body.get("type") == "schedule.backfill":  # its plan, for the backfill checker
            self.submitted.append(Submitted(str(body.get("id", "")), key, value, now))
        self.arrived(((TopicKind.COMMANDS, p) for p in range(self.scenario.shards)), now)

    def _leave(self, node: Node) -> None:
        """A clean stop: the process leaves the group, its partitions move at once."""
        group = self.scheduler_group if node.role == "scheduler" else self.worker_group
        member = node.member_id
        node.crash()
        if member is not None:
            group.leave(member)

    def _stop_process(self, node: Node, restart_after_ms: int | None) -> None:
        """A clean stop (SIGTERM, as a rolling deploy sends it): the process leaves the
        group (its partitions move at once), stops its clients and exits; the process
        manager starts it again ``restart_after_ms`` after the exit.

        A scheduler's open transaction is aborted here where the runtime lets it
        finish first: either is safe (an aborted fire is fired by the next owner),
        and the abort is the harder case for the shard that moves.

        A client stop waiting on a request the broker never answers (``closes_hang``)
        never returns by itself: the runtime bounds every close (`CLOSE_TIMEOUT_MS`,
        ``topics.closing``) and abandons the client, so the process exits anyway. A
        process that waited on it would stay up, doing nothing, forever: no heal
        restarts a process that has not exited.
        """
        now = self.time.true_ms
        if node.state != "up":
            return
        self._leave(node)
        node.state = "stopping"
        hangs = self.kafka.closes_hang
        if hangs and "unbounded-close" in self.broken:
            self.timeline.add(now, node.name, "stop", "stopping: a client's stop() never returns")
            return
        exit_ms = now + (CLOSE_TIMEOUT_MS if hangs else self.latency_ms())
        why = "its clients' stops abandoned" if hangs else "its clients stopped"
        self.timeline.add(now, node.name, "stop", "stopping: leaves the group, stops its clients")

        def exited() -> None:
            node.state = "down"
            self.timeline.add(exit_ms, node.name, "exit", f"process exited ({why})")
            if restart_after_ms is not None:
                self.at(exit_ms + restart_after_ms, node.start)

        self.at(exit_ms, exited)

    def _heal(self) -> None:
        now = self.time.true_ms
        healed = self.faults.heal_all()
        self._broker(up=True)
        self._worker_fault("coordinator_busy", False)
        self._worker_fault("results_refused", False)
        self.kafka.closes_hang = False  # a stop already waiting on a lost request still waits
        # A broker fault drawn to outlast the safety phase ends here: its own end is
        # clipped to this instant and finds it already forgotten by heal_all.
        self.kafka.refusing = frozenset()
        self.kafka.denying = frozenset()
        for node in self.nodes.values():
            if node.state == "paused":
                node.resume()
        for node in self.nodes.values():
            if isinstance(node, WorkerNode):
                node.slow_factor = 1.0
                node.cut_from_group(False)
            skew = node.clock.skew_ms
            spec = next(s for s in self.scenario.nodes if s.name == node.name)
            baseline = spec.offset_ms
            if skew != baseline and spec.drift_ppm == 0:
                node.clock.step(baseline - skew)
        for node in self.nodes.values():
            if node.state == "down":
                node.start()
        self.timeline.add(
            now,
            "faults",
            "heal",
            "liveness phase: every fault healed "
            f"({', '.join(healed) if healed else 'none active'}); "
            "the system must converge",
        )

    def _compact(self) -> None:
        dropped = self.kafka.compact(TopicKind.SCHEDULES)
        if dropped:
            self.timeline.add(
                self.time.true_ms,
                "broker",
                "compact",
                f"changelog compacted: {dropped:,} superseded records removed",
            )
        self.at(self.time.true_ms + self.scenario.compact_every_ms, self._compact)


def _commands(
    group: ScheduleGroup, sample: Sample | None
) -> Iterable[tuple[str, dict[str, object]]]:
    ids: Iterable[str]
    if sample is None:
        ids = (_schedule_id(group, i) for i in range(group.count))
    else:
        ids = _sampled_ids(group.id, group.count, sample)
    for schedule_id in ids:
        yield schedule_id, {"v": 1, "type": "schedule.upsert", "id": schedule_id, **group.command}


def _schedule_id(group: ScheduleGroup, i: int) -> str:
    return group.id.format(i=i) if group.count > 1 else group.id


@functools.lru_cache(maxsize=64)
def _sampled_ids(template: str, count: int, sample: Sample) -> tuple[str, ...]:
    """The ids of a group whose owner is a sampled shard: every id is hashed.

    Cached per process: the ids depend on the scenario alone, never on the seed,
    and hashing ten million ids costs half a minute.
    """
    shards = frozenset(sample.shards)
    total = sample.total
    out = []
    for i in range(count):
        schedule_id = template.format(i=i) if count > 1 else template
        if murmur2_partition(schedule_id.encode(), total) in shards:
            out.append(schedule_id)
    return tuple(out)
