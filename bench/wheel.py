"""The timing wheel against heapq, measured in the same run.

With ``--timers`` (1M) timers due uniformly over the next 30 days, one shared item:

- **add**: ``TimingWheel.add`` vs ``heapq.heappush`` of a ``(due_ms, seq, item)``
  tuple (the obvious heapq timer). Measured twice: with the garbage collector paused
  during the load (the cost of the data structures), and with the default collector.
  The difference is CPython's cyclic collector, not the wheel: a heap entry is a
  tuple of ints and a string, which CPython stops tracking, while every Timer is a
  tracked object, so the full collections triggered while a million of them are
  being created walk all of them. A runtime that loads a shard in bulk should pause
  the collector and ``gc.freeze()`` afterwards.
- **cancel** of every second timer: ``TimingWheel.cancel`` vs heapq's
  remove-and-heapify (``index``, swap with the last, ``heapify``), sampled on
  ``--heap-cancels`` cancels and scaled to the same count. Also shown: filtering the
  heap once and re-heapifying, heapq's best case when every cancel is known at once.
  Memory (tracemalloc) before and after shows the wheel returns it at once.
- **empty advance**: median time of an ``advance`` by one tick that fires nothing,
  with 1M and with ``--big`` (10M) timers loaded (due from an hour to 30 days ahead,
  so that the 200 s of ticks advanced over are empty), vs heapq's peek at its head.
- **bytes per timer**: traced memory of the wheel holding 1M timers / 1M, vs heapq.

Run: ``python bench/wheel.py [--timers 1000000] [--big 10000000]``. The last line
is ``bench wheel: ...``.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Iterator

from actors.wheel import Timer, TimingWheel

NOW_MS = 1_764_000_000_000
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
SPREAD_MS = 30 * DAY_MS
TICK_MS = 10
ITEM = "schedule-id"  # one shared item, so neither side pays for items
ADVANCES = 20_000


def dues(count: int, seed: int = 7, earliest_ms: int = NOW_MS) -> list[int]:
    rng = random.Random(seed)
    span = NOW_MS + SPREAD_MS - earliest_ms
    return [earliest_ms + rng.randrange(span) for _ in range(count)]


class Paused:
    """Pause the cyclic collector inside a block (or leave it as it is)."""

    def __init__(self, pause: bool) -> None:
        self.pause = pause

    def __enter__(self) -> None:
        gc.collect()
        if self.pause:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        gc.enable()


def load_heap(due_list: list[int]) -> tuple[float, list[tuple[int, int, str]]]:
    heap: list[tuple[int, int, str]] = []
    push = heapq.heappush
    began = time.perf_counter()
    for seq, due_ms in enumerate(due_list):
        push(heap, (due_ms, seq, ITEM))
    return time.perf_counter() - began, heap


def load_wheel(due_list: list[int]) -> tuple[float, TimingWheel[str], list[Timer]]:
    wheel: TimingWheel[str] = TimingWheel(NOW_MS, TICK_MS)
    add = wheel.add
    began = time.perf_counter()
    handles = [add(due_ms, ITEM) for due_ms in due_list]
    return time.perf_counter() - began, wheel, handles


def bench_add(due_list: list[int], pause: bool) -> float:
    """Best of interleaved rounds; returns the wheel / heapq time ratio."""
    heap_s, wheel_s = [], []
    for _ in range(3 if pause else 2):
        with Paused(pause):
            seconds, heap = load_heap(due_list)
        heap_s.append(seconds)
        del heap
        with Paused(pause):
            seconds, wheel, handles = load_wheel(due_list)
        wheel_s.append(seconds)
        del wheel, handles
    n = len(due_list)
    h, w = min(heap_s), min(wheel_s)
    gc_state = "paused" if pause else "default"
    print(
        f"add ({gc_state} gc): heappush {h / n * 1e9:.0f} ns, wheel.add {w / n * 1e9:.0f} ns,"
        f" ratio {w / h:.2f}x (target <= 2x)"
    )
    return w / h


def bench_cancel(due_list: list[int], heap_cancels: int) -> float:
    """Returns the speed-up over heapq's remove-and-heapify."""
    n = len(due_list)
    with Paused(True):
        _, wheel, handles = load_wheel(due_list)
    victims = handles[::2]
    cancel = wheel.cancel
    began = time.perf_counter()
    for timer in victims:
        cancel(timer)
    wheel_s = time.perf_counter() - began
    del wheel, handles, victims

    _, heap = load_heap(due_list)
    rng = random.Random(3)
    # Distinct entries: one drawn twice would be gone at its second removal.
    sample = rng.sample(heap, min(heap_cancels, len(heap)))
    began = time.perf_counter()
    for entry in sample:
        i = heap.index(entry)
        heap[i] = heap[-1]
        heap.pop()
        heapq.heapify(heap)
    per_heap_cancel_s = (time.perf_counter() - began) / len(sample)
    heap_s = per_heap_cancel_s * len(due_list[::2])
    doomed = set(heap[::2])
    began = time.perf_counter()
    heap = [entry for entry in heap if entry not in doomed]
    heapq.heapify(heap)
    filter_s = time.perf_counter() - began
    del heap, doomed

    print(
        f"cancel {n // 2:,} of {n:,}: wheel {wheel_s:.2f} s"
        f" ({wheel_s / (n // 2) * 1e9:.0f} ns each);"
        f" heapq remove-and-heapify {per_heap_cancel_s * 1e3:.1f} ms each, {heap_s:,.0f} s"
        f" in all ({heap_s / wheel_s:,.0f}x slower, target >= 5x);"
        f" heapq filter-once-and-heapify {filter_s:.2f} s ({filter_s / wheel_s:.1f}x)"
    )
    return heap_s / wheel_s


