"""What the metrics cost the hot paths, as ratios against baselines run in this process.

- ``fire``: a herd of N schedules due within one second goes through
  `ShardCore.advance` (as `bench/shard_core.py` does), once with the core as
  shipped (its lateness window keeps the histogram) and once with a plain
  ``deque`` in its place (the baseline: no histogram). Reported: due/s of each
  and the slowdown, ``shipped / baseline`` of the time per fire.
- ``job``: `metrics.job_exited` (a histogram observation and a counter
  increment on cached children) per call, against a call of an empty function.
- ``commit``: `metrics.shard_committed` per transaction, the same way.

Each phase has a timeout; progress goes to stderr; the last line is
``bench metrics_overhead: key=value ...`` or says which phase could not be measured.

Usage::

    python bench/metrics_overhead.py [--schedules 200000] [--calls 1000000]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import signal
import sys
import time
from collections import deque
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from actors.observe import metrics

PHASE_TIMEOUT_S = 300


class PhaseTimeout(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise PhaseTimeout


def _shard_bench() -> ModuleType:
    """bench/shard_core.py, for its herd (the same schedules, the same restore)."""
    path = Path(__file__).with_name("shard_core.py")
    spec = importlib.util.spec_from_file_location("shard_core_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _PlainWindow(deque[int]):
    """The last values only, with the window's bulk append (`LatenessWindow.extend_all`)."""

    def extend_all(self, values: list[int]) -> None:
        self.extend(values)


def fire_seconds(herd: ModuleType, records: list[Any], count: int, plain: bool) -> float:
    """CPU seconds inside `advance` for the whole herd."""
    _, _, core = herd.bench_restore(records)
    if plain:
        core._lateness_ms = _PlainWindow(maxlen=1024)  # the baseline: no histogram kept
    gc.collect()
    spent_s, fired, _ = herd.bench_advance(core, count)
    assert fired >= count, f"only {fired} of {count} fired"
    return float(spent_s)


def per_call_ns(func: Any, args: tuple[Any, ...], calls: int) -> float:
    started = time.perf_counter_ns()
    for _ in range(calls):
        func(*args)
    return (time.perf_counter_ns() - started) / calls


def _nothing(*args: Any) -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=200_000)
    parser.add_argument("--calls", type=int, default=1_000_000)
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    results: dict[str, str] = {}
    phase = "setup"
    try:
        phase = "fire"
        signal.alarm(PHASE_TIMEOUT_S)
        herd = _shard_bench()
        print(f"building {args.schedules:,} changelog records ...", file=sys.stderr, flush=True)
        records = herd.changelog_records(args.schedules)
        shipped: list[float] = []
        plain: list[float] = []
        for round_no in (1, 2):  # alternated, best of two: the order does not favour either
            print(f"advance round {round_no}: as shipped ...", file=sys.stderr, flush=True)
            shipped.append(fire_seconds(herd, records, args.schedules, plain=False))
            print(f"advance round {round_no}: plain deque ...", file=sys.stderr, flush=True)
            plain.append(fire_seconds(herd, records, args.schedules, plain=True))
        shipped_s, plain_s = min(shipped), min(plain)
        signal.alarm(0)
        results["fire_per_s"] = f"{args.schedules / shipped_s:,.0f}"
        results["fire_baseline_per_s"] = f"{args.schedules / plain_s:,.0f}"
        results["fire_slowdown"] = f"{shipped_s / plain_s:.3f}x"

        phase = "job"
        signal.alarm(PHASE_TIMEOUT_S)
        print(f"{args.calls:,} job exits ...", file=sys.stderr, flush=True)
        base_ns = per_call_ns(_nothing, ("bench.job", "succeeded", 0.01), args.calls)
        job_ns = per_call_ns(metrics.job_exited, ("bench.job", "succeeded", 0.01), args.calls)
        signal.alarm(0)
        results["job_exit_ns"] = f"{job_ns:.0f}"
        results["job_exit_vs_empty_call"] = f"{job_ns / base_ns:.1f}x"

        phase = "commit"
        signal.alarm(PHASE_TIMEOUT_S)
        print(f"{args.calls:,} shard commits ...", file=sys.stderr, flush=True)
        base_ns = per_call_ns(_nothing, (3, 0.004), args.calls)
        commit_ns = per_call_ns(metrics.shard_committed, (3, 0.004), args.calls)
        signal.alarm(0)
        results["commit_ns"] = f"{commit_ns:.0f}"
        results["commit_vs_empty_call"] = f"{commit_ns / base_ns:.1f}x"
    except PhaseTimeout:
        print(
            f"bench metrics_overhead: could not measure: phase {phase} took over"
            f" {PHASE_TIMEOUT_S} s",
            flush=True,
        )
        sys.exit(1)
    print("bench metrics_overhead: " + " ".join(f"{k}={v}" for k, v in results.items()))


if __name__ == "__main__":
    main()
