"""`kafkron audit --all` over a day of many schedules, against plain SQL over the same rows.

Builds a history database as the recorder would leave it: N schedules (default
100,000) created an hour before the day, each firing hourly (two fifths ``0 * * * *``,
two fifths ``every 1h``, one fifth ``H * * * *``, whose minute is the schedule's
own), every occurrence of the day a succeeded run with its first attempt, a few
hundred occurrences missed inside folded results, and a few runs deleted (planted
gaps). Then it times, in the same run:

- audit: `AuditSource.audit` over the day, every schedule (what ``kafkron audit --all``
  does, without printing);
- count: ``SELECT COUNT(*)`` of the runs in the day (the floor of touching the rows);
- scan: the audit's own ordered query, each row read into Python and dropped (the
  floor of the audit's reading).

Run: ``python bench/audit.py [--schedules N] [--db PATH]``. The last line is
``bench audit: ...`` with the seconds, the instants per second and the ratios to
the two baselines, or ``bench audit: could not measure: ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import orjson

from actors.history.audit import AuditSource
from actors.history.store import HistoryStore
from actors.shard.definition import definition_bytes
from actors.shard.state import definition_key
from topics.commands import ScheduleUpsert, decode_command
from topics.messages import run_id_for
from topics.timefmt import parse_instant

DAY_START_MS = parse_instant("2026-10-10T00:00:00Z")
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
PLANTED_GAPS = 3
FOLDED_EVERY = 997  # one schedule in this many missed its whole afternoon, folded
BUILD_TIMEOUT_S = 1800
PHASE_TIMEOUT_S = 600

SPECS: tuple[dict[str, Any], ...] = (
    {"cron": "0 * * * *", "tz": "UTC"},
    {"cron": "0 * * * *", "tz": "UTC"},
    {"every": "1h"},
    {"every": "1h"},
    {"cron": "H * * * *", "tz": "UTC"},
)


class PhaseTimeout(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise PhaseTimeout


def phase(name: str, timeout_s: int) -> None:
    print(f"[audit bench] {name} (timeout {timeout_s} s)", file=sys.stderr, flush=True)
    signal.alarm(timeout_s)


def upsert_of(schedule_id: str, spec: dict[str, Any]) -> ScheduleUpsert:
    body = {"v": 1, "type": "schedule.upsert", "id": schedule_id, "spec": spec}
    body["job"] = {"name": "bench.noop", "args": {}}
    command = decode_command(schedule_id.encode(), orjson.dumps(body), DAY_START_MS - HOUR_MS)
    assert isinstance(command, ScheduleUpsert), command
    return command


def build(path: Path, schedules: int) -> tuple[int, list[tuple[str, int]]]:
    """Fill ``path``; the runs of the day and the planted gaps."""
    asyncio.run(_schema(path))
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    defs: dict[str, str] = {}
    versions: list[tuple[Any, ...]] = []
    runs: list[tuple[Any, ...]] = []
    attempts: list[tuple[Any, ...]] = []
    planted: list[tuple[str, int]] = []
    total = 0
    compiled_shared: dict[str, Any] = {}
    created_ms = DAY_START_MS - HOUR_MS

    def flush() -> None:
        db.executemany(
            "INSERT INTO runs (run_id, schedule_id, job_name, scheduled_ms, fired_ms, "
            "started_ms, finished_ms, status, attempts, worker, covers_to_ms, covers_count) "
            "VALUES (?, ?, 'bench.noop', ?, ?, ?, ?, ?, 1, 'w-1', ?, ?)",
            runs,
        )
        db.executemany(
            "INSERT INTO attempts (run_id, attempt, schedule_id, job_name, scheduled_ms, "
            "fired_ms, started_ms, finished_ms, status, worker, covers_to_ms, covers_count) "
            "VALUES (?, 1, ?, 'bench.noop', ?, ?, ?, ?, ?, 'w-1', ?, ?)",
            attempts,
        )
        db.executemany(
            "INSERT INTO schedule_versions (schedule_id, partition, offset, effective_ms, "
            "def_key, paused, completed, created) VALUES (?, ?, ?, ?, ?, 0, NULL, 1)",
            versions,
        )
        db.commit()
        runs.clear()
        attempts.clear()
        versions.clear()

    for n in range(schedules):
        sid = f"bench-{n:07d}"
        spec = SPECS[n % len(SPECS)]
        command = upsert_of(sid, spec)
        def_bytes = definition_bytes(command)
        key = definition_key(def_bytes)
        defs.setdefault(key, def_bytes.decode())
        versions.append((sid, n % 6, n, created_ms, key))
        if "H" in spec.get("cron", ""):
            compiled = command.compiled
        else:
            compiled = compiled_shared.setdefault(key, command.compiled)
        at = compiled.next_after(DAY_START_MS - 1)
        folded = n % FOLDED_EVERY == 0
        while at is not None and at < DAY_START_MS + DAY_MS:
            total += 1
            if folded and at >= DAY_START_MS + 12 * HOUR_MS:
                last = compiled.next_after(DAY_START_MS + DAY_MS - HOUR_MS - 1)
                row: tuple[Any, ...] = (
                    run_id_for(sid, at),
                    sid,
                    at,
                    None,
                    None,
                    at + 5,
                    "missed",
                    last,
                    12,
                )
                runs.append(row)
                attempts.append(row)
                total += 11
                break
            if len(planted) < PLANTED_GAPS and n % (schedules // PLANTED_GAPS + 1) == 7:
                planted.append((sid, at))  # its run vanished
            else:
                fired, started = at + 3, at + 40 + (n % 9) * 700
                row = (run_id_for(sid, at), sid, at, fired, started, started + 90, "succeeded")
                runs.append((*row, None, None))
                attempts.append((*row, None, None))
            at = compiled.next_after(at)
        if len(runs) >= 200_000:
            flush()
            print(f"[audit bench] built {n + 1} schedules", file=sys.stderr, flush=True)
    flush()
    db.executemany("INSERT INTO definitions (def_key, def) VALUES (?, ?)", list(defs.items()))
    db.commit()
    db.execute("ANALYZE")
    db.close()
    return total, planted


async def _schema(path: Path) -> None:
    async with await HistoryStore.open(path, namespace="bench"):
        pass


def count_rows(path: Path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        (n,) = db.execute(
            "SELECT COUNT(*) FROM runs WHERE scheduled_ms >= ? AND scheduled_ms <= ?",
            (DAY_START_MS, DAY_START_MS + DAY_MS - 1),
        ).fetchone()
    return int(n)


def scan_rows(path: Path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows: Iterator[Any] = db.execute(
            "SELECT scheduled_ms, status, NULL, covers_to_ms, task, NULL, schedule_id "
            "FROM runs INDEXED BY runs_by_schedule_status "
            "WHERE scheduled_ms >= ? AND scheduled_ms <= ? ORDER BY schedule_id, scheduled_ms",
            (DAY_START_MS, DAY_START_MS + DAY_MS - 1),
        )
        return sum(1 for _ in rows)


def timed(fn: Any, *args: Any) -> tuple[float, Any]:
    began = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - began, value


def _planted(found: list[tuple[str, int]], planted: list[tuple[str, int]] | None) -> str:
    if planted is None:
        return "the database was reused: its planted gaps are unknown here"
    verdict = "all found, none else" if found == sorted(planted) else "NOT the gaps found"
    return f"planted {len(planted)}: {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--db", default=None, help="keep the database here (default: a temp dir)")
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.db) if args.db else Path(tmp) / "bench.db"
        try:
            if not path.exists():
                phase(f"building a day of {args.schedules} hourly schedules", BUILD_TIMEOUT_S)
                build_s, (instants, planted) = timed(build, path, args.schedules)
                print(
                    f"[audit bench] built {instants} instants in {build_s:.1f} s",
                    file=sys.stderr,
                )
            else:
                planted = None  # a database built by an earlier run: its gaps are its own
            phase("baseline: count", PHASE_TIMEOUT_S)
            count_s, rows = timed(count_rows, path)
            phase("baseline: ordered scan", PHASE_TIMEOUT_S)
            scan_s, _ = timed(scan_rows, path)
            phase("audit --all", PHASE_TIMEOUT_S)
            with AuditSource(path) as source:
                audit_s, report = timed(source.audit, DAY_START_MS, DAY_START_MS + DAY_MS - 1, None)
            signal.alarm(0)
        except PhaseTimeout:
            print("bench audit: could not measure: a phase exceeded its timeout")
            return
    found = sorted(report.gaps)
    print(
        f"audit --all: {report.schedules} schedules, {report.expected} instants"
        f" ({report.folded} in folded results), {report.gap_count} gaps"
        f" ({_planted(found, planted)})"
        f" in {audit_s:.2f} s; count {rows} rows in {count_s:.2f} s;"
        f" ordered scan {scan_s:.2f} s",
        file=sys.stderr,
    )
    print(
        f"bench audit: schedules={report.schedules} instants={report.expected}"
        f" audit_s={audit_s:.2f} instants_per_s={report.expected / audit_s:.0f}"
        f" vs_count={audit_s / count_s:.1f}x vs_scan={audit_s / scan_s:.1f}x"
        f" gaps={report.gap_count}"
    )


if __name__ == "__main__":
    main()
