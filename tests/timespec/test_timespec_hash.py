"""Jenkins ``H`` and spread windows: stable across processes, uniform across ids."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from collections import Counter

import pytest

from actors.timespec import SpecError, compile_spec, spread_offset_ms
from actors.timespec.cronspec import CronSpec
from tests.kit.paths import REPO
from topics.timefmt import parse_instant

DAY_MS = parse_instant("2026-06-01T00:00:00Z")
JOBS = 20_000
IDS = [f"tenant-{i}/invoice-nightly" for i in range(JOBS)]


def first_fire_ms(expr: str, schedule_id: str, window_s: int = 0) -> int:
    spec = compile_spec({"cron": expr}, schedule_id=schedule_id, spread_window_s=window_s)
    fire = spec.next_after(DAY_MS - 1)
    assert fire is not None
    return fire


def resolved(expr: str, schedule_id: str) -> tuple[str, ...]:
    spec = compile_spec({"cron": expr}, schedule_id=schedule_id)
    assert isinstance(spec, CronSpec)
    return spec.table.resolved


SNIPPET = """
import json, sys
from actors.timespec import compile_spec, spread_offset_ms
ids = json.loads(sys.argv[1])
out = []
for i in ids:
    spec = compile_spec({"cron": "H H(9-17) H * H/2"}, schedule_id=i, spread_window_s=900)
    out.append([spec.table.resolved, spec.next_after(0), spread_offset_ms(i, 900)])
