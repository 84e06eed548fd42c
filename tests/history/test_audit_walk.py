"""The audit's walk against a brute-force oracle, and its rules one by one (pure).

The oracle looks at every second of the window: which version was in effect then
(the last one whose effective instant is not after it), whether that version's rule
fires then (arithmetic for ``every``, a modulo for a UTC minute cron), and which run
or folded range accounts for it, by scanning every outcome. The walk must say the
same, in order, while streaming.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.audit.walk import (
    ACCOUNTED,
    DUE,
    GAP,
    PAUSED,
    PAUSED_OPEN,
    PENDING,
    Finding,
    Instants,
    Outcome,
    Version,
    expected,
    known_from,
    match,
    spec_instants,
    tally,
)
from actors.timespec import CompiledSpec, compile_spec
from topics.timefmt import format_ms, parse_instant

T0 = parse_instant("2026-10-10T00:00:00Z")
S = 1000

# Rules the oracle can judge by arithmetic: (spec, does it fire at second t).
RULES: dict[str, tuple[dict[str, Any], Any]] = {
    "every7": ({"every": "7s", "anchor": format_ms(T0)}, lambda t: (t - T0) % (7 * S) == 0),
    "every13": (
        {"every": "13s", "anchor": format_ms(T0 + 5 * S)},
        lambda t: t >= T0 + 5 * S and (t - T0 - 5 * S) % (13 * S) == 0,
    ),
    "minute": ({"cron": "* * * * *", "tz": "UTC"}, lambda t: t % (60 * S) == 0),
    "five": ({"cron": "*/5 * * * *", "tz": "UTC"}, lambda t: t % (300 * S) == 0),
}


def compiler(schedule_id: str = "s") -> Instants:
    cache: dict[str, CompiledSpec] = {}

    def compiled(key: str) -> CompiledSpec:
        if key not in cache:
            cache[key] = compile_spec(RULES[key][0], schedule_id=schedule_id)
        return cache[key]

    return spec_instants(compiled)


def oracle_expected(versions: list[Version], from_ms: int, to_ms: int) -> list[tuple[int, str]]:
    out = []
    for t in range(from_ms - from_ms % S, to_ms + 1, S):
        if t < from_ms:
            continue
        # A completion counts from the millisecond after its record (written with
        # the fire that completed it); every other change from its own.
        effective = [
            i
            for i, v in enumerate(versions)
            if v.effective_ms + (1 if v.completed and v.def_key else 0) <= t
        ]
        if not effective:
            continue
        i = effective[-1]
        v = versions[i]
        if v.def_key is None or v.completed is not None or not RULES[v.def_key][1](t):
            continue
        owed = DUE if not v.paused else PAUSED_OPEN if i == len(versions) - 1 else PAUSED
        out.append((t, owed))
    return out


def oracle_match(owed: list[tuple[int, str]], outcomes: list[Outcome]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for t, kind in owed:
        same = [o for o in outcomes if o.scheduled_ms == t]
        covering = [
            o
            for o in outcomes
            if o.covers_to_ms is not None and o.scheduled_ms < t <= o.covers_to_ms
        ]
        if same:
            out.append((t, ACCOUNTED, kind, False))
        elif covering:
            out.append((t, ACCOUNTED, kind, True))
        elif kind == PAUSED_OPEN:
            out.append((t, PENDING, kind, False))
        else:
            out.append((t, GAP, kind, False))
    return out


@st.composite
def histories(draw: Any) -> tuple[list[Version], list[Outcome], int, int]:
    n = draw(st.integers(1, 5))
    offsets = sorted(draw(st.lists(st.integers(0, 1800), min_size=n, max_size=n, unique=True)))
    versions = []
    for k, off in enumerate(offsets):
        deleted = k > 0 and draw(st.booleans()) and draw(st.booleans())
        versions.append(
            Version(
                T0 + off * S + draw(st.integers(0, 999)),
                None if deleted else draw(st.sampled_from(sorted(RULES))),
                draw(st.booleans()),
                draw(st.sampled_from([None, None, None, "max_runs"])),
            )
        )
    outcomes: list[Outcome] = []
    for sec in sorted(set(draw(st.lists(st.integers(0, 2000), max_size=80)))):
        at = T0 + sec * S
        if draw(st.integers(0, 9)) == 0:
            to = at + draw(st.integers(1, 120)) * S
            outcomes.append(Outcome(at, "missed", f"s@{at}", to, None, "Misfire"))
        else:
            outcomes.append(Outcome(at, draw(st.sampled_from(["succeeded", "skipped"])), f"s@{at}"))
    start = T0 + draw(st.integers(0, 1000)) * S + draw(st.integers(0, 999))
    end = start + draw(st.integers(0, 1000)) * S
    return versions, outcomes, start, end


@settings(max_examples=150, deadline=None)
@given(histories())
def test_the_walk_agrees_with_the_brute_force_oracle(
    case: tuple[list[Version], list[Outcome], int, int],
) -> None:
    versions, outcomes, from_ms, to_ms = case
    owed = list(expected(versions, from_ms, to_ms, compiler()))
    assert owed == oracle_expected(versions, from_ms, to_ms)
    # The runs the history gives: the window's, and folded ones reaching into it.
    given_runs = [
        o
        for o in outcomes
        if from_ms <= o.scheduled_ms <= to_ms
        or (o.scheduled_ms < from_ms and (o.covers_to_ms or 0) >= from_ms)
    ]
    found = [(f.at_ms, f.verdict, f.owed, f.folded) for f in match(iter(owed), iter(given_runs))]
    assert found == oracle_match(owed, given_runs)
    # The counted form says the same as the listed one.
    counted = tally(iter(owed), iter(given_runs))
    statuses: dict[str, int] = {}
    for f in match(iter(owed), iter(given_runs)):
        key = f.outcome.status if f.outcome is not None else f.verdict
        statuses[key] = statuses.get(key, 0) + 1
    assert counted.counts == statuses
    assert counted.gaps == [at for at, verdict, _, _ in found if verdict == GAP]
    assert counted.folded == sum(1 for *_, folded in found if folded)


def test_an_upsert_mid_window_is_judged_by_each_rule_in_its_own_span() -> None:
    # every 7 s until T0+60 s, then every minute on the minute: 7-second instants
    # after the change are not owed, the minute ones are.
    versions = [
        Version(T0 - 10 * S, "every7", False, None),
        Version(T0 + 60 * S, "minute", False, None),
    ]
    owed = [t for t, _ in expected(versions, T0, T0 + 180 * S, compiler())]
    assert owed == [T0 + k * 7 * S for k in range(9)] + [T0 + 60 * S, T0 + 120 * S, T0 + 180 * S]


def test_paused_spans_owe_skipped_and_an_open_pause_is_pending() -> None:
    versions = [
        Version(T0, "minute", False, None),
        Version(T0 + 90 * S, "minute", True, None),  # paused
        Version(T0 + 200 * S, "minute", False, None),  # resumed
        Version(T0 + 330 * S, "minute", True, None),  # paused again, still
    ]
    owed = list(expected(versions, T0, T0 + 480 * S, compiler()))
    assert owed == [
        (T0, DUE),
        (T0 + 60 * S, DUE),
        (T0 + 120 * S, PAUSED),
        (T0 + 180 * S, PAUSED),
        (T0 + 240 * S, DUE),
        (T0 + 300 * S, DUE),
        (T0 + 360 * S, PAUSED_OPEN),
        (T0 + 420 * S, PAUSED_OPEN),
        (T0 + 480 * S, PAUSED_OPEN),
    ]
    outcomes = [
        Outcome(T0, "succeeded", "a"),
        Outcome(T0 + 60 * S, "failed", "b"),
        Outcome(T0 + 120 * S, "skipped", "c", T0 + 180 * S, None, "Paused"),
        Outcome(T0 + 300 * S, "running", "e"),
    ]
    found = list(match(iter(owed), iter(outcomes)))
    assert [f.verdict for f in found] == [ACCOUNTED] * 4 + [GAP, ACCOUNTED] + [PENDING] * 3
    assert found[3] == Finding(T0 + 180 * S, ACCOUNTED, PAUSED, outcomes[2], folded=True)
    assert found[4].at_ms == T0 + 240 * S


def test_deleted_and_completed_versions_owe_nothing() -> None:
    versions = [
        Version(T0, "minute", False, None),
        Version(T0 + 150 * S, "minute", False, "max_runs"),
        Version(T0 + 400 * S, "minute", False, None),  # max_runs raised by an upsert
        Version(T0 + 500 * S, None, False, None),  # deleted
    ]
    owed = [t for t, _ in expected(versions, T0, T0 + 900 * S, compiler())]
    assert owed == [T0, T0 + 60 * S, T0 + 120 * S, T0 + 420 * S, T0 + 480 * S]


def test_a_dag_run_is_its_own_result_over_its_tasks_runs() -> None:
    owed = [(T0, DUE)]
    task = Outcome(T0, "succeeded", "d@x/extract", None, "extract")
    own = Outcome(T0, "failed", "d@x", None, None)
    assert next(match(iter(owed), iter([task, own]))).outcome == own
    assert next(match(iter(owed), iter([task]))).outcome == task  # still running


def test_the_rules_of_the_shard_zone_dst_spread_and_bounds_come_with_compile_spec() -> None:
    # A fixed-time daily cron on New York's fall-back day is owed once (cronie's rule,
    # the shard's), and a spread moves every instant by the same stable offset.
    fall_back = parse_instant("2026-11-01T00:00:00Z")
    spec = compile_spec({"cron": "30 1 * * *", "tz": "America/New_York"}, schedule_id="d")
    versions = [Version(fall_back - 3600 * S, "k", False, None)]
    walk = spec_instants(lambda _: spec)
    owed = list(expected(versions, fall_back, fall_back + 86_400 * S, walk))
    assert [format_ms(t) for t, _ in owed] == ["2026-11-01T05:30:00.000Z"]
    spread = compile_spec(
        {"every": "60s"}, schedule_id="d", spread_window_s=30, end_ms=T0 + 200 * S
    )
    spread_owed = [
        t
        for t, _ in expected(
            [Version(T0, "k", False, None)], T0, T0 + 600 * S, spec_instants(lambda _: spread)
        )
    ]
    assert len(spread_owed) in (3, 4) and len({t % (60 * S) for t in spread_owed}) == 1
    assert all(T0 <= t <= T0 + 200 * S for t in spread_owed)


def test_known_from_is_the_first_version() -> None:
    assert known_from([]) == (None, False)
    assert known_from([Version(T0, "k", False, None, created=True)]) == (T0, True)
