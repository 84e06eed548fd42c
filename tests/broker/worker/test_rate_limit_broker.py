"""A rate limit on the real broker (docs/DESIGN.md §8.5): 1,000 runs of one key at 20
starts a second (bursts of 5), two workers, the one running the key killed (kill -9)
mid-way: within no second did more than 20 + 5 of the key's jobs start, by the jobs'
own start marks, and every run ended by one visible result."""

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
)
from topics.messages import run_id_for
from topics.names import Settings
from topics.partitioner import murmur2_partition
from topics.ratelimits import RateLimit

RUNS = 1_000
RATE = RateLimit("payments", 20, 5)
PARTITIONS = 3
SESSION_MS = 6_000


def limited_runs() -> list[tuple[bytes, bytes]]:
    """1,000 runs of 1,000 schedules, all naming the key, as the shard writes them."""
    return [
        run_record(
            f"charge-{i}", "test.rate_mark", {"seconds": 0.1}, timeout_s=900, rate_limit=RATE
        )
        for i in range(RUNS)
    ]


def starts(path: Path) -> list[int]:
    if not path.exists():
        return []
    return sorted(int(line.split(" ")[3]) for line in path.read_text().splitlines() if line)


def most_in_a_second(times: list[int]) -> tuple[int, int]:
    """The most starts within any closed 1 s window, and where it begins."""
    most, at, last = 0, 0, 0
    for first in range(len(times)):
        while last + 1 < len(times) and times[last + 1] <= times[first] + 1000:
            last += 1
        if last - first + 1 > most:
            most, at = last - first + 1, times[first]
    return most, at


@pytest.mark.kafka_partitions(3, runs=PARTITIONS)
async def test_20_a_second_over_1000_runs_through_a_kill(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    partition = murmur2_partition(RATE.key.encode(), PARTITIONS)
    marks = tmp_path / "marks.log.starts"
    workers = [
        WorkerProcess(kafka_settings, tmp_path, name, session_timeout_ms=SESSION_MS)
        for name in ("w1", "w2")
    ]
    try:
        await produce(kafka_settings, limited_runs(), partition=partition)
        while len(starts(marks)) < 300:  # the key's owner at work, then killed
            for worker in workers:
                worker.check_alive()
            await asyncio.sleep(0.2)
        victim = owner_of(workers, partition)
        assert victim is not None, "nobody owns the key's partition"
        victim.signal(signal.SIGKILL)
        victim.proc.wait()
        alive = [w for w in workers if w.proc.poll() is None]
        await wait_for_results(
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
    times = starts(marks)
    most, at = most_in_a_second(times)
    assert most <= RATE.per_s + RATE.burst, f"{most} starts within 1 s from {at}"
    assert most >= RATE.per_s // 2  # the rate was used, not only respected
    assert times[-1] - times[0] >= (RUNS - RATE.burst) * 1000 // RATE.per_s
    per_run: dict[str, int] = {}
    for result in found:
        per_run[result.run_id] = per_run.get(result.run_id, 0) + 1
    assert sorted(per_run) == sorted(run_id_for(f"charge-{i}", T0) for i in range(RUNS))
    assert set(per_run.values()) == {1}, [r for r, n in per_run.items() if n > 1]
    assert {r.status for r in found} == {"succeeded"}
