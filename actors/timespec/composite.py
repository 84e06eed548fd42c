"""Several specs merged, minus excluded days, with business-day adjustment.

``{"any": [SPEC, ...], "exclude": [EXCLUSION, ...], "adjust": "skip", "tz": ZONE}``:

- the fires of every member (cron, every, at, rrule, business_day) merged in time
  order, an instant fired by two members once;
- minus the fires on an excluded *day*: an exclusion is a spec (the local days of
  ``tz`` on which it would fire at least once, e.g. ``{"cron": "0 0 * * SAT,SUN"}``)
  or a calendar (``{"calendar": {...}}``, the days it holds in its own zone,
  `topics.calendar_days`). Days, not instants, because that is what a holiday is,
  and what adjustment moves a fire off;
- ``adjust`` says what becomes of a *fixed-time* fire (a fixed-time cron, an rrule of
  FREQ DAILY or coarser, an at) that lands on an excluded day: ``skip`` (default;
  gone), ``next_business_day`` / ``previous_business_day`` (the same local time of
  ``tz`` on the nearest day that is not excluded, at most ``MAX_SHIFT_DAYS`` away, or
  gone), ``modified_following`` (the next one unless it is in another month, then
  the previous one: the banking rule). Interval and wildcard-cron fires are never
  moved: a fire every 5 minutes moved to Monday would be a burst;
- ``tz`` is the zone of the days of spec exclusions and of adjustment; by default
  the zone of the first member that has one, else UTC.

Adjusted fires may come out of order (Saturday 23:00 and Sunday 01:00 both go to
Monday, in the other order), so the next fire after ``t`` is the least adjusted
fire of the nominal fires from ``MAX_SHIFT_DAYS`` + 1 days before ``t`` on; the
walk stops once a nominal fire lies that far beyond the best answer. A fire on an
excluded day that is not moved skips the rest of that day in one step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date

from actors.timespec.base import BoundedSpec
from actors.timespec.businessday import BusinessDaySpec
from actors.timespec.wall import DAY_S, day_of, day_start_s, instants_of, wall_of
from actors.timespec.zones import ZoneTable

ADJUSTMENTS = ("skip", "next_business_day", "previous_business_day", "modified_following")
# A fire moved further than this is dropped: two weeks cover every run of public
# holidays and weekends in the world's calendars (Golden Week, Chinese New Year).
MAX_SHIFT_DAYS = 14
_MAX_STEPS = 100_000  # nominal fires examined for one answer before giving up (None)
# Nothing further than this is searched for: a spec whose every day is excluded
# for eleven years is exhausted.
_HORIZON_MS = 11 * 366 * DAY_S * 1000
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MEMO_MAX = 8192

# An exclusion: (local day of an instant, does that day count as excluded).
DayRule = tuple[ZoneTable | None, Callable[[int], bool]]


class Member:
    """A member spec and whether its fires are fixed-time (movable)."""

    __slots__ = ("fixed_time", "spec")

    def __init__(self, spec: BoundedSpec, fixed_time: bool):
        self.spec = spec
        self.fixed_time = fixed_time


class CompositeSpec(BoundedSpec):
    """See the module docstring."""

    __slots__ = ("_fixed", "_loose", "_memo", "adjust", "exclusions", "members", "zone")

    kind = "any"

    def __init__(
        self,
        members: Sequence[Member],
        exclusions: Sequence[DayRule],
        adjust: str,
        zone: ZoneTable | None,
        *,
        offset_ms: int = 0,
        start_ms: int | None = None,
        end_ms: int | None = None,
    ):
        super().__init__(offset_ms, start_ms, end_ms)
        self.members = tuple(members)
        self.exclusions = tuple(exclusions)
        self.adjust = adjust
        self.zone = zone
        # The walk of one answer repeats most of the previous one's (the window
        # behind it): each nominal step and where it moved, by the instant asked.
        self._memo: dict[int, tuple[int | None, int | None]] = {}
        # Only fixed-time fires are moved; the others are skipped on excluded days.
        moves = adjust != "skip"
        self._fixed = tuple(m for m in self.members if m.fixed_time and moves)
        self._loose = tuple(m for m in self.members if not (m.fixed_time and moves))
        for member in self.members:
            if isinstance(member.spec, BusinessDaySpec):
                member.spec.excluded_day = self.excluded_local_day

    # -- days ---------------------------------------------------------------
    def excluded_local_day(self, day: int) -> bool:
        """Is local day ``day`` of ``tz`` excluded? (business days, adjustment)"""
        return self.excluded_until_s(day_start_s(self.zone, day)) is not None

    def excluded_until_s(self, instant_s: int) -> int | None:
        """None if the day of ``instant_s`` is allowed, else the first instant after
        the excluded day (the latest end among the exclusions that hold it)."""
        until: int | None = None
        for zone, holds in self.exclusions:
            day = day_of(zone, instant_s)
            if holds(day):
                end_s = day_start_s(zone, day + 1)
                until = end_s if until is None else max(until, end_s)
        return until

    def excluded_by(self, instant_ms: int) -> list[int]:
        """The indices (in ``exclude``) of the exclusions that hold the day of an
        instant: why a fire then did not happen (``kafkron next --why``)."""
        instant_s = instant_ms // 1000
        return [
            i for i, (zone, holds) in enumerate(self.exclusions) if holds(day_of(zone, instant_s))
        ]

    def nominal_between(self, after_ms: int, until_ms: int, limit: int) -> list[tuple[int, bool]]:
        """The members' merged fires in ``(after_ms, until_ms]`` before exclusions
        (at most ``limit``), each with whether it is fixed-time (may be moved)."""
        out: list[tuple[int, bool]] = []
        t = after_ms
        while len(out) < limit:
            fire_ms = _least(self.members, t)
            if fire_ms is None or fire_ms > until_ms:
                break
            fixed = any(
                m.fixed_time and m.spec.next_after(fire_ms - 1) == fire_ms for m in self.members
            )
            out.append((fire_ms, fixed))
            t = fire_ms
        return out

    def moved_to(self, fire_ms: int) -> int | None:
        """Where the adjustment moves a fixed-time fire on an excluded day (None: dropped)."""
        return None if self.adjust == "skip" else self._moved(fire_ms)

    # -- fires --------------------------------------------------------------
    def _next_nominal_ms(self, after_ms: int) -> int | None:
        if not self.exclusions:
            return _least(self.members, after_ms)
        if self.adjust == "skip":
            return self._next_skipping(self.members, after_ms)
        loose = self._next_skipping(self._loose, after_ms) if self._loose else None
        fixed = self._next_adjusted(after_ms, loose) if self._fixed else None
        if loose is None or (fixed is not None and fixed < loose):
            return fixed
        return loose

    def _next_skipping(self, members: Sequence[Member], after_ms: int) -> int | None:
        t = after_ms
        for _ in range(_MAX_STEPS):
            fire_ms = _least(members, t)
            if fire_ms is None:
                return None
            until_s = self.excluded_until_s(fire_ms // 1000)
            if until_s is None:
                return fire_ms
            t = max(fire_ms, until_s * 1000 - 1)  # the rest of the excluded day at once
        return None

    def _next_adjusted(self, after_ms: int, bound_ms: int | None) -> int | None:
        """The least adjusted fixed-time fire after ``after_ms`` (below ``bound_ms``,
        an answer already known, if any)."""
        # A fire moves back at most the window (previous), forward never earlier
        # than its own day (next, modified following: a DST day is at most a day).
        back_ms = (MAX_SHIFT_DAYS + 1) * DAY_S * 1000
        ahead_ms = back_ms if self.adjust != "next_business_day" else DAY_S * 1000
        t = after_ms - back_ms
        best = bound_ms
        memo = self._memo
        for _ in range(_MAX_STEPS):
            step = memo.get(t)
            if step is None:
                fire_ms = _least(self._fixed, t)
                moved = None
                if fire_ms is not None:
                    excluded = self.excluded_until_s(fire_ms // 1000) is not None
                    moved = self._moved(fire_ms) if excluded else fire_ms
                if len(memo) >= _MEMO_MAX:
                    memo.clear()
                memo[t] = step = (fire_ms, moved)
            fire_ms, moved = step
            if fire_ms is None or fire_ms > after_ms + _HORIZON_MS:
                break
            if best is not None and fire_ms > best + ahead_ms:
                break
            t = fire_ms
            if moved is not None and moved > after_ms and (best is None or moved < best):
                best = moved
        return best if best != bound_ms else None

    def _moved(self, fire_ms: int) -> int | None:
        """The fire moved to the nearest allowed day by the adjustment, or None."""
        wall_s = wall_of(self.zone, fire_ms // 1000)
        day, time_s = divmod(wall_s, DAY_S)
        sub_ms = fire_ms % 1000
        if self.adjust == "modified_following":
            found = self._shifted(day, time_s, +1)
            if found is None or _month(found[0]) != _month(day):
                found = self._shifted(day, time_s, -1)
        else:
            found = self._shifted(day, time_s, +1 if self.adjust == "next_business_day" else -1)
        return None if found is None else found[1] * 1000 + sub_ms

    def _shifted(self, day: int, time_s: int, step: int) -> tuple[int, int] | None:
        """(day, instant) of the same local time on the nearest allowed day."""
        for k in range(1, MAX_SHIFT_DAYS + 1):
            other = day + step * k
            instants = instants_of(
                self.zone, other * DAY_S + time_s, gap_shift=True, fold_once=True
            )
            if instants and self.excluded_until_s(instants[0]) is None:
                return other, instants[0]
        return None


def _least(members: Sequence[Member], after_ms: int) -> int | None:
    """The members' least fire after ``after_ms`` (an instant two fire is one fire)."""
    best: int | None = None
    for member in members:
        fire = member.spec.next_after(after_ms)
        if fire is not None and (best is None or fire < best):
            best = fire
    return best


def _month(day: int) -> tuple[int, int]:
    d = date.fromordinal(day + _EPOCH_ORDINAL)
    return d.year, d.month
