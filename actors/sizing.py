"""Sizing a kafkron cluster from what the benchmarks measured: `kafkron plan`.

A pure function of the question (schedules, herd, deadline, brokers) and of the
figures the benchmarks left in ``bench/measured.json`` (see ``bench/measured.py``);
nothing per process is typed in here. The model, and why:

- **Herd rate** ``M / S``: the herd must be fired, run and its results committed
  within the deadline.
- **Scheduler processes**: the most of (a) the herd rate over one process's
  measured sustained fire rate (``e2e_fire``: committed runs/s), derated; (b) the
  takeover bound: with the range assignor and eager rebalancing a rebalance may
  move nearly every shard, so a process may have to restore its whole share,
  ``N / P`` schedules at the measured end-to-end restore rate (``e2e_fire``), within
  a quarter of the deadline; (c) two, so a takeover has somewhere to go.
- **Shards**: the next power of two of at least four per scheduler process:
  partitions cannot be added without moving schedules between shards, so there
  is room to scale out four times; a shard is served by one process at a time.
- **Worker processes**: the herd rate over one worker process's measured rate with
  no scheduler in the path (``e2e_work``: workers alone), derated. Real jobs take
  longer than the benchmark's no-op ones: this is the floor, size for your jobs.
- **Memory per scheduler process**: its share during a rolling restart (``N / (P-1)``:
  one peer's shards are spread over the others) times the measured bytes per
  restored schedule (``shard_core``, tracemalloc), times a margin.
- **Expected takeover**: the measured failover without its restore (``e2e_fire``:
  first fire by the new owner, minus the restore of its schedules), plus the
  restore of one process's share at the measured rate.

Without ``e2e_fire`` figures (it needs a quiet machine: its phases wait a bounded
time), the plan says so and uses the pure core's fire and restore rates
(``shard_core``, upper bounds: no broker round trip in them) and the session
timeout as the whole failover overhead.
- **Broker load**: four records per run (the run and its changelog record at the
  fire, the result and its changelog record when the shard reads it) at the herd
  rate, against the brokers' measured transactional ceiling (``broker_ceiling``:
  one producer, batched, 1,000 records per transaction, one broker), derated.

The margins (`Margins`) are printed with the plan: a benchmark is one quiet
machine; a herd meets restarts, outages and a busy neighbour (the
``internet-midnight`` simulation shows two broker outages and a rolling restart
stretching a herd's drain).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

RECORDS_PER_RUN = 4  # run + changelog at the fire, result + changelog when read


class MissingFigure(ValueError):
    """A figure the plan needs was never measured; the message says what to run."""


@dataclass(frozen=True, slots=True)
class Margins:
    throughput: float = 0.5  # plan each process at this fraction of its measured rate
    memory: float = 2.0  # tracemalloc's bytes -> resident: allocator, fragmentation, buffers
    takeover_share: float = 0.25  # a takeover's restore fits in this share of the deadline
    shards_per_scheduler: int = 4  # room to scale out without repartitioning


@dataclass(frozen=True, slots=True)
class Input:
    name: str
    value: float
    unit: str
    source: str  # "bench e2e_fire max_runs_s (measured at ..., N CPUs)"


@dataclass(frozen=True, slots=True)
class Plan:
    schedules: int
    herd: int
    deadline_s: float
    brokers: int
    inputs: list[Input]
    margins: Margins
    herd_rate: float
    schedulers: int
    schedulers_for_herd: int
    schedulers_for_takeover: int
    shards: int
    workers: int
    memory_per_scheduler_bytes: float
    takeover_s: float
    broker_records_per_s: float
    broker_capacity_per_s: float
    brokers_needed: int

    def as_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__slots__ if k not in ("inputs", "margins")}
        out["inputs"] = [
            {"name": i.name, "value": i.value, "unit": i.unit, "source": i.source}
            for i in self.inputs
        ]
        m = self.margins
        out["margins"] = {
            "throughput": m.throughput,
            "memory": m.memory,
            "takeover_share": m.takeover_share,
            "shards_per_scheduler": m.shards_per_scheduler,
        }
        return out

    def text(self) -> str:
        m = self.margins
        lines = [
            f"kafkron plan: {self.schedules:,} schedules, {self.herd:,} due at one instant, "
            f"drained within {self.deadline_s:g} s, {self.brokers} broker(s)",
            "",
            "measured inputs (bench/measured.json)",
        ]
        lines += [f"  {i.name:<44} {i.value:>10,.0f} {i.unit:<10} {i.source}" for i in self.inputs]
        lines += [
            "",
            "safety margins applied",
            f"  throughput   each process planned at {m.throughput:.0%} of its measured rate",
            f"  memory       x{m.memory:g} over the measured bytes per schedule, and a process"
            " holds a departed peer's share (N / (P - 1))",
            f"  takeover     a process restores its whole share within {m.takeover_share:.0%}"
            " of the deadline",
            f"  shards       at least {m.shards_per_scheduler} per scheduler process, a power"
            " of two (scale out without repartitioning)",
            "",
            "plan",
            f"  herd rate                    {self.herd_rate:>12,.0f} runs/s",
            f"  scheduler processes          {self.schedulers:>12,}   (herd needs "
            f"{self.schedulers_for_herd}, takeover bound {self.schedulers_for_takeover}, "
            "at least 2)",
            f"  shards (partitions)          {self.shards:>12,}",
            f"  worker processes             {self.workers:>12,}   (no-op jobs: the floor)",
            f"  memory per scheduler process {self.memory_per_scheduler_bytes / 2**30:>12,.1f} GiB",
            f"  expected takeover            {self.takeover_s:>12,.1f} s",
            f"  broker load at the herd      {self.broker_records_per_s:>12,.0f} records/s",
            f"  broker capacity planned      {self.broker_capacity_per_s:>12,.0f} records/s   "
            f"({self.brokers} x one producer's measured rate, derated: a floor)",
        ]
        if self.brokers_needed > self.brokers:
            lines.append(
                f"  WARNING: {self.brokers} broker(s) cannot take the herd's writes at the "
                f"planned margin; {self.brokers_needed} would"
            )
        return "\n".join(lines) + "\n"


def plan(
    measured: dict[str, Any],
    *,
    schedules: int,
    herd: int,
    deadline_s: float,
    brokers: int = 3,
    margins: Margins = Margins(),  # frozen: one shared default is safe
) -> Plan:
    if schedules < 1 or herd < 0 or herd > schedules:
        raise ValueError("--schedules must be >= 1 and --herd between 0 and --schedules")
    if deadline_s <= 0 or brokers < 1:
        raise ValueError("--deadline must be > 0 s and --brokers >= 1")
    bytes_per_schedule = _figure(measured, "shard_core", "bytes_per_schedule")
    worker_total = _figure(measured, "e2e_work", "workers_alone_runs_per_s")
    bench_workers = _figure(measured, "e2e_work", "workers")
    broker_txn = _figure(measured, "broker_ceiling", "txn1000_msgs_s")
    worker_rate = worker_total / bench_workers
    if "e2e_fire" in measured:
        fire_rate = _figure(measured, "e2e_fire", "max_runs_s")
        e2e_restore_s = _figure(measured, "e2e_fire", "restore_s")
        e2e_schedules = _figure(measured, "e2e_fire", "schedules")
        failover_s = _figure(measured, "e2e_fire", "failover_first_fire_s")
        restore_rate = e2e_schedules / e2e_restore_s
        overhead_s = max(0.0, failover_s - e2e_restore_s)
        inputs = [
            Input(
                "fires/s, one scheduler process",
                fire_rate,
                "runs/s",
                _src(measured, "e2e_fire", "max_runs_s"),
            ),
            Input(
                "restore, end to end",
                restore_rate,
                "records/s",
                _src(measured, "e2e_fire", "restore_s")
                + f" ({e2e_schedules:,.0f} in {e2e_restore_s:g} s)",
            ),
            Input(
                "failover to first fire, minus restore",
                overhead_s,
                "s",
                _src(measured, "e2e_fire", "failover_first_fire_s"),
            ),
        ]
    else:
        # No end-to-end figures: the pure core's rates, an upper bound (no broker round
        # trips in them), and the session timeout as the whole failover overhead.
        from actors.scheduler.runtime import RuntimeOptions

        fire_rate = _figure(measured, "shard_core", "advance_due_per_s")
        restore_rate = _figure(measured, "shard_core", "restore_records_per_s")
        overhead_s = RuntimeOptions().session_timeout_ms / 1000
        inputs = [
            Input(
                "fires/s, the shard core alone (no e2e_fire)",
                fire_rate,
                "runs/s",
                _src(measured, "shard_core", "advance_due_per_s") + "; an upper bound",
            ),
            Input(
                "restore, the shard core alone (no e2e_fire)",
                restore_rate,
                "records/s",
                _src(measured, "shard_core", "restore_records_per_s") + "; an upper bound",
            ),
            Input(
                "failover overhead: the session timeout",
                overhead_s,
                "s",
                "RuntimeOptions default; bench e2e_fire measures the real one",
            ),
        ]
    inputs += [
        Input("bytes per restored schedule", bytes_per_schedule, "B",
              _src(measured, "shard_core", "bytes_per_schedule")),
        Input("worker runs/s, one process", worker_rate, "runs/s",
              _src(measured, "e2e_work", "workers_alone_runs_per_s")
              + f" / {bench_workers:g} workers"),
        Input("broker transactional ceiling", broker_txn, "records/s",
              _src(measured, "broker_ceiling", "txn1000_msgs_s")),
    ]  # fmt: skip
    herd_rate = herd / deadline_s
    for_herd = math.ceil(herd_rate / (fire_rate * margins.throughput))
    budget_s = deadline_s * margins.takeover_share
    for_takeover = math.ceil(schedules / (restore_rate * budget_s))
    schedulers = max(for_herd, for_takeover, 2)
    shards = 1 << max(0, math.ceil(math.log2(schedulers * margins.shards_per_scheduler)))
    workers = max(2, math.ceil(herd_rate / (worker_rate * margins.throughput)))
    memory = schedules / (schedulers - 1) * bytes_per_schedule * margins.memory
    restore_share_s = schedules / schedulers / restore_rate
    takeover_s = overhead_s + restore_share_s
    broker_load = herd_rate * RECORDS_PER_RUN
    per_broker = broker_txn * margins.throughput
    return Plan(
        schedules=schedules,
        herd=herd,
        deadline_s=deadline_s,
        brokers=brokers,
        inputs=inputs,
        margins=margins,
        herd_rate=herd_rate,
        schedulers=schedulers,
        schedulers_for_herd=for_herd,
        schedulers_for_takeover=for_takeover,
        shards=shards,
        workers=workers,
        memory_per_scheduler_bytes=memory,
        takeover_s=takeover_s,
        broker_records_per_s=broker_load,
        broker_capacity_per_s=per_broker * brokers,
        brokers_needed=math.ceil(broker_load / per_broker),
    )


def _figure(measured: dict[str, Any], bench: str, key: str) -> float:
    try:
        value = measured[bench]["figures"][key]
    except (KeyError, TypeError):
        raise MissingFigure(
            f"no {key} from bench/{bench}.py in the measured figures; run "
            f"`python bench/{bench}.py` from the project root (it records its figures)"
        ) from None
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise MissingFigure(f"bench/{bench}.py recorded {key}={value!r}: not a positive number")
    return float(value)


def _src(measured: dict[str, Any], bench: str, key: str) -> str:
    entry = measured[bench]
    return f"{bench} {key} ({entry.get('measured_at', '?')}, {entry.get('cpus', '?')} CPUs)"
