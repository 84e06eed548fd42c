"""Scenarios: a TOML file says what world to build and what goes wrong in it.

Example (see ``simulation/scenarios/`` for the real ones)::

    name = "midnight-reboot"
    story = "The only scheduler reboots from 23:58 to 00:03."
    start = "2026-03-04T23:50:00Z"   # true time at the start
    safety_s = 1200                   # faults happen in this phase
    liveness_s = 900                  # then everything heals and must converge
    shards = 6                        # partitions of commands/schedules/results
    runs_partitions = 6
    lateness_bound_ms = 1000          # on-time bound once healed
    max_fires_per_turn = 5000         # the scheduler runtime's bound per shard and turn
    standbys = 0                      # shards each scheduler keeps warm (not owned)

    [[schedulers]]
    name = "sched-a"
    clock = { offset_ms = 0, drift_ppm = 0 }

    [[workers]]
    name = "worker-1"
    concurrency = 8

    [[schedules]]                     # one command per schedule, sent at the start
    id = "invoice-nightly"            # with count = N: a template, "{i}" the index
    [schedules.command]               # the body of its schedule.upsert
    spec = { cron = "0 0 * * *", tz = "Europe/London" }
    job = { name = "billing.invoice_nightly" }

    [jobs."billing.invoice_nightly"]
    duration_s = [60, 90]             # uniform
    fail_p = 0.0
    idempotent = true                 # effects go through the run's idempotency key
    fail_windows = [["2026-03-05T00:01:00Z", "2026-03-05T00:02:00Z", "EmailDown"]]

    [[script]]                        # faults at fixed instants
    at = "2026-03-04T23:58:00Z"
    action = "crash"                  # see SCRIPT_ACTIONS
    node = "sched-a"

    [faults]                          # random faults: probability per tick, minimum duration
    tick_ms = 1000
    crash = { p = 0.0005, min_s = 5 }

The ``command`` table is the body of a ``schedule.upsert`` (``v``, ``type`` and
``id`` are filled in) and goes through the real `topics.commands.decode_command`.

Fleet-sized worlds (``internet-midnight``) use four more keys::

    [[schedulers]]                    # with count = N: N nodes, "{i}" the index
    name = "sched-{i:02d}"
    count = 32

    [rolling_restart]                 # every node of a role, one at a time, in name order:
    at = "2026-01-14T23:58:00Z"       # kill -9 at at + k * every_s, started again
    every_s = 15                      # down_s later (a new member of the group)
    down_s = 5
    role = "scheduler"

    [sample]                          # simulate only some shards (see `Sample`)
    shards = 4

    [herd]                            # report the herd due at this instant (`simulation.herd`)
    at = "2026-01-15T00:00:00Z"
    window_s = 300

Kafka targets' topics (`simulation.targets`: they exist, and the schedulers may write them)::

    [targets]
    topics = { "orders.due" = 3 }     # topic -> partitions
    allowed = ["orders.*"]            # the schedulers' --target-topic patterns
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from simulation.targets import TargetWorld, target_world
from topics.timefmt import parse_instant

FAULT_KINDS = (
    "crash",  # a node's process dies; restarted after the duration
    "pause",  # SIGSTOP for the duration (a GC pause, a frozen VM)
    "broker",  # the broker does not answer for the duration
    "refuse",  # the broker refuses every batch to {ns}.runs inside a transaction
    "runs_denied",  # the schedulers' Write ACL on {ns}.runs is revoked for the duration
    "skew",  # one node's clock jumps by up to skew_max_ms for the duration
    "slow_job",  # jobs started on one worker run slow_factor times longer
    "worker_crash_mid_job",  # a worker running a job dies; restarted after the duration
    "coordinator_busy",  # InitProducerId and OffsetFetch answer COORDINATOR_LOAD_IN_PROGRESS
    "results_refused",  # the broker refuses workers' result batches (NOT_ENOUGH_REPLICAS)
    "group_cut",  # one worker cannot reach the group coordinator; produces go through
)
SCRIPT_ACTIONS = (
    "crash",
    "restart",
    "pause",
    "resume",
    "broker_down",
    "broker_up",
    "skew",
    "leave",
    "start",
    "crash_job_worker",  # kill the worker running ``job`` (restarted ``restart_after_s`` later)
    "cancel_job_run",  # an operator sends run.cancel for the latest run of ``job``
    "coordinator_busy",  # worker faults on (see FAULT_KINDS) ...
    "coordinator_ok",  # ... and off again
    "results_refused",
    "results_ok",
    "group_cut",  # worker ``node`` cannot reach the group coordinator ...
    "group_ok",  # ... and reaches it again
    "pause_owner",  # freeze whoever owns ``shard`` then (resumed ``restart_after_s`` later)
    "crash_mid_commit",  # worker ``node`` dies with its next transaction open (kill -9)
    "stop",  # ``node`` stops cleanly (SIGTERM); restarted ``restart_after_s`` after exit
    "closes_hang",  # a client's stop() begun from now on never returns by itself ...
    "closes_ok",  # ... until this (stops already waiting still wait)
    "send",  # a client sends ``command`` (a command body; ``v`` filled in), created
    # ``created_before_s`` before it is appended (a produce retried through a
    # leader change keeps its first timestamp, from which an upsert's look-back counts)
)


class ScenarioError(ValueError):
    """The scenario file is wrong; the message names the field."""


@dataclass(frozen=True, slots=True)
class FaultKnob:
    p: float  # probability per tick (per node for node faults)
    min_ms: int  # minimum duration; a drawn duration is in [min, 3 * min]


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    role: str  # "scheduler" | "worker"
    offset_ms: int = 0
    drift_ppm: float = 0.0
    concurrency: int = 8
    start_ms: int | None = None  # None: at the start; else joins at this instant


@dataclass(frozen=True, slots=True)
class JobModel:
    duration_ms: tuple[int, int] = (100, 1000)
    fail_p: float = 0.0
    idempotent: bool = True
    fail_windows: tuple[tuple[int, int, str], ...] = ()
    heartbeat_every_ms: int = 0
    """A sync job that checks in (``ctx.heartbeat()``) only this often: asked to stop,
    it runs on until its next check-in, then ends ``cancelled``. 0: it stops at once."""


@dataclass(frozen=True, slots=True)
class ScheduleGroup:
    id: str
    count: int
    command: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ScriptStep:
    at_ms: int
    action: str
    node: str | None = None
    value: int = 0  # skew: milliseconds added to the clock
    job: str | None = None  # crash_job_worker: the job whose worker dies
    restart_after_ms: int | None = None  # crash_job_worker, pause_owner: when it comes back
    shard: int | None = None  # pause_owner: the shard whose owner is frozen
    command: dict[str, Any] | None = None  # send: the command's body
    created_before_ms: int = 0  # send: its timestamp is this much before its append


@dataclass(frozen=True, slots=True)
class Sample:
    """Simulate ``shards`` of the scenario's shards, evenly spaced; the rest stay dark.

    A fleet of 10M schedules does not fit one process's memory and CPU when every
    schedule is a live object in a simulated shard; most of its shards behave
    alike, though. In a sampled run every shard exists, is assigned, fenced,
    restored and taken over by the real lifecycle machine, but only the schedules
    whose murmur2 partition is a sampled shard are submitted (exactly those of
    the full population: every id is generated and hashed, none is invented), so
    each sampled shard holds and fires exactly what it would in the full fleet,
    and every invariant is checked exactly on them. Dark shards are empty.

    Runs of the sampled shards spread over every runs partition, as in the full
    fleet, so each worker sees ``shards / total`` of its real load; its job slots
    are scaled by the same fraction (at least one) so that per-slot load, hence
    queueing and the herd's drain, stay those of the full fleet.
    """

    shards: tuple[int, ...]
    total: int

    @property
    def fraction(self) -> float:
        return len(self.shards) / self.total

    def slots(self, concurrency: int) -> int:
        return max(1, round(concurrency * self.fraction))


@dataclass(frozen=True, slots=True)
class Herd:
    """A herd the report describes: runs scheduled in [at, at + window)."""

    at_ms: int
    window_ms: int


@dataclass(frozen=True, slots=True)
class WorkerClient:
    """How the workers' Kafka client behaves (``[worker_client]``; defaults: promptly)."""

    join_ms: tuple[int, int] = (0, 0)
    """How long a rejoin (JoinGroup + SyncGroup) takes, drawn per rebalance: while it
    lasts no heartbeat is sent (a join waiting for a dead member's session)."""
    sync_wait_ms: tuple[int, int] = (0, 0)
    """How long a follower's SyncGroup waits for the leader's, drawn per rebalance:
    the broker answers the followers only when the slow leader's request arrives."""
    adopt_delay_ms: tuple[int, int] = (0, 0)
    """Extra time InitProducerId and the committed-offset read take, drawn per call."""
    fetch_during_adoption: bool = False
    """Records of a partition still being adopted are handed over (aiokafka returns
    records of a new assignment before the rebalance listener has run)."""
    max_result_bytes: int | None = None
    """Result records larger than this are refused (MESSAGE_TOO_LARGE)."""
    max_fetch_records: int | None = None
    """A fetch of a runs partition returns at most this many records (default 500):
    1 splits a run and its cancel record into two fetches."""


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    story: str
    start_ms: int
    safety_ms: int
    liveness_ms: int
    shards: int
    runs_partitions: int
    lateness_bound_ms: int
    session_timeout_ms: int
    nodes: tuple[NodeSpec, ...]
    schedules: tuple[ScheduleGroup, ...]
    jobs: dict[str, JobModel]
    script: tuple[ScriptStep, ...]
    fault_tick_ms: int = 1000
    faults: dict[str, FaultKnob] = field(default_factory=dict)
    max_fires_per_turn: int = 5_000
    standbys: int = 0
    skew_max_ms: int = 5_000
    slow_factor: float = 10.0
    compact_every_ms: int = 3_600_000
    worker_client: WorkerClient = WorkerClient()
    sample: Sample | None = None
    herd: Herd | None = None
    shrink: int = 1  # every schedule group's count was divided by this (`shrunk`)
    targets: TargetWorld = field(
        default_factory=TargetWorld
    )  # ``[targets]``: Kafka target topics (`targets`)
    path: str = ""

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.safety_ms + self.liveness_ms

    @property
    def heal_ms(self) -> int:
        return self.start_ms + self.safety_ms