def bytes_per_entry(due_list: list[int]) -> tuple[float, float, float]:
    """Traced bytes per timer of the wheel and per heapq entry, and the fraction of the
    wheel's memory returned by cancelling every second timer."""
    n = len(due_list)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    with Paused(True):
        _, wheel, handles = load_wheel(due_list)
    loaded = tracemalloc.get_traced_memory()[0] - base - sys.getsizeof(handles)
    for timer in handles[::2]:
        wheel.cancel(timer)
    handles = handles[1::2]  # the caller drops the handles it cancelled
    gc.collect()
    after = tracemalloc.get_traced_memory()[0] - base - sys.getsizeof(handles)
    tracemalloc.stop()
    del wheel, handles
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    with Paused(True):
        _, heap = load_heap(due_list)
    heap_bytes = (tracemalloc.get_traced_memory()[0] - base) / n
    tracemalloc.stop()
    del heap
    wheel_bytes, freed = loaded / n, 1 - after / loaded
    print(
        f"bytes per timer: wheel {wheel_bytes:.0f}, heapq {heap_bytes:.0f} (target <= 200;"
        " due_ms ints and the handles list are the caller's and not counted)"
    )
    print(f"memory freed by cancelling half: {freed:.0%} of the wheel's traced memory")
    return wheel_bytes, heap_bytes, freed


def spread_dues(count: int) -> Iterator[int]:
    """`count` dues from an hour ahead to 30 days ahead, without a list of them all."""
    rng = random.Random(11)
    span = SPREAD_MS - HOUR_MS
    first = NOW_MS + HOUR_MS
    for _ in range(count):
        yield first + rng.randrange(span)


def bench_empty_advance(count: int) -> tuple[float, float]:
    """Median µs of an advance by one tick that fires nothing, wheel and heapq peek."""
    with Paused(True):
        wheel: TimingWheel[str] = TimingWheel(NOW_MS, TICK_MS)
        add = wheel.add
        for due_ms in spread_dues(count):
            add(due_ms, ITEM)
    gc.freeze()  # the loaded timers are long-lived: keep them out of the collections
    heap = [(NOW_MS + HOUR_MS, 0, ITEM)]  # heapq's advance is a peek at its head
    wheel_ns, heap_ns = [], []
    clock = time.perf_counter_ns
    for step in range(1, ADVANCES + 1):
        now_ms = NOW_MS + step * TICK_MS
        began = clock()
        fired = wheel.advance(now_ms)
        wheel_ns.append(clock() - began)
        assert not fired
        began = clock()
        popped = []
        while heap and heap[0][0] <= now_ms:
            popped.append(heapq.heappop(heap)[2])
        heap_ns.append(clock() - began)
    assert len(wheel) == count
    gc.unfreeze()
    del wheel
    gc.collect()
    w, h = statistics.median(wheel_ns) / 1e3, statistics.median(heap_ns) / 1e3
    print(
        f"empty advance with {count:,} timers: wheel median {w:.2f} µs,"
        f" heapq peek {h:.2f} µs (target <= 5 µs)"
    )
    return w, h


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timers", type=int, default=1_000_000, help="timers for most figures")
    parser.add_argument("--big", type=int, default=10_000_000, help="timers of the big load")
    parser.add_argument("--heap-cancels", type=int, default=5, help="sampled heapq cancels")
    args = parser.parse_args()
    due_list = dues(args.timers)
    add_ratio = bench_add(due_list, pause=True)
    add_ratio_gc = bench_add(due_list, pause=False)
    cancel_x = bench_cancel(due_list, args.heap_cancels)
    wheel_bytes, heap_bytes, freed = bytes_per_entry(due_list)
    del due_list
    adv_1m, _ = bench_empty_advance(args.timers)
    adv_big, _ = bench_empty_advance(args.big)
    print(
        f"bench wheel: add_ratio={add_ratio:.2f} add_ratio_default_gc={add_ratio_gc:.2f}"
        f" cancel_speedup={cancel_x:.0f} cancel_memory_freed={freed:.2f}"
        f" empty_advance_us_1m={adv_1m:.2f} empty_advance_us_big={adv_big:.2f}"
        f" big={args.big} bytes_per_timer={wheel_bytes:.0f} heapq_bytes={heap_bytes:.0f}"
    )


if __name__ == "__main__":
    main()
