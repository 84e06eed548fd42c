"""The misfire planner against a brute-force reference, and misfires seen through a shard."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.shard.misfire import plan_backlog
from tests.kit.shard import DAY, HOUR, MINUTE, SECOND, T0, Shard, upsert
from topics.vocabulary import MisfireMode


def every(
    period_ms: int, phase_ms: int = 0, end_ms: int | None = None
) -> Callable[[int], int | None]:
    def next_after(after_ms: int) -> int | None:
        k = (after_ms - phase_ms) // period_ms + 1
        fire = phase_ms + k * period_ms
        return None if end_ms is not None and fire > end_ms else fire

    return next_after


def reference(
    next_after: Callable[[int], int | None],
    first_ms: int | None,
    now_ms: int,
    cutoff_ms: int,
    policy: str,
    catch_up_max: int,
) -> tuple[list[int], list[int], int | None]:
    """Every due occurrence enumerated: (missed, fire, next)."""
    due: list[int] = []
    o = first_ms
    while o is not None and o <= now_ms:
        due.append(o)
        o = next_after(o)
    misfired = [x for x in due if x < cutoff_ms]
    on_time = [x for x in due if x >= cutoff_ms]
    if policy == MisfireMode.CATCH_UP:
        keep = min(catch_up_max, len(misfired))
    elif policy == MisfireMode.RUN_ONCE:
        keep = 0 if on_time else min(1, len(misfired))
    else:
        keep = 0
    return misfired[: len(misfired) - keep], misfired[len(misfired) - keep :] + on_time, o


@settings(max_examples=300, deadline=None)
@given(
    period_ms=st.integers(1, 5_000),
    phase_ms=st.integers(0, 5_000),
    first_k=st.integers(0, 50),
    span_ms=st.integers(0, 400_000),
    grace_ms=st.integers(0, 200_000),
    policy=st.sampled_from([MisfireMode.RUN_ONCE, MisfireMode.CATCH_UP, MisfireMode.SKIP]),
    catch_up_max=st.integers(1, 30),
    detail_max=st.integers(0, 20),
    scan_max=st.integers(1, 300),
    end_after=st.one_of(st.none(), st.integers(0, 500_000)),
)
def test_plan_matches_the_brute_force_reference(
    period_ms: int,
    phase_ms: int,
    first_k: int,
    span_ms: int,
    grace_ms: int,
    policy: str,
    catch_up_max: int,
    detail_max: int,
    scan_max: int,
    end_after: int | None,
) -> None:
    end_ms = None if end_after is None else phase_ms + end_after
    next_after = every(period_ms, phase_ms, end_ms)
    first_ms = next_after(phase_ms + first_k * period_ms - 1)
    start = phase_ms + first_k * period_ms
    now_ms = start + span_ms
    cutoff_ms = now_ms - grace_ms
    plan = plan_backlog(
        next_after,
        first_ms,
        now_ms,
        cutoff_ms=cutoff_ms,
        policy=policy,
        catch_up_max=catch_up_max,
        detail_max=detail_max,
        scan_max=scan_max,
    )
    missed, fire, next_ms = reference(next_after, first_ms, now_ms, cutoff_ms, policy, catch_up_max)
    assert plan.fire == fire
    assert plan.next_ms == next_ms
    assert all(o <= now_ms for o in plan.fire)  # never early
    assert plan.missed == missed[:detail_max]
    folded = missed[detail_max:]
    if not folded:
        assert plan.summary is None
    else:
        assert plan.summary is not None
        assert (plan.summary.first_ms, plan.summary.last_ms) == (folded[0], folded[-1])
        if plan.summary.exact:
            assert plan.summary.count == len(folded)
        else:
            assert 0 < plan.summary.count < len(folded)
    assert plan.late_fires == len([o for o in fire if o < cutoff_ms])


def test_a_day_of_every_second_backlog_costs_101_results_and_bounded_work() -> None:
    calls = 0
    base = every(SECOND)

    def counting(after_ms: int) -> int | None:
        nonlocal calls
        calls += 1
        return base(after_ms)

    now_ms = T0 + DAY
    plan = plan_backlog(
        counting,
        T0,
        now_ms,
        cutoff_ms=now_ms - 300 * SECOND,
        policy=MisfireMode.RUN_ONCE,
        catch_up_max=100,
    )
    assert len(plan.missed) == 100
    assert plan.summary is not None and plan.summary.exact
    assert 100 + plan.summary.count == DAY // SECOND - 300  # all beyond grace
    assert len(plan.fire) == 301  # the on-time ones (grace 300 s, inclusive)
    assert calls < DAY // SECOND + 1000


def test_a_year_of_every_second_backlog_jumps_and_says_the_count_is_a_lower_bound() -> None:
    calls = 0
    base = every(SECOND)

    def counting(after_ms: int) -> int | None:
        nonlocal calls
        calls += 1
        return base(after_ms)

    now_ms = T0 + 365 * DAY
    plan = plan_backlog(
        counting, T0, now_ms, cutoff_ms=now_ms, policy=MisfireMode.SKIP, catch_up_max=1
    )
    assert plan.summary is not None and not plan.summary.exact
    assert plan.summary.last_ms == now_ms - SECOND
    assert calls < 150_000  # not 31 million
    assert plan.fire == [now_ms]


def _downtime(policy: str, **fields: object) -> tuple[list[int], list[tuple[str, int]]]:
    """An hourly schedule whose shard was down for five hours and a half."""
    shard = Shard()
    shard.send(
        upsert(spec={"every": "1h"}, misfire={"policy": policy, **fields}, overlap="allow"),
        at_ms=T0 + 5,
    )
    later, _ = shard.restored(T0 + 5 * HOUR + 30 * MINUTE)
    out = later.advance(T0 + 5 * HOUR + 30 * MINUTE)
    return (
        [r.scheduled_ms for r in out.runs],
        [(r.status, r.scheduled_ms) for r in out.results],
    )


def test_run_once_after_downtime_fires_the_latest_and_reports_the_rest_missed() -> None:
    fired, results = _downtime("run_once")
    assert fired == [T0 + 5 * HOUR]
    assert results == [("missed", T0 + k * HOUR) for k in range(1, 5)]


def test_catch_up_after_downtime_fires_all_in_order_up_to_its_bound() -> None:
    fired, results = _downtime("catch_up", catch_up_max=3)
    assert fired == [T0 + k * HOUR for k in (3, 4, 5)]
    assert results == [("missed", T0 + k * HOUR) for k in (1, 2)]


def test_skip_after_downtime_reports_everything_missed() -> None:
    fired, results = _downtime("skip")
    assert fired == []
    assert results == [("missed", T0 + k * HOUR) for k in range(1, 6)]


def test_inside_grace_a_late_occurrence_simply_fires() -> None:
    shard = Shard()
    shard.send(
        upsert(spec={"every": "1h"}, misfire={"policy": "skip", "grace_s": 600}), at_ms=T0 + 5
    )
    later, _ = shard.restored(T0 + HOUR + 599 * SECOND)
    out = later.advance(T0 + HOUR + 599 * SECOND)
    assert [r.scheduled_ms for r in out.runs] == [T0 + HOUR] and out.results == []
    assert later.core.stats["late_fired_total"] == 0


def test_run_once_with_an_on_time_occurrence_fires_only_that_one() -> None:
    shard = Shard()
    shard.send(
        upsert(spec={"every": "1h"}, misfire={"policy": "run_once", "grace_s": 600}), at_ms=T0 + 5
    )
    later, _ = shard.restored(T0 + 3 * HOUR + 60 * SECOND)
    out = later.advance(T0 + 3 * HOUR + 60 * SECOND)
    assert [r.scheduled_ms for r in out.runs] == [T0 + 3 * HOUR]
    assert out.statuses() == ["missed", "missed"]


def test_missed_results_are_written_by_the_shard_and_ignored_when_read_back() -> None:
    shard = Shard()
    shard.send(upsert(spec={"every": "1h"}, misfire={"policy": "skip"}), at_ms=T0 + 5)
    later, _ = shard.restored(T0 + 3 * HOUR + HOUR // 2)
    out = later.advance(T0 + 3 * HOUR + HOUR // 2)
    assert out.statuses() == ["missed"] * 3
    for record in out.results:
        assert record.worker == "shard-0" and record.error is not None
        assert record.error["type"] == "Misfire"
    before = later.core.stats["results_ignored_total"]
    for raw in out.records:
        if raw.topic.value == "results":
            assert later.raw_result(raw.key, raw.value).records == []
    assert later.core.stats["results_ignored_total"] == before + 3
    assert later.core.stats["missed_total"] == 3


def test_an_upsert_applied_late_fires_the_occurrence_it_was_produced_before() -> None:
    # Produced at 09:59, applied at 10:01 (the shard was catching up): 10:00 fires late.
    shard = Shard()
    shard.send(
        upsert(spec={"cron": "0 10 * * *"}),
        at_ms=T0 + 10 * HOUR + MINUTE,
        produced_ms=T0 + 10 * HOUR - MINUTE,
    )
    [run] = shard.advance(T0 + 10 * HOUR + MINUTE).runs
    assert run.scheduled_ms == T0 + 10 * HOUR
    assert run.fired_ms == T0 + 10 * HOUR + MINUTE


def test_an_upsert_applied_beyond_grace_lets_the_misfire_policy_decide() -> None:
    # Produced at 09:59, applied at 10:06 with a 300 s grace and policy skip: the
    # 10:00 occurrence is reported missed, not dropped silently.
    shard = Shard()
    late_ms = T0 + 10 * HOUR + 6 * MINUTE
    shard.send(
        upsert(spec={"cron": "0 10 * * *"}, misfire={"policy": "skip", "grace_s": 300}),
        at_ms=late_ms,
        produced_ms=T0 + 10 * HOUR - MINUTE,
    )
    out = shard.advance(late_ms)
    assert out.runs == []
    [missed] = out.results
    assert missed.status == "missed" and missed.scheduled_ms == T0 + 10 * HOUR


def test_an_upsert_produced_long_ago_looks_back_two_graces_at_most() -> None:
    # A producer clock a day behind must not replay the day: every minute, 300 s
    # grace, run_once -> the occurrences of the last 600 s only.
    shard = Shard()
    shard.send(
        upsert(spec={"every": "60s"}, misfire={"policy": "run_once", "grace_s": 300}),
        at_ms=T0 + DAY + 30 * SECOND,
        produced_ms=T0,
    )
    out = shard.advance(T0 + DAY + 30 * SECOND)
    fired = sorted(run.scheduled_ms for run in out.runs)
    assert fired == [T0 + DAY - 4 * MINUTE]  # the oldest within grace; the rest overlap
    missed = [r.scheduled_ms for r in out.results if r.status == "missed"]
    assert missed == [T0 + DAY - m * MINUTE for m in (9, 8, 7, 6, 5)]
