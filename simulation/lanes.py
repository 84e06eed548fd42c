"""A herd of low-priority runs with a trickle of high ones, on one worker's two lanes
(docs/DESIGN.md §8.4, §10.3).

The scenario drives the worker's pure machine as the runtime does: two `WorkerCore`s,
one per lane (the queue's topic and its high lane topic), sharing one `SlotPool`. A
herd of low runs (priorities 0-4) is delivered at once on the normal lane and
saturates every slot; high runs (priorities 5-9) arrive on the high lane in bursts
spread over the herd's time. Jobs take a seeded time each; time is simulated, so a
seed replays exactly. The pool's wake-ups are carried out at the instant they are
asked for, as the runtime's ``call_soon`` does.

What it logs (`LaneLog`) is judged by `simulation.checkers.priority_lanes`: every high
run starts within its bound, the normal lane is never passed over more than K times
in a row, and each lane starts its highest waiting priority first.

This drives the worker's cores alone: the shard's routing to the lane topic is the
shard's (tests/shard/test_priority_routing.py), the broker's part is the real-broker
test (tests/broker/worker/test_priority_lanes_broker.py). Broken variants (each
judged caught by tests/simulation/test_sim_lanes.py): ``no-starvation-bound`` (the
pool never yields to the normal lane) and ``no-high-first`` (no lane goes first).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from actors.worker.core import Action, Outcome, RunKey, StartJob, WorkerCore
from actors.worker.lanes import NORMAL_EVERY_HIGH_STARTS, Lane, SlotPool
from topics.command_types import Job
from topics.messages import run_value
from topics.names import TopicKind
from topics.priority import MAX_PRIORITY
from topics.records import InRecord
from topics.vocabulary import RunStatus

BROKEN_VARIANTS = ("no-starvation-bound", "no-high-first")
_START_MS = 1_800_000_000_000
_HOUR_MS = 3_600_000
_SUCCEEDED = Outcome(RunStatus.SUCCEEDED)


@dataclass(frozen=True, slots=True)
class LaneScenario:
    seed: int
    concurrency: int = 4
    partitions: int = 3
    low_runs: int = 300
    high_runs: int = 40
    job_ms: tuple[int, int] = (20, 200)
    high_burst_max: int = 8
    """High runs come in bursts of 1 to this many (the first burst is this large)."""
    span_ms: int = 6_000
    """High bursts arrive within this long after the herd."""
    broken: str | None = None


@dataclass(frozen=True, slots=True)
class Start:
    at_ms: int
    lane: Lane
    run_id: str
    priority: int
    arrived_ms: int
    normal_waiting: bool
    """The normal lane held a run waiting for a slot when this one started."""
    waiting_above: int
    """Runs of this lane waiting then with a higher priority than this one's."""


@dataclass(frozen=True, slots=True)
class _Arrival:
    lane: Lane
    record: InRecord
    name: str
    priority: int


@dataclass(frozen=True, slots=True)
class _Exit:
    lane: Lane
    key: RunKey


@dataclass(slots=True)
class LaneLog:
    scenario: LaneScenario
    normal_every: int
    max_job_ms: int
    starts: list[Start] = field(default_factory=list)
    high_arrivals: int = 0
    low_arrivals: int = 0