print(json.dumps(out))
"""


def test_h_and_spread_are_the_same_in_another_process_with_another_hash_seed() -> None:
    ids = ["a", "invoice-nightly", "tenant-42/report", "ünïcode-id", ""]
    env = dict(os.environ, PYTHONHASHSEED="12345")
    root = REPO
    done = subprocess.run(
        [sys.executable, "-c", SNIPPET, json.dumps(ids)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        check=True,
        timeout=120,
    )
    theirs = json.loads(done.stdout)
    ours: list[list[object]] = []
    tables = set()
    for i in ids:
        spec = compile_spec({"cron": "H H(9-17) H * H/2"}, schedule_id=i, spread_window_s=900)
        assert isinstance(spec, CronSpec)
        ours.append([list(spec.table.resolved), spec.next_after(0), spread_offset_ms(i, 900)])
        tables.add(spec.table.resolved)
    assert theirs == ours
    assert len(tables) > 1  # and H does depend on the id


def uniform_peaks(balls: int, buckets: int, trials: int) -> list[int]:
    rng = random.Random(20_000)  # a fixed seed: the reference is reproducible
    return [
        max(Counter(rng.randrange(buckets) for _ in range(balls)).values()) for _ in range(trials)
    ]


def chi_square(counts: Counter[int], buckets: int, balls: int) -> float:
    expected = balls / buckets
    return sum((counts.get(b, 0) - expected) ** 2 / expected for b in range(buckets))


def test_h_spreads_20000_midnight_jobs_over_an_hour_like_uniform_hashing() -> None:
    # "H H 0 * * *": second and minute hashed, hour 0: one hour, 3,600 slots.
    fires = [first_fire_ms("H H 0 * * *", i) for i in IDS]
    assert all(DAY_MS <= f < DAY_MS + 3_600_000 for f in fires)
    per_second = Counter((f - DAY_MS) // 1000 for f in fires)
    reference = uniform_peaks(JOBS, 3600, trials=20)
    # Peak second: the same order as throwing 20,000 balls uniformly into 3,600 bins
    # (about 14-16 for a mean of 5.6), never a pile-up.
    assert max(per_second.values()) <= max(reference) + 2, (per_second.most_common(3), reference)
    assert len(per_second) > 3600 * 0.99  # almost every second used (uniform: 99.6%)
    per_minute = Counter((f - DAY_MS) // 60_000 for f in fires)
    # 59 degrees of freedom: the 99.9th percentile of chi-square is about 99.
    assert chi_square(per_minute, 60, JOBS) < 99


def test_five_field_h_spreads_midnight_jobs_over_the_minutes_of_an_hour() -> None:
    fires = [first_fire_ms("H 0 * * *", i) for i in IDS]
    per_minute = Counter((f - DAY_MS) // 60_000 for f in fires)
    assert set(per_minute) == set(range(60))
    assert chi_square(per_minute, 60, JOBS) < 99
    assert max(per_minute.values()) <= max(uniform_peaks(JOBS, 60, trials=20)) + 20


def test_a_spread_window_spreads_20000_midnight_jobs_like_uniform_hashing() -> None:
    fires = [first_fire_ms("0 0 * * *", i, window_s=3600) for i in IDS]
    assert all(DAY_MS <= f < DAY_MS + 3_600_000 for f in fires)  # never before nominal
    per_second = Counter((f - DAY_MS) // 1000 for f in fires)
    assert max(per_second.values()) <= max(uniform_peaks(JOBS, 3600, trials=20)) + 2


def test_h_fields_are_independent_draws() -> None:
    """Minute and hour from one hash would always agree modulo 12 (60 and 24 share it)."""
    pairs = [resolved("H H * * *", i)[1:3] for i in IDS[:2000]]
    agree = sum(int(m) % 12 == int(h) % 12 for m, h in pairs)
    assert agree < 2000 * 0.15  # independent: about 1 in 12


def test_h_forms_stay_in_their_ranges() -> None:
    for i in IDS[:500]:
        second, minute, hour, dom, month, dow = resolved("H(10-20) H/15 H(9-17) H H H", i)
        assert 10 <= int(second) <= 20
        first, rest = minute.split("-")
        assert 0 <= int(first) < 15 and rest == "59/15"
        assert 9 <= int(hour) <= 17
        assert 1 <= int(dom) <= 28  # exists in every month
        assert 1 <= int(month) <= 12
        assert 0 <= int(dow) <= 6
        step_start = resolved("0 0 H/7 * *", i)[3]
        assert 1 <= int(step_start.split("-")[0]) <= 7 and step_start.endswith("-28/7")


def test_h_every_15_minutes_fires_four_times_an_hour_at_a_stable_phase() -> None:
    spec = compile_spec({"cron": "H/15 * * * *"}, schedule_id="poller")
    t, fires = DAY_MS, []
    for _ in range(8):
        nxt = spec.next_after(t)
        assert nxt is not None
        fires.append(nxt)
        t = nxt
    gaps = {b - a for a, b in itertools.pairwise(fires)}
    assert gaps == {15 * 60_000}
    assert (fires[0] - DAY_MS) // 60_000 < 15


@pytest.mark.parametrize("bad", ["H(20-10)", "H(0-99)", "H/0", "HH", "H(1-5", "H/x"])
def test_bad_h_forms_are_rejected_with_the_field(bad: str) -> None:
    with pytest.raises(SpecError, match=r"^spec\.cron: field 1 \(minute\)"):
        compile_spec({"cron": f"{bad} * * * *"}, schedule_id="x")


def test_spread_offset_is_within_the_window_and_stable() -> None:
    offsets = [spread_offset_ms(i, 900) for i in IDS[:1000]]
    assert all(0 <= o < 900_000 for o in offsets)
    assert offsets == [spread_offset_ms(i, 900) for i in IDS[:1000]]
    assert spread_offset_ms("x", 0) == 0
    spec = compile_spec({"cron": "0 9 * * *"}, schedule_id=IDS[7], spread_window_s=900)
    nominal = parse_instant("2026-06-01T09:00:00Z")
    offset = spread_offset_ms(IDS[7], 900)
    assert spec.next_after(nominal - 1) == nominal + offset
    # Same offset the next day: the time of day is kept.
    assert spec.next_after(nominal + offset) == nominal + 86_400_000 + offset
