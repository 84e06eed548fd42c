"""A year of an every-minute schedule through `kafkron backfill --dry-run`'s plan.

525,600 occurrences of ``* * * * *`` in 2026 are planned against a history database
holding a year of that schedule's runs (mostly succeeded, every 97th dead-lettered,
a folded missed range of a day each month, every 1000th never fired), and every
line of the dry run is printed (to /dev/null): the spec's occurrences streamed,
joined with one ordered range query, each line formatted with its local wall time.
The baseline is croniter walking the same range in the same run (``get_next`` over
the year), so the ratio is plan / croniter.

Memory: the process's resident set is sampled every 52,560 planned occurrences
(a tenth of the year); the plan streams if it stays flat. The database is filled
through the ``runs`` table the planner reads (the recorder's other tables play no
part in a plan), in chunks, before the measurement.

Run: ``python bench/backfill_dry_run.py [--zone Europe/London]``. Progress goes to
stderr; the last line is ``bench backfill_dry_run: ...`` with the figures, or says
which phase could not be measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from croniter import croniter

from actors.cli.backfill_cmd import print_plan
from actors.history.past import SchedulePast
from actors.history.store import HistoryStore
from actors.shard.backfill_plan import Reprocess
from actors.timespec import compile_spec
from actors.views.backfill_planning import Target, plan

START = datetime(2026, 1, 1, tzinfo=UTC)
END = datetime(2027, 1, 1, tzinfo=UTC)
SCHEDULE = "bench-minute"
PHASE_TIMEOUT_S = 300
SAMPLE_EVERY = 52_560
MINUTE_MS = 60_000


class PhaseTimeout(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise PhaseTimeout


def rss_kib() -> int:
    """The current resident set, KiB (Linux /proc)."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * (os.sysconf("SC_PAGE_SIZE") // 1024)


def history_rows(start_ms: int, end_ms: int) -> Iterator[tuple[Any, ...]]:
    """The ``runs`` rows of a year: succeeded, some dead-lettered, one missed day a
    month folded into one result, a few never fired."""
    at = start_ms
    index = 0
    while at < end_ms:
        day = datetime.fromtimestamp(at / 1000, UTC)
        if day.day == 15 and day.hour == 0 and day.minute == 0:
            last = at + 86_400_000 - MINUTE_MS
            yield _row(at, "missed", 1, covers_to_ms=last, count=1440)
            at = last + MINUTE_MS
            index += 1440
            continue
        if index % 1000 != 999:
            status, attempts = ("dead_lettered", 5) if index % 97 == 0 else ("succeeded", 1)
            yield _row(at, status, attempts)
        at += MINUTE_MS
        index += 1


def _row(
    at: int, status: str, attempts: int, covers_to_ms: int | None = None, count: int | None = None
) -> tuple[Any, ...]:
    run_id = f"{SCHEDULE}@{at}"
    return (run_id, SCHEDULE, at, status, attempts, covers_to_ms, count)


def build_history(path: Path, start_ms: int, end_ms: int) -> int:
    asyncio.run(_create(path))
    db = sqlite3.connect(path)
    rows = history_rows(start_ms, end_ms)
    count = 0
    while True:
        chunk = [row for _, row in zip(range(20_000), rows, strict=False)]
        if not chunk:
            break
        db.executemany(
            "INSERT INTO runs (run_id, schedule_id, scheduled_ms, status, attempts, "
            "covers_to_ms, covers_count) VALUES (?, ?, ?, ?, ?, ?, ?)",
            chunk,
        )
        count += len(chunk)
        print(f"  history: {count} rows", file=sys.stderr)
    db.commit()
    db.close()
    return count


async def _create(path: Path) -> None:
    async with await HistoryStore.open(path, namespace="bench"):
        pass  # the schema, made by the recorder's own store


def measure_plan(path: Path, zone: str, start_ms: int, end_ms: int) -> dict[str, Any]:
    compiled = compile_spec({"cron": "* * * * *", "tz": zone}, schedule_id=SCHEDULE)
    target = Target(compiled, None if zone == "UTC" else _zone(zone), None, end_ms)
    samples: list[int] = []
    counts = 0
    with SchedulePast(path) as past:
        # Counting pass with samples of the resident set (the plan alone).
        for step in plan(past, SCHEDULE, target, start_ms, end_ms, Reprocess.FAILED):
            counts += 1
            if counts % SAMPLE_EVERY == 0:
                samples.append(rss_kib())
                print(f"  plan: {counts} occurrences, rss {samples[-1]} KiB", file=sys.stderr)
            del step
        began = time.perf_counter()
        with open(os.devnull, "w") as sink:
            totals = print_plan(
                past, SCHEDULE, target, start_ms, end_ms, Reprocess.FAILED, False, out=sink
            )
        dry_run_s = time.perf_counter() - began
    return {
        "occurrences": counts,
        "to_fire": totals.to_fire,
        "dry_run_s": dry_run_s,
        "rss_samples": samples,
    }


def _zone(name: str) -> Any:
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def measure_croniter(zone: str, end_ms: int) -> tuple[float, int]:
    from zoneinfo import ZoneInfo

    it = croniter("* * * * *", START.astimezone(ZoneInfo(zone)))
    end_s = end_ms / 1000
    count = 0
    began = time.perf_counter()
    first = START.timestamp()
    count = 1  # croniter's get_next is strictly after its start; the start is one
    while True:
        at = it.get_next(float)
        if at >= end_s:
            break
        count += 1
        if count % SAMPLE_EVERY == 0:
            print(f"  croniter: {count}", file=sys.stderr)
    assert first < end_s
    return time.perf_counter() - began, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zone", default="UTC", help="the schedule's zone (default UTC)")
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    start_ms, end_ms = int(START.timestamp() * 1000), int(END.timestamp() * 1000)
    phase = "history"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "history.db"
            print("phase history: filling a year of runs", file=sys.stderr)
            signal.alarm(PHASE_TIMEOUT_S)
            rows = build_history(path, start_ms, end_ms)
            phase = "plan"
            print("phase plan: the dry run of the year", file=sys.stderr)
            signal.alarm(PHASE_TIMEOUT_S)
            rss_before = rss_kib()
            result = measure_plan(path, args.zone, start_ms, end_ms)
            phase = "croniter"
            print("phase croniter: the same range", file=sys.stderr)
            signal.alarm(PHASE_TIMEOUT_S)
            croniter_s, croniter_count = measure_croniter(args.zone, end_ms)
            signal.alarm(0)
    except PhaseTimeout:
        print(f"bench backfill_dry_run: not measured: phase {phase} over {PHASE_TIMEOUT_S} s")
        return
    samples = result["rss_samples"]
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    growth = max(samples) - min(samples) if samples else 0
    print(
        f"history rows {rows}; occurrences {result['occurrences']} (croniter {croniter_count}); "
        f"to fire {result['to_fire']}; rss before plan {rss_before} KiB, "
        f"samples {samples}",
        file=sys.stderr,
    )
    print(
        f"bench backfill_dry_run: {result['occurrences']} occurrences in "
        f"{result['dry_run_s']:.2f} s (dry run, every line printed); croniter walk "
        f"{croniter_s:.2f} s; plan/croniter {result['dry_run_s'] / croniter_s:.2f}; "
        f"rss growth over the year {growth} KiB; peak rss {peak_kib // 1024} MiB"
    )


if __name__ == "__main__":
    main()
