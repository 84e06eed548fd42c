"""Next-fire cost: the compiled spec against croniter, measured in the same run.

For each expression we walk the same chain of fires (each answer is the next
question, as a shard does) and report the median, over repeats, of the mean time
per next-fire for:

- compiled: ``compile_spec(...).next_after(after_ms)``;
- croniter: one ``croniter`` object, ``get_next(float)`` repeatedly;
- naive: construct ``croniter(expr, instant)`` and call ``get_next`` once per fire.

Run: ``python bench/next_fire.py [--fires N] [--repeats R]``. The last line is
``bench next_fire: ...`` with the ratios croniter/compiled and naive/compiled.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from croniter import croniter

from actors.timespec import compile_spec

CASES: tuple[tuple[str, str, str], ...] = (
    # (label, expression, zone)
    ("every_minute", "* * * * *", "UTC"),
    ("daily", "0 0 * * *", "UTC"),
    ("weekdays_9_17_every_5m", "*/5 9-17 * * MON-FRI", "UTC"),
    ("monthly", "0 0 1 * *", "UTC"),
    ("last_day_L", "0 12 L * *", "UTC"),
    ("dst_tz_daily", "30 2 * * *", "America/New_York"),
    ("dst_tz_every_15m", "*/15 * * * *", "Europe/London"),
)
START = datetime(2026, 1, 1, tzinfo=UTC)


def per_call_us(total_s: float, calls: int) -> float:
    return total_s / calls * 1e6


def time_compiled(expr: str, zone: str, fires: int) -> float:
    spec = compile_spec({"cron": expr, "tz": zone}, schedule_id="bench")
    after_ms = int(START.timestamp() * 1000)
    began = time.perf_counter()
    for _ in range(fires):
        nxt = spec.next_after(after_ms)
        assert nxt is not None
        after_ms = nxt
    return per_call_us(time.perf_counter() - began, fires)


def time_croniter(expr: str, zone: str, fires: int) -> float:
    it = croniter(expr, START.astimezone(ZoneInfo(zone)))
    began = time.perf_counter()
    for _ in range(fires):
        it.get_next(float)
    return per_call_us(time.perf_counter() - began, fires)


def time_naive(expr: str, zone: str, fires: int) -> float:
    tz = ZoneInfo(zone)
    after = START.astimezone(tz)
    began = time.perf_counter()
    for _ in range(fires):
        after = croniter(expr, after).get_next(datetime)
    return per_call_us(time.perf_counter() - began, fires)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fires", type=int, default=2000, help="fires per measurement")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per median")
    args = parser.parse_args()
    fires, repeats = args.fires, args.repeats
    ratios: dict[str, float] = {}
    naive_ratios: dict[str, float] = {}
    header = f"{'case':<26}{'compiled µs':>12}{'croniter µs':>13}{'naive µs':>10}"
    print(header + f"{'ratio':>8}{'naive':>8}")
    for label, expr, zone in CASES:
        compiled_us, croniter_us, naive_us = [], [], []
        for _ in range(repeats):  # interleaved, so machine noise hits all three alike
            compiled_us.append(time_compiled(expr, zone, fires))
            croniter_us.append(time_croniter(expr, zone, fires))
            naive_us.append(time_naive(expr, zone, fires // 4))
        c, b, n = (statistics.median(x) for x in (compiled_us, croniter_us, naive_us))
        ratios[label], naive_ratios[label] = b / c, n / c
        print(f"{label:<26}{c:>12.2f}{b:>13.2f}{n:>10.2f}{b / c:>7.1f}x{n / c:>7.1f}x")
    parts = [f"min_ratio={min(ratios.values()):.1f}"]
    parts += [f"{k}={v:.1f}x" for k, v in ratios.items()]
    parts += [f"naive_{k}={v:.1f}x" for k, v in naive_ratios.items()]
    print("bench next_fire: " + " ".join(parts))


if __name__ == "__main__":
    main()