def run_lanes(scenario: LaneScenario) -> LaneLog:
    """Play ``scenario`` to its end: every run started and exited."""
    rng = random.Random(scenario.seed)
    pool = SlotPool(
        scenario.concurrency,
        normal_every=None if scenario.broken == "no-starvation-bound" else NORMAL_EVERY_HIGH_STARTS,
        high_first=scenario.broken != "no-high-first",
    )
    cores = {
        lane: WorkerCore(
            worker=f"sim-{lane.name.lower()}",
            concurrency=scenario.concurrency,
            known_job=lambda name: True,
            now_ms=_START_MS,
            lease_loss_ms=100 * _HOUR_MS,
            pool=pool,
            lane=lane,
        )
        for lane in Lane
    }
    woken: list[Lane] = []

    def waker(lane: Lane) -> Callable[[], None]:
        return lambda: woken.append(lane)

    for lane, core in cores.items():
        pool.on_wake(lane, waker(lane))
        for partition in range(scenario.partitions):
            core.assign(partition, 0, None, _START_MS)
    log = LaneLog(scenario, NORMAL_EVERY_HIGH_STARTS, scenario.job_ms[1])
    # (at, order, seq, what): arrivals and exits; order puts exits first at an instant.
    events: list[tuple[int, int, int, _Arrival | _Exit]] = []
    seq = 0
    offsets = {lane: [0] * scenario.partitions for lane in Lane}
    arrived: dict[str, int] = {}
    priority_of: dict[str, int] = {}
    waiting = {lane: [0] * (MAX_PRIORITY + 1) for lane in Lane}  # arrived, not started

    def arrival(at_ms: int, lane: Lane, name: str, priority: int) -> None:
        nonlocal seq
        partition = rng.randrange(scenario.partitions)
        offset = offsets[lane][partition]
        offsets[lane][partition] += 1
        value = run_value(
            run_id=f"{name}@{at_ms}",
            schedule_id=name,
            task=None,
            scheduled_ms=at_ms,
            fired_ms=at_ms,
            attempt=1,
            job=Job("sim.work", {}, priority=priority),
            idempotency_key=name,
            deadline_ms=at_ms + _HOUR_MS,
        )
        record = InRecord(TopicKind.RUNS, partition, offset, name.encode(), value, at_ms)
        heapq.heappush(events, (at_ms, 1, seq, _Arrival(lane, record, name, priority)))
        seq += 1

    for i in range(scenario.low_runs):
        arrival(_START_MS, Lane.NORMAL, f"low-{i}", rng.randrange(0, 5))
    left, at_ms, burst = scenario.high_runs, _START_MS, scenario.high_burst_max
    while left > 0:
        at_ms += rng.randrange(1, max(2, scenario.span_ms * burst // scenario.high_runs))
        for _ in range(min(burst, left)):
            left -= 1
            arrival(at_ms, Lane.HIGH, f"high-{left}", rng.randrange(5, 10))
        burst = rng.randint(1, scenario.high_burst_max)

    def carry(now_ms: int, lane: Lane, actions: Iterable[Action]) -> None:
        nonlocal seq
        for action in actions:
            if not isinstance(action, StartJob):
                continue
            name = action.run.schedule_id
            mine = priority_of[name]
            waiting[lane][mine] -= 1
            log.starts.append(
                Start(
                    now_ms,
                    lane,
                    name,
                    mine,
                    arrived[name],
                    any(waiting[Lane.NORMAL]),
                    sum(waiting[lane][mine + 1 :]),
                )
            )
            took = rng.randint(*scenario.job_ms)
            heapq.heappush(events, (now_ms + took, 0, seq, _Exit(lane, action.key)))
            seq += 1

    while events:
        now_ms, _, _, what = heapq.heappop(events)
        lane = what.lane
        core = cores[lane]
        if isinstance(what, _Arrival):
            arrived[what.name] = now_ms
            priority_of[what.name] = what.priority
            waiting[lane][what.priority] += 1
            if lane is Lane.HIGH:
                log.high_arrivals += 1
            else:
                log.low_arrivals += 1
            carry(now_ms, lane, core.receive(what.record, now_ms))
        else:
            # The lane's exits due at this instant reach its core in one call, as the
            # executor hands over a turn's exits (ties kept in the heap's order).
            keys = [what.key]
            while events and events[0][0] == now_ms and events[0][1] == 0:
                nxt = events[0][3]
                if not isinstance(nxt, _Exit) or nxt.lane is not lane:
                    break
                heapq.heappop(events)
                keys.append(nxt.key)
            carry(now_ms, lane, core.jobs_exited([(k, _SUCCEEDED) for k in keys], now_ms))
        while woken:  # the pool's wake-ups, at once (the runtime's call_soon)
            other = woken.pop(0)
            carry(now_ms, other, cores[other].advance(now_ms))
        for each in cores.values():  # commits keep the open-run bookkeeping small
            for partition in range(scenario.partitions):
                commit = each.take_commit(partition)
                if commit is not None:
                    each.commit_done(commit)
    return log
