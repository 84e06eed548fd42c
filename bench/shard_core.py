"""How fast one shard's pure core fires a herd and restores a changelog.

Two figures the issue sets targets for, each with a baseline measured in the same
run so the machine's noise cancels out of the ratio:

- ``advance``: N schedules come due within one second (a midnight herd); the
  runtime calls `ShardCore.advance` every 10 ms tick; what counts is due
  occurrences processed per second of time spent inside `advance`, everything
  included: the wheel, the run record (orjson), the idempotency key, the
  changelog record of each schedule, the deadline timer and the next fire.
  Baseline: ``heapq.heappop`` of the same number of (due, seq, item) entries.
  Target: >= 200k due/s.
- ``restore``: N changelog records (as the core writes them) fed to `restore`,
  then `finish_restore` (timers armed); orjson decoding included. Baseline:
  ``orjson.loads`` of the same records, keeping what it decodes (as any restore
  keeps its state). Target: >= 200k records/s.

The schedules are ``every 1h`` with 1,000 distinct anchors spread over the
second (so 1,000 distinct definitions, each shared by N/1,000 schedules), which
is what a herd of hourly jobs looks like. Memory per schedule after the restore
is reported from tracemalloc on a 100k-schedule sample. Times are CPU seconds of
this process (``time.process_time``), which a machine shared with other work
disturbs less than wall time.

Garbage collection is part of the cost: a shard holds millions of long-lived
objects, and CPython's default thresholds make the cyclic collector walk them
over and over while a herd allocates. ``--gc tuned`` (the default here, and what
the shard process should do) freezes the restored state (``gc.freeze``) and
raises the young-generation threshold; ``--gc default`` shows the difference.

Usage::

    python bench/shard_core.py [--schedules 1000000]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import heapq
import io
import pstats
import sys
import time
import tracemalloc

import measured
import orjson

from actors.shard import ShardCore
from actors.shard.definition import clear_caches
from actors.shard.state import is_definition_key
from topics.messages import parse_run, result_value
from topics.names import TopicKind
from topics.records import InRecord, OutRecord
from topics.timefmt import format_ms, parse_instant
from topics.vocabulary import RunStatus

T0 = parse_instant("2026-10-10T00:00:00Z")
ANCHORS = 1_000
TICK_MS = 10
HERD_MS = T0 + 3_600_000  # every schedule's next fire is in [HERD_MS, HERD_MS + 1 s)
RESTORE_MS = HERD_MS - 5_000


def changelog_records(count: int, version: int = 2) -> list[tuple[bytes, bytes]]:
    """Records as the core writes them: hourly, next fire in [HERD_MS, +1 s).

    Version 2 (what a shard whose schedules have fired holds): each schedule fired
    once an hour before the herd and its run succeeded, so its record is the small
    one, and the 1,000 definitions' own records come first. Version 1: the full
    records an upsert writes (what a changelog written before version 2 holds).
    """
    # Let a real core write one record per anchor, then vary the id (cheap setup).
    start_ms = HERD_MS - 3_600_000 - 10_000 if version == 2 else HERD_MS - 10_000
    core = ShardCore(partition=0, partitions=1, now_ms=start_ms)
    templates: list[dict[str, object]] = []
    for a in range(ANCHORS):
        body = {
            "v": 1,
            "type": "schedule.upsert",
            "id": f"template-{a}",
            "spec": {"every": "1h", "anchor": format_ms(T0 + a)},
            "job": {"name": "bench.hourly", "args": {"tenant": "t-1"}},
        }
        out = core.apply(
            InRecord(TopicKind.COMMANDS, 0, a, f"template-{a}".encode(), orjson.dumps(body)),
            start_ms,
        )
        templates.append(orjson.loads(out[-1].value or b""))
    records: list[tuple[bytes, bytes]] = []
    if version == 2:
        templates = []
        fired = core.advance(HERD_MS - 3_600_000 + 1_000)
        for i, record in enumerate(r for r in fired if r.topic is TopicKind.RUNS):
            run = parse_run(record.value or b"")
            result = result_value(
                run_id=run.run_id,
                schedule_id=run.schedule_id,
                task=None,
                attempt=1,
                status=RunStatus.SUCCEEDED,
                scheduled_ms=run.scheduled_ms,
                started_ms=run.fired_ms,
                finished_ms=run.fired_ms + 5,
                worker="w-1",
                error=None,
            )
            out = core.apply(
                InRecord(TopicKind.RESULTS, 0, i, run.schedule_id.encode(), result), run.fired_ms
            )
            templates.append(orjson.loads(out[-1].value or b""))
        records = [
            (key, value)
            for key, value in ((r.key or b"", r.value) for r in fired)
            if is_definition_key(key) and value is not None
        ]
        assert len(records) == ANCHORS and all(t["v"] == 2 for t in templates)
    for i in range(count):
        doc = dict(templates[i % ANCHORS])
        schedule_id = f"tenant-{i // 1000}/job-{i}"
        doc["id"] = schedule_id
        records.append((schedule_id.encode(), orjson.dumps(doc)))
    return records


def bench_restore(records: list[tuple[bytes, bytes]]) -> tuple[float, float, ShardCore]:
    gc.collect()
    gc.disable()
    start = time.process_time()
    decoded = [orjson.loads(value) for _, value in records]  # kept, as a restore keeps state
    loads_s = time.process_time() - start
    del decoded
    gc.enable()

    clear_caches()
    gc.collect()
    gc.disable()
    start = time.process_time()
    core = ShardCore(partition=0, partitions=1, now_ms=RESTORE_MS)
    for key, value in records:
        core.restore(key, value)
    out = core.finish_restore(RESTORE_MS)
    restore_s = time.process_time() - start
    gc.enable()
    # What the runtime does after a restore: the restored objects live as long as the
    # shard, so the cyclic collector should not walk them again and again.
    gc.freeze()
    schedules = sum(1 for key, _ in records if not is_definition_key(key))
    assert out == [] and core.stats["schedules"] == schedules
    return loads_s, restore_s, core


def bench_advance(
    core: ShardCore, count: int, profiler: cProfile.Profile | None = None
) -> tuple[float, int, int]:
    """Advance tick by tick through the herd's second; time inside `advance` only."""
    spent_s = 0.0
    runs = changelog = 0
    now = HERD_MS
    end = now + 1_000
    while now <= end:
        if profiler is not None:
            profiler.enable()
        start = time.process_time()
        out: list[OutRecord] = core.advance(now)
        spent_s += time.process_time() - start
        if profiler is not None:
            profiler.disable()
        for record in out:
            if record.topic.value == "runs":
                runs += 1
            elif record.topic.value == "schedules":
                changelog += 1
        now += TICK_MS
    assert runs == count, (runs, count)
    return spent_s, runs, changelog