def load(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(f"{path}: not valid TOML ({error})") from None
    try:
        return _scenario(data, str(path))
    except (KeyError, TypeError, ValueError) as error:
        raise ScenarioError(f"{path}: {error}") from None


def _instant(value: Any, name: str) -> int:
    try:
        return parse_instant(str(value))
    except ValueError:
        raise ScenarioError(f"{name}: {value!r} is not an RFC 3339 UTC instant") from None


def _scenario(data: dict[str, Any], path: str) -> Scenario:
    nodes = [
        NodeSpec(
            name=name,
            role=role,
            offset_ms=int(n.get("clock", {}).get("offset_ms", 0)),
            drift_ppm=float(n.get("clock", {}).get("drift_ppm", 0.0)),
            concurrency=int(n.get("concurrency", 8)),
            start_ms=_instant(n["start"], f"{n['name']}.start") if "start" in n else None,
        )
        for key, role in (("schedulers", "scheduler"), ("workers", "worker"))
        for n in data.get(key, [])
        for name in _names(n)
    ]
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ScenarioError(f"node names must be unique, got {names}")
    jobs = {
        name: JobModel(
            duration_ms=(
                int(float(j.get("duration_s", [0.1, 1])[0]) * 1000),
                int(float(j.get("duration_s", [0.1, 1])[1]) * 1000),
            ),
            fail_p=float(j.get("fail_p", 0.0)),
            idempotent=bool(j.get("idempotent", True)),
            heartbeat_every_ms=_non_negative_ms(j.get("heartbeat_every_s", 0), f"jobs.{name}"),
            fail_windows=tuple(
                (_instant(w[0], f"jobs.{name}.fail_windows"), _instant(w[1], name), str(w[2]))
                for w in j.get("fail_windows", [])
            ),
        )
        for name, j in data.get("jobs", {}).items()
    }
    schedules = tuple(
        ScheduleGroup(id=str(s["id"]), count=int(s.get("count", 1)), command=dict(s["command"]))
        for s in data.get("schedules", [])
    )
    script = []
    for step in data.get("script", []):
        action = str(step["action"])
        if action not in SCRIPT_ACTIONS:
            raise ScenarioError(f"script.action: {action!r} is not one of {SCRIPT_ACTIONS}")
        node = step.get("node")
        if node is not None and node not in names:
            raise ScenarioError(f"script.node: no node named {node!r} (nodes: {names})")
        restart = step.get("restart_after_s")
        shard = step.get("shard")
        if action == "pause_owner" and (shard is None or restart is None):
            raise ScenarioError("script: pause_owner needs shard and restart_after_s")
        workers = {n.name for n in nodes if n.role == "worker"}
        if action in ("crash_mid_commit", "group_cut", "group_ok") and node not in workers:
            raise ScenarioError(f"script: {action} needs node, one of {sorted(workers)}")
        if action == "stop" and node is None:
            raise ScenarioError(f"script: stop needs node, one of {names}")
        command = step.get("command")
        if action == "send" and not (isinstance(command, dict) and "type" in command):
            raise ScenarioError("script: send needs command, a table with a type")
        script.append(
            ScriptStep(
                _instant(step["at"], "script.at"),
                action,
                node,
                int(step.get("value", 0)),
                step.get("job"),
                None if restart is None else int(float(restart) * 1000),
                None if shard is None else int(shard),
                None if command is None else {"v": 1, **command},
                _non_negative_ms(step.get("created_before_s", 0), "script.created_before_s"),
            )
        )
    if "rolling_restart" in data:
        script.extend(_rolling_restart(data["rolling_restart"], nodes))
    raw_faults = dict(data.get("faults", {}))
    tick_ms = int(raw_faults.pop("tick_ms", 1000))
    skew_max_ms = int(raw_faults.pop("skew_max_ms", 5000))
    slow_factor = float(raw_faults.pop("slow_factor", 10.0))
    faults: dict[str, FaultKnob] = {}
    for kind, knob in raw_faults.items():
        if kind not in FAULT_KINDS:
            raise ScenarioError(f"faults.{kind}: unknown fault; known: {FAULT_KINDS}")
        faults[kind] = FaultKnob(float(knob["p"]), int(float(knob["min_s"]) * 1000))
    shards = int(data.get("shards", 6))
    sample = None
    if "sample" in data:
        sampled = int(data["sample"]["shards"])
        if not 1 <= sampled <= shards:
            raise ScenarioError(f"sample.shards: {sampled} is not in 1..{shards}")
        # Evenly spaced, so that no two neighbours of the range assignor are both
        # sampled (their takeovers would be correlated).
        sample = Sample(tuple(k * shards // sampled for k in range(sampled)), shards)
    herd = None
    if "herd" in data:
        herd = Herd(
            _instant(data["herd"]["at"], "herd.at"),
            int(float(data["herd"].get("window_s", 60)) * 1000),
        )
    return Scenario(
        worker_client=_worker_client(dict(data.get("worker_client", {}))),
        name=str(data["name"]),
        story=str(data.get("story", "")),
        start_ms=_instant(data["start"], "start"),
        safety_ms=int(float(data["safety_s"]) * 1000),
        liveness_ms=int(float(data.get("liveness_s", 600)) * 1000),
        shards=shards,
        runs_partitions=int(data.get("runs_partitions", shards)),
        lateness_bound_ms=int(data.get("lateness_bound_ms", 1000)),
        session_timeout_ms=int(data.get("session_timeout_ms", 10_000)),
        max_fires_per_turn=int(data.get("max_fires_per_turn", 5_000)),
        standbys=_standbys(data.get("standbys", 0)),
        nodes=tuple(nodes),
        schedules=schedules,
        jobs=jobs,
        script=tuple(sorted(script, key=lambda s: s.at_ms)),
        fault_tick_ms=tick_ms,
        faults=faults,
        skew_max_ms=skew_max_ms,
        slow_factor=slow_factor,
        compact_every_ms=int(float(data.get("compact_every_s", 3600)) * 1000),
        sample=sample,
        herd=herd,
        targets=target_world(data.get("targets", {})),
        path=path,
    )


def _standbys(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ScenarioError(f"standbys: a number of shards, 0 or more, got {value!r}")
    return value


def _seconds_range(value: Any, name: str) -> tuple[int, int]:
    """``2`` or ``[1, 3]`` seconds as a (low, high) range of milliseconds."""
    if isinstance(value, list | tuple):
        if len(value) != 2:
            raise ScenarioError(f"worker_client.{name}: give [low, high] seconds, got {value!r}")
        low, high = (int(float(v) * 1000) for v in value)
    else:
        low = high = int(float(value) * 1000)
    if not 0 <= low <= high:
        raise ScenarioError(f"worker_client.{name}: need 0 <= low <= high, got {value!r}")
    return low, high


def _worker_client(data: dict[str, Any]) -> WorkerClient:
    known = {
        "join_s",
        "sync_wait_s",
        "adopt_delay_s",
        "fetch_during_adoption",
        "max_result_bytes",
        "max_fetch_records",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise ScenarioError(f"worker_client: unknown keys {unknown}; known: {sorted(known)}")
    max_bytes = data.get("max_result_bytes")
    max_fetch = data.get("max_fetch_records")
    if max_fetch is not None and (not isinstance(max_fetch, int) or max_fetch < 1):
        raise ScenarioError(
            f"worker_client.max_fetch_records: need an integer >= 1, got {max_fetch!r}"
        )
    return WorkerClient(
        join_ms=_seconds_range(data.get("join_s", 0), "join_s"),
        sync_wait_ms=_seconds_range(data.get("sync_wait_s", 0), "sync_wait_s"),
        adopt_delay_ms=_seconds_range(data.get("adopt_delay_s", 0), "adopt_delay_s"),
        fetch_during_adoption=bool(data.get("fetch_during_adoption", False)),
        max_result_bytes=None if max_bytes is None else int(max_bytes),
        max_fetch_records=max_fetch,
    )


def _names(node: dict[str, Any]) -> list[str]:
    """A node's name, or with ``count = N`` the names of N nodes (``{i}`` the index)."""
    count = int(node.get("count", 1))
    name = str(node["name"])
    if count == 1:
        return [name]
    if "{i" not in name:
        raise ScenarioError(f"{name}: a node with count = {count} needs '{{i}}' in its name")
    return [name.format(i=i) for i in range(count)]


def _rolling_restart(table: dict[str, Any], nodes: list[NodeSpec]) -> list[ScriptStep]:
    """kill -9 each node of the role in name order, every ``every_s``; back ``down_s`` later."""
    role = str(table.get("role", "scheduler"))
    at_ms = _instant(table["at"], "rolling_restart.at")
    every_ms = int(float(table["every_s"]) * 1000)
    down_ms = int(float(table["down_s"]) * 1000)
    if every_ms <= 0 or down_ms <= 0:
        raise ScenarioError("rolling_restart: every_s and down_s must be positive")
    chosen = sorted(n.name for n in nodes if n.role == role)
    if not chosen:
        raise ScenarioError(f"rolling_restart.role: no {role} nodes to restart")
    steps = []
    for k, name in enumerate(chosen):
        killed_ms = at_ms + k * every_ms
        steps.append(ScriptStep(killed_ms, "crash", name))
        steps.append(ScriptStep(killed_ms + down_ms, "start", name))
    return steps


def shrunk(scenario: Scenario, divisor: int) -> Scenario:
    """The same world with each schedule group's count divided by ``divisor`` (at least 1).

    Everything else (nodes, faults, script, sample, herd) is kept: the small version
    of a fleet-sized scenario, for fast tests of its determinism and its broken variants.
    """
    if divisor < 1:
        raise ScenarioError(f"shrunk: divisor {divisor} must be at least 1")
    groups = tuple(
        ScheduleGroup(g.id, max(1, g.count // divisor), g.command) for g in scenario.schedules
    )
    return replace(
        scenario,
        schedules=groups,
        name=f"{scenario.name} (1/{divisor})",
        shrink=scenario.shrink * divisor,
    )


def _non_negative_ms(seconds: object, where: str) -> int:
    try:
        value = float(seconds)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ScenarioError(
            f"{where}: heartbeat_every_s must be a number, got {seconds!r}"
        ) from None
    if value < 0:
        raise ScenarioError(f"{where}: heartbeat_every_s must be >= 0, got {value}")
    return int(value * 1000)
