"""A concurrency key on the real broker (docs/DESIGN.md §8.2): 200 runs of one key at
limit 2, three workers, two of them killed (kill -9) while running the key's runs and
a third joining: at most 2 of the key's jobs at any moment, by the jobs' own start/end
log, and every run ended by one visible result."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.kit.worker import (
    T0,
    WorkerProcess,
    owner_of,
    produce,
    results,
    run_record,
    wait_for_results,
    wait_marks,
)
from topics.concurrency import Concurrency
from topics.messages import run_id_for
from topics.names import Settings
from topics.partitioner import murmur2_partition

RUNS = 200
LIMIT = 2
KEY = "customer-42"
PARTITIONS = 3
SESSION_MS = 6_000


def keyed_runs() -> list[tuple[bytes, bytes]]:
    """200 runs of 200 schedules, all naming the key, as the shard writes them."""
    concurrency = Concurrency(KEY, LIMIT)
    return [
        run_record(
            f"invoice-{i}",
            "test.keyed_sleep",
            {"seconds": 0.3},
            timeout_s=600,
            concurrency=concurrency,
        )
        for i in range(RUNS)
    ]


def most_at_once(log: list[str]) -> tuple[int, str]:
    """The most jobs of the key running at once by the log (start, end, and the test's
    ``killed W`` lines: a killed worker's jobs end with it), and where."""
    running: set[tuple[str, str]] = set()
    most, where = 0, ""
    for line in log:
        parts = line.split(" ")
        if parts[0] == "killed":
            running = {job for job in running if job[1] != parts[1]}
        elif parts[0] == "start":
            running.add((f"{parts[1]}#{parts[2]}", parts[3]))
            if len(running) > most:
                most, where = len(running), ", ".join(sorted(f"{r}@{w}" for r, w in running))
        elif parts[0] == "end":
            running.discard((f"{parts[1]}#{parts[2]}", parts[3]))
    return most, where


@pytest.mark.kafka_partitions(3, runs=PARTITIONS)
async def test_a_key_at_limit_2_through_two_kills_and_a_join(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    partition = murmur2_partition(KEY.encode(), PARTITIONS)
    marks_path = tmp_path / "marks.log"
    workers = [
        WorkerProcess(kafka_settings, tmp_path, name, session_timeout_ms=SESSION_MS)
        for name in ("w1", "w2")
    ]
    try:
        await produce(kafka_settings, keyed_runs(), partition=partition)
        for kill in range(2):
            # Wait until the key's partition is being worked, then kill its owner.
            before = len(marks_path.read_text().splitlines()) if marks_path.exists() else 0
            await wait_marks(tmp_path, lambda ms, n=before: len(ms) >= n + 20, timeout_s=120)
            victim = owner_of(workers, partition)
            assert victim is not None, "nobody owns the key's partition"
            victim.signal(signal.SIGKILL)
            victim.proc.wait()
            with open(marks_path, "a", encoding="utf-8") as marks:
                marks.write(f"killed {victim.name} 0 -\n")
            if kill == 0:  # a third worker joins
                workers.append(
                    WorkerProcess(kafka_settings, tmp_path, "w3", session_timeout_ms=SESSION_MS)
                )
        alive = [w for w in workers if w.proc.poll() is None]
        found = await wait_for_results(
            kafka_settings,
            lambda rs: len({r.run_id for r in rs}) >= RUNS,
            timeout_s=600,
            workers=alive,
        )
        await asyncio.sleep(2)
        found = await results(kafka_settings)
    finally:
        for worker in workers:
            worker.stop()
    log = marks_path.read_text(encoding="utf-8").splitlines()
    most, where = most_at_once(log)
    assert most <= LIMIT, f"{most} jobs of {KEY} at once: {where}"
    assert most == LIMIT  # the limit was used, not only respected
    per_run: dict[str, int] = {}
    for result in found:
        per_run[result.run_id] = per_run.get(result.run_id, 0) + 1
    assert sorted(per_run) == sorted(run_id_for(f"invoice-{i}", T0) for i in range(RUNS))
    assert set(per_run.values()) == {1}, [r for r, n in per_run.items() if n > 1]
    assert {r.status for r in found} == {"succeeded"}
    assert sum(1 for line in log if line.startswith("killed")) == 2
