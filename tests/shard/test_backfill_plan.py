"""The backfill planner (actors/shard/backfill_plan.py): its instants against a
brute-force walk of the schedule's rule, DST days included, and its decisions
against the table in its docstring."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.shard.backfill_plan import (
    FIRES,
    Action,
    KnowledgeError,
    PastRun,
    Reprocess,
    Step,
    check_knowledge,
    compact_ranges,
    occurrences,
    plan_steps,
)
from actors.timespec import compile_spec
from tests.kit.timespec import MINUTE_MS, brute_force
from tests.kit.timespec import utc_ms as ms

T_MINUTE = 1_789_999_980_000  # on a minute: `every 1m` is anchored at the epoch


DST_CASES = [
    # zone, expression, a range around a transition
    ("America/New_York", "30 2 * * *", "2026-03-05", "2026-03-12"),  # spring gap: shifted
    ("America/New_York", "30 1 * * *", "2026-10-29", "2026-11-05"),  # fall fold: once
    ("America/New_York", "*/15 1-3 * * *", "2026-03-07", "2026-03-10"),  # wildcard in gap
    ("America/New_York", "*/20 * * * *", "2026-10-31", "2026-11-03"),  # wildcard in fold
    ("Europe/London", "0,30 0-2 * * *", "2026-03-28", "2026-03-31"),
    ("Europe/London", "45 1 * * 0", "2026-10-20", "2026-11-02"),
    ("Australia/Lord_Howe", "15 2 * * *", "2026-04-02", "2026-04-08"),  # 30-minute fold
    ("Australia/Lord_Howe", "10 2 * * *", "2026-10-01", "2026-10-07"),  # 30-minute gap
    ("UTC", "*/7 * * * *", "2026-06-01", "2026-06-03"),
]


@pytest.mark.parametrize(("zone", "expr", "start", "end"), DST_CASES)
@pytest.mark.parametrize(
    "dst",
    [
        {"gap": "shift", "fold": "once"},
        {"gap": "skip", "fold": "twice"},
    ],
)
def test_occurrences_are_the_brute_force_walk(
    zone: str, expr: str, start: str, end: str, dst: dict[str, str]
) -> None:
    from_ms, to_ms = ms(start + "T00:00:00"), ms(end + "T00:00:00")
    compiled = compile_spec({"cron": expr, "tz": zone}, schedule_id="bf", dst=dst)
    ours = list(occurrences(compiled, from_ms, to_ms))
    assert ours == brute_force(expr, zone, from_ms, to_ms, dst)
    assert ours  # every case has occurrences to compare


def test_the_range_is_half_open() -> None:
    compiled = compile_spec({"cron": "0 * * * *"}, schedule_id="bf")
    from_ms = ms("2026-06-01T00:00:00")
    assert list(occurrences(compiled, from_ms, from_ms + 3 * 3600_000)) == [
        from_ms,
        from_ms + 3600_000,
        from_ms + 2 * 3600_000,
    ]


# --- decisions ------------------------------------------------------------------

EXPECTED = {
    # status: (missing, failed, all) -> action
    "missed": (Action.RERUN, Action.RERUN, Action.RERUN),
    "skipped": (Action.RERUN, Action.RERUN, Action.RERUN),
    "dead_lettered": (Action.KEEP, Action.RERUN, Action.RERUN),
    "upstream_failed": (Action.KEEP, Action.RERUN, Action.RERUN),
    "succeeded": (Action.KEEP, Action.KEEP, Action.RERUN),
    "cancelled": (Action.KEEP, Action.KEEP, Action.RERUN),
    "failed": (Action.KEEP, Action.KEEP, Action.KEEP),
    "timed_out": (Action.KEEP, Action.KEEP, Action.KEEP),
    "running": (Action.KEEP, Action.KEEP, Action.KEEP),
}
MODES = (Reprocess.MISSING, Reprocess.FAILED, Reprocess.ALL)


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[int], list[PastRun]]:
    """Occurrences every minute and a history: single rows of any status and attempt
    count, gaps (never fired) and folded ranges (a row with covers_to_ms)."""
    count = draw(st.integers(1, 200))
    instants = [T_MINUTE + i * MINUTE_MS for i in range(count)]
    rows: list[PastRun] = []
    i = 0
    while i < count:
        kind = draw(st.sampled_from(["row", "gap", "fold"]))
        if kind == "gap":
            i += draw(st.integers(1, 5))
        elif kind == "fold":
            span = draw(st.integers(2, 8))
            last = min(i + span - 1, count - 1)
            rows.append(
                PastRun(
                    instants[i], draw(st.sampled_from(["missed", "skipped"])), 1, instants[last]
                )
            )
            i = last + 1
        else:
            status = draw(st.sampled_from(sorted(EXPECTED)))
            rows.append(PastRun(instants[i], status, draw(st.integers(1, 9))))
            i += 1
    return instants, rows


@settings(max_examples=300, deadline=None)
@given(case=histories(), mode=st.sampled_from(MODES), live_cut=st.integers(0, 210))
def test_each_decision_is_the_table_s(
    case: tuple[list[int], list[PastRun]], mode: Reprocess, live_cut: int
) -> None:
    instants, rows = case
    live_next = instants[0] + live_cut * MINUTE_MS
    known_to = max((r.covers_to_ms or r.scheduled_ms for r in rows), default=None)
    steps = list(
        plan_steps(
            iter(instants),
            iter(rows),
            mode,
            live_next_ms=live_next,
            handled_ms=live_next - MINUTE_MS,
            known_to_ms=known_to,
        )
    )
    assert [s.scheduled_ms for s in steps] == instants
    by_instant = {r.scheduled_ms: r for r in rows}
    for step in steps:
        at = step.scheduled_ms
        row = by_instant.get(at)
        fold = next(
            (
                r
                for r in rows
                if r.covers_to_ms is not None and r.scheduled_ms < at <= r.covers_to_ms
            ),
            None,
        )
        if at >= live_next:
            assert step.action is Action.LIVE
        elif row is not None:
            assert step.action is EXPECTED[row.status][MODES.index(mode)], (row, step)
            assert step.attempt == (row.attempts + 1 if step.action is Action.RERUN else None)
        elif fold is not None:
            assert (step.action, step.attempt) == (Action.RUN, 1)
        elif known_to is None or at > known_to:
            assert step.action is Action.UNKNOWN
        else:
            assert (step.action, step.attempt) == (Action.RUN, 1)


@settings(max_examples=300, deadline=None)
@given(case=histories(), mode=st.sampled_from(MODES))
def test_ranges_expand_to_exactly_the_fired_steps(
    case: tuple[list[int], list[PastRun]], mode: Reprocess
) -> None:
    instants, rows = case
    steps = list(
        plan_steps(
            iter(instants),
            iter(rows),
            mode,
            live_next_ms=None,
            handled_ms=instants[-1],
            known_to_ms=instants[-1],
        )
    )
    compiled = compile_spec({"every": "1m"}, schedule_id="bf")
    expanded: list[tuple[int, int]] = []
    ranges = list(compact_ranges(steps))
    for first, last, attempt in ranges:
        expanded += [(at, attempt) for at in occurrences(compiled, first, last + 1)]
    assert expanded == [(s.scheduled_ms, s.attempt) for s in steps if s.action in FIRES]
    # no two neighbouring ranges could have been one
    fired = {s.scheduled_ms for s in steps if s.action in FIRES}
    for (_, last, attempt), (first, _, next_attempt) in itertools.pairwise(ranges):
        assert attempt != next_attempt or first - last > MINUTE_MS or last + MINUTE_MS not in fired


def test_a_fold_that_starts_before_the_range_covers_into_it() -> None:
    t = 1_790_000_000_000
    rows = [PastRun(t - 5 * MINUTE_MS, "missed", 1, t + 2 * MINUTE_MS)]
    steps = list(
        plan_steps(
            iter([t, t + MINUTE_MS, t + 2 * MINUTE_MS, t + 3 * MINUTE_MS]),
            iter(rows),
            Reprocess.MISSING,
            live_next_ms=None,
            handled_ms=t + 3 * MINUTE_MS,
            known_to_ms=t + 2 * MINUTE_MS,
        )
    )
    assert [s.action for s in steps] == [Action.RUN, Action.RUN, Action.RUN, Action.UNKNOWN]
    assert "missed" in steps[0].reason


def test_without_a_live_cursor_what_was_never_handled_is_live() -> None:
    t = 1_790_000_000_000
    steps = list(
        plan_steps(
            iter([t, t + MINUTE_MS]),
            iter([]),
            Reprocess.ALL,
            live_next_ms=None,
            handled_ms=None,
            known_to_ms=None,
        )
    )
    assert [s.action for s in steps] == [Action.LIVE, Action.LIVE]


def test_knowledge_refuses_a_range_older_than_the_history() -> None:
    check_knowledge(100, 100, Reprocess.MISSING)
    with pytest.raises(KnowledgeError, match="before the first run"):
        check_knowledge(99, 100, Reprocess.MISSING)
    with pytest.raises(KnowledgeError, match="holds no run"):
        check_knowledge(99, None, Reprocess.FAILED)
    check_knowledge(99, 100, Reprocess.ALL)
    check_knowledge(99, None, Reprocess.ALL)


def test_the_planner_streams() -> None:
    """A year of every-minute instants is consumed lazily: the planner holds one step."""
    compiled = compile_spec({"cron": "* * * * *"}, schedule_id="bf")
    start = ms("2026-01-01T00:00:00")
    steps = plan_steps(
        occurrences(compiled, start, start + 366 * 86_400_000),
        iter([]),
        Reprocess.MISSING,
        live_next_ms=None,
        handled_ms=start + 400 * 86_400_000,
        known_to_ms=start + 400 * 86_400_000,
    )
    first: Step = next(steps)
    assert (first.scheduled_ms, first.action, first.attempt) == (start, Action.RUN, 1)
    for _ in range(1000):  # only these are ever computed
        assert next(steps).action is Action.RUN
