"""Misfire planning: what to do with the occurrences that came due while nobody fired them.

An occurrence ``o`` found at instant ``now`` is *on time* when ``now - o <= grace``
and simply fires, late or not. Older ones are *misfired* (the shard was down, the
partition was moving, the process stalled); the schedule's misfire policy says
which of them still fire:

==========  =================================================================
policy      misfired occurrences (those inside grace always fire)
==========  =================================================================
run_once    the latest fires, unless an on-time occurrence fires anyway
            (one run stands for the whole backlog, as Quartz's "fire once
            now"); the others are reported ``missed``
catch_up    the latest ``catch_up_max`` fire oldest first; older ones are
            reported ``missed`` (the newest work is the most useful when
            the backlog is too long, as Temporal's catch-up window drops
            the oldest actions)
skip        none fire; all are reported ``missed``
==========  =================================================================

Missed occurrences are never silent (docs/DESIGN.md §3.2) but they are bounded: the
oldest `MISSED_DETAIL_MAX` are reported one result each, and every further one
is folded into ONE summary result carrying the count and the first and last
instant. An every-second schedule that was down for a day therefore costs 101
results, not 86,400.

The work is bounded as well. The planner walks the backlog one occurrence at a
time for at most `SCAN_MAX` occurrences, keeping only a few of them in memory
(a day of every-second backlog is counted exactly, in tens of milliseconds).
Past that it jumps: it gallops back from the grace cutoff in windows growing
fourfold until it holds the few latest misfired occurrences it needs, so a year
of every-second backlog costs about `SCAN_MAX` ``next_after`` calls instead of
31 million. After a jump the count in the summary is a lower bound, and the
summary says so (``exact=False``, "at least N occurrences").

The same planner serves ``resume``: with the cutoff just after ``now`` every
occurrence is "misfired" and policy ``skip`` reports them all (as ``skipped``,
the caller decides the status) without firing any.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from topics.vocabulary import MisfireMode

NextAfter = Callable[[int], int | None]

MISSED_DETAIL_MAX = 100
SCAN_MAX = 100_000


@dataclass(frozen=True, slots=True)
class MissedRange:
    """Missed occurrences folded into one result: ``count`` of them in [first, last]."""

    first_ms: int
    last_ms: int
    count: int
    exact: bool  # False after a jump: ``count`` is then a lower bound


@dataclass(slots=True)
class Backlog:
    """The plan for the occurrences in [first_ms, now_ms], all in scheduled order."""

    missed: list[int] = field(default_factory=list)  # reported one result each
    summary: MissedRange | None = None  # the missed after ``missed``, folded into one
    fire: list[int] = field(default_factory=list)  # to fire, oldest first
    late_fires: int = 0  # how many of ``fire`` (its head) were misfired
    next_ms: int | None = None  # the first occurrence after now_ms; None: exhausted


def plan_backlog(
    next_after: NextAfter,
    first_ms: int | None,
    now_ms: int,
    *,
    cutoff_ms: int,
    policy: MisfireMode,
    catch_up_max: int,
    detail_max: int = MISSED_DETAIL_MAX,
    scan_max: int = SCAN_MAX,
) -> Backlog:
    """Split the due occurrences from ``first_ms`` on into missed and fired ones.

    ``next_after(t)`` is the first occurrence strictly after ``t`` (None when the
    spec is exhausted). Occurrences before ``cutoff_ms`` are misfired (callers pass
    ``now_ms - grace_ms``); those in [cutoff_ms, now_ms] fire. Never fires an
    occurrence later than ``now_ms`` (never early).
    """
    plan = Backlog()
    if first_ms is None or first_ms > now_ms:
        plan.next_ms = first_ms
        return plan
    if first_ms >= cutoff_ms:  # the steady state: nothing misfired
        _fire_on_time(plan, next_after, first_ms, now_ms)
        return plan

    # Walk the misfired occurrences, keeping only what the plan can need: the
    # oldest ones (reported one by one), the one after them (a summary's first),
    # and the newest few (the ones a policy fires, and the last missed before them).
    keep_max = catch_up_max if policy == MisfireMode.CATCH_UP else 1
    scan_limit = max(scan_max, keep_max + detail_max + 1)
    oldest: list[int] = []
    summary_first_ms = 0
    newest: deque[int] = deque(maxlen=keep_max + 1)
    walked = 0
    o: int | None = first_ms
    while o is not None and o < cutoff_ms and walked < scan_limit:
        if walked < detail_max:
            oldest.append(o)
        elif walked == detail_max:
            summary_first_ms = o
        newest.append(o)
        walked += 1
        o = next_after(o)
    exact = o is None or o >= cutoff_ms
    # Past the walk: jump to the cutoff for the on-time part.
    on_time_first = o if exact else next_after(cutoff_ms - 1)
    on_time_due = on_time_first is not None and on_time_first <= now_ms

    if policy == MisfireMode.CATCH_UP:
        keep = catch_up_max
    elif policy == MisfireMode.RUN_ONCE:
        keep = 0 if on_time_due else 1
    else:
        keep = 0
    missed_count = 0
    if not exact:
        tail = _latest_before(next_after, cutoff_ms, floor_ms=newest[-1], want=keep + 1)
        if len(tail) < keep + 1 or next_after(newest[-1]) == tail[0]:
            exact = True  # the walk and the tail meet: nothing was jumped over
            newest.extend(tail)
            walked += len(tail)
        else:
            # The middle was never walked: the count is a lower bound.
            plan.missed = oldest
            missed_count = walked - detail_max + 1  # the walk's remainder and tail[0]
            plan.summary = MissedRange(summary_first_ms, tail[0], missed_count, exact=False)
            plan.fire = tail[1:]
    if exact:
        keep = min(keep, walked)
        missed_count = walked - keep
        plan.missed = oldest[:missed_count]
        if missed_count > detail_max:
            last_missed_ms = newest[len(newest) - keep - 1]
            folded = missed_count - detail_max
            plan.summary = MissedRange(summary_first_ms, last_missed_ms, folded, exact=True)
        plan.fire = list(newest)[len(newest) - keep :]
    plan.late_fires = len(plan.fire)
    if on_time_due:
        assert on_time_first is not None
        _fire_on_time(plan, next_after, on_time_first, now_ms)
    else:
        plan.next_ms = on_time_first
    return plan


def _fire_on_time(plan: Backlog, next_after: NextAfter, first_ms: int, now_ms: int) -> None:
    o: int | None = first_ms
    while o is not None and o <= now_ms:
        plan.fire.append(o)
        o = next_after(o)
    plan.next_ms = o


def _latest_before(next_after: NextAfter, cutoff_ms: int, *, floor_ms: int, want: int) -> list[int]:
    """Up to ``want`` latest occurrences in (floor_ms, cutoff_ms), ascending.

    Gallops back from the cutoff in windows growing fourfold, so the walk costs
    about as many ``next_after`` calls as the last window holds occurrences.
    Fewer than ``want`` are returned only when (floor_ms, cutoff_ms) holds fewer.
    """
    span_ms = 1_000
    while True:
        start_ms = max(floor_ms, cutoff_ms - span_ms)
        found: deque[int] = deque(maxlen=want)
        o = next_after(start_ms)
        while o is not None and o < cutoff_ms:
            found.append(o)
            o = next_after(o)
        if len(found) >= want or start_ms == floor_ms:
            return list(found)
        span_ms *= 4