def bench_heapq(count: int) -> float:
    heap = [(HERD_MS + (i % ANCHORS), i, None) for i in range(count)]
    heapq.heapify(heap)
    gc.collect()
    start = time.process_time()
    pop = heapq.heappop
    while heap:
        pop(heap)
    return time.process_time() - start


def bytes_per_schedule(records: list[tuple[bytes, bytes]]) -> float:
    sample = records[: min(100_000, len(records))]
    clear_caches()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    core = ShardCore(partition=0, partitions=1, now_ms=RESTORE_MS)
    for key, value in sample:
        core.restore(key, value)
    core.finish_restore(RESTORE_MS)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del core
    return (after - before) / sum(1 for key, _ in sample if not is_definition_key(key))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument(
        "--gc",
        choices=("tuned", "default"),
        default="tuned",
        help="tuned: what a shard process should do (freeze the restored state, collect "
        "the young generation every 100k allocations); default: Python's thresholds",
    )
    parser.add_argument(
        "--changelog",
        type=int,
        choices=(1, 2),
        default=2,
        help="the record format restored: 2, what a shard writes once its schedules "
        "fired (small records and one record per definition); 1, the full records of "
        "a changelog written before version 2",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print cProfile's top 20 functions (by own time) of the advance phase to "
        "stderr; the rates printed are then the profiler's, not the core's",
    )
    measured.add_record_option(parser)
    args = parser.parse_args()
    count = args.schedules
    if count < ANCHORS:
        parser.error(f"--schedules must be at least {ANCHORS} (one per anchor)")

    print(f"building {count:,} changelog records ...", flush=True)
    records = changelog_records(count, args.changelog)
    per_schedule_b = bytes_per_schedule(records)
    loads_s, restore_s, core = bench_restore(records)
    restored = len(records)
    restore_rate = restored / restore_s
    print(
        f"restore: {restored:,} records (v{args.changelog}) in {restore_s:.2f} s = "
        f"{restore_rate:,.0f} records/s (bare orjson.loads: {restored / loads_s:,.0f}/s, "
        f"ratio {loads_s / restore_s:.2f}); "
        f"{per_schedule_b:,.0f} bytes per restored schedule"
    )
    del records
    heap_s = bench_heapq(count)
    if args.gc == "tuned":
        gc.set_threshold(100_000, 50, 100)
    profiler = cProfile.Profile() if args.profile else None
    advance_s, runs, changelog = bench_advance(core, count, profiler)
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(20)
        print(text.getvalue(), file=sys.stderr)
    advance_rate = runs / advance_s
    print(
        f"advance: {runs:,} due in one second processed in {advance_s:.2f} s = "
        f"{advance_rate:,.0f} due/s ({changelog:,} changelog records); "
        f"heapq pop baseline {count / heap_s:,.0f}/s, ratio {advance_rate / (count / heap_s):.3f}"
    )
    print(
        f"bench shard_core: schedules={count} changelog=v{args.changelog} gc={args.gc} "
        f"advance_due_per_s={advance_rate:.0f} "
        f"advance_target_met={advance_rate >= 200_000} "
        f"heapq_pop_per_s={count / heap_s:.0f} "
        f"advance_vs_heapq={advance_rate / (count / heap_s):.3f} "
        f"restore_records_per_s={restore_rate:.0f} restore_target_met={restore_rate >= 200_000} "
        f"orjson_loads_per_s={restored / loads_s:.0f} "
        f"restore_vs_loads={loads_s / restore_s:.3f} "
        f"bytes_per_schedule={per_schedule_b:.0f}"
    )
    measured.record(
        "shard_core",
        {
            "schedules": count,
            "advance_due_per_s": round(advance_rate),
            "restore_records_per_s": round(restore_rate),
            "bytes_per_schedule": round(per_schedule_b),
        },
        argv=sys.argv[1:],
        to=args.record,
    )


if __name__ == "__main__":
    main()
