"""The worker's pure core alone: runs received, started, exited and committed, per second.

`bench/e2e_work.py` measures the whole path (scheduler, broker, workers) and on two
cores shared by five processes its figures swing by a third from run to run, more
than any change to the worker could. This one measures what a change to the worker
core costs, without Kafka, an event loop or another process: ``--runs`` run
records (as a shard writes them, spread over ``--partitions``) are fed to one
`WorkerCore` in fetches of ``--fetch`` records; after each fetch every job started
exits at once (a no-op), and each partition's results are taken and committed, as
the runtime does after a turn. The clock is this process's CPU time (best of
``--repeats``), which other work on the machine disturbs far less than wall time.

Baseline, in the same run: ``orjson.loads`` of the same run values, the least any
worker must do per run; the ratio is the core's rate over that one.

The runs name none of the optional job fields (queue, priority, concurrency key,
rate limit), so the figure is what those features cost unused: `bench/compare.py
--bench worker_core OLD` runs this script against an older commit's code too (it
drives only the core's API that both sides have).

    python bench/worker_core.py [--runs 30000] [--partitions 6] [--fetch 500]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

import orjson

from actors.worker.core import Outcome, StartJob, WorkerCore
from topics.command_types import Job
from topics.messages import idempotency_key, run_id_for, run_value
from topics.names import TopicKind
from topics.records import InRecord
from topics.vocabulary import RunStatus

T0 = 1_790_000_000_000
LEASE_MS = 10_000
TIMEOUT_S = 600  # the whole phase: a run this slow could not measure anything


def records(runs: int, partitions: int) -> list[InRecord]:
    """``runs`` no-op runs of as many schedules, round robin over the partitions."""
    out = []
    for i in range(runs):
        schedule_id = f"s{i}"
        run_id = run_id_for(schedule_id, T0)
        value = run_value(
            run_id=run_id,
            schedule_id=schedule_id,
            task=None,
            scheduled_ms=T0,
            fired_ms=T0,
            attempt=1,
            job=Job("noop", {}),
            idempotency_key=idempotency_key(run_id),
            deadline_ms=T0 + 600_000,
        )
        partition = i % partitions
        out.append(
            InRecord(TopicKind.RUNS, partition, i // partitions, schedule_id.encode(), value)
        )
    return out


def drive(batch: list[InRecord], partitions: int, concurrency: int, fetch: int) -> float:
    """CPU seconds of one core taking every record of ``batch`` to a committed result."""
    core = WorkerCore(
        worker="bench",
        concurrency=concurrency,
        known_job=lambda name: True,
        now_ms=T0,
        lease_loss_ms=LEASE_MS,
    )
    for partition in range(partitions):
        core.assign(partition, 0, None, T0)
    ok = Outcome(RunStatus.SUCCEEDED)
    by_turn = hasattr(core, "jobs_exited")
    now_ms = T0 + 1
    committed = 0
    started_s = time.process_time()
    for first in range(0, len(batch), fetch):
        running = []
        for record in batch[first : first + fetch]:
            for action in core.receive(record, now_ms):
                if isinstance(action, StartJob):
                    running.append(action.key)
        while running:  # every job exits in the turn it started; exits start the next
            exited, running = running, []
            if by_turn:  # as the runtime reports them: a turn's exits in one call
                actions = core.jobs_exited([(key, ok) for key in exited], now_ms)
            else:  # a commit older than `jobs_exited`: one call per exit
                actions = [a for key in exited for a in core.job_exited(key, ok, now_ms)]
            running = [action.key for action in actions if isinstance(action, StartJob)]
        for partition in range(partitions):
            commit = core.take_commit(partition)
            if commit is not None:
                committed += len(commit.results)
                core.commit_done(commit)
        now_ms += 1
        core.lease_renewed(now_ms)
    spent_s = time.process_time() - started_s
    if committed != len(batch):
        raise SystemExit(f"bench worker_core: could not measure: {committed} of {len(batch)}")
    return spent_s


def loads_s(batch: list[InRecord]) -> float:
    started_s = time.process_time()
    kept = [orjson.loads(record.value) for record in batch]
    spent_s = time.process_time() - started_s
    del kept
    return spent_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--fetch", type=int, default=500, help="records per fetch")
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    deadline_s = time.monotonic() + TIMEOUT_S
    batch = records(args.runs, args.partitions)
    gc.collect()
    core_s, base_s = [], []
    for repeat in range(args.repeats):
        if time.monotonic() > deadline_s:
            print(f"bench worker_core: could not measure within {TIMEOUT_S} s")
            return
        core_s.append(drive(batch, args.partitions, args.concurrency, args.fetch))
        base_s.append(loads_s(batch))
        print(
            f"repeat {repeat + 1}/{args.repeats}: core {args.runs / core_s[-1]:,.0f} runs/s,"
            f" orjson.loads {args.runs / base_s[-1]:,.0f}/s",
            file=sys.stderr,
        )
    core_per_s = args.runs / min(core_s)
    loads_per_s = args.runs / min(base_s)
    print(
        f"bench worker_core: runs={args.runs} partitions={args.partitions} fetch={args.fetch}"
        f" concurrency={args.concurrency} runs_per_s={core_per_s:.0f}"
        f" orjson_loads_per_s={loads_per_s:.0f} core_vs_loads={core_per_s / loads_per_s:.3f}"
    )


if __name__ == "__main__":
    main()
