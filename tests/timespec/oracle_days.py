"""Independent oracles for RRULE zones, excluded days, adjustment and business days.

They use zoneinfo directly (never our stretch tables, ``wall`` or the composite's
walk) and plain datetime arithmetic, one day or one wall time at a time: slow and
obviously right, which is what an oracle is for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

MINUTE = timedelta(minutes=1)


def wall_to_instants(
    wall: datetime, zone: ZoneInfo, *, gap_shift: bool, fold_once: bool
) -> list[int]:
    """Instants (epoch s) of a naive wall time by the DST rule, through zoneinfo only."""
    real = []
    for fold in (0, 1):
        t = int(wall.replace(tzinfo=zone, fold=fold).timestamp())
        if datetime.fromtimestamp(t, zone).replace(tzinfo=None) == wall:
            real.append(t)
    real = sorted(set(real))
    if real:
        return real[:1] if fold_once else real
    if not gap_shift:
        return []
    # In a gap: walk minutes from three hours before to the first wall time past it.
    t = int(wall.replace(tzinfo=zone, fold=0).timestamp()) - 3 * 3600
    while datetime.fromtimestamp(t, zone).replace(tzinfo=None) <= wall:
        t += 60
    # Back to the very first second of the stretch after the gap.
    while datetime.fromtimestamp(t - 1, zone).replace(tzinfo=None) > wall:
        t -= 1
    return [t]


def local_date(instant_s: float, zone: ZoneInfo) -> date:
    return datetime.fromtimestamp(instant_s, zone).date()


def adjusted(
    fires_s: Iterable[int],
    *,
    excluded: Callable[[int], bool],
    fixed: Callable[[int], bool],
    adjust: str,
    zone: ZoneInfo,
    max_shift_days: int,
) -> list[int]:
    """The fires after exclusion and adjustment (sorted, deduplicated)."""
    out: set[int] = set()
    for t in fires_s:
        if not excluded(t):
            out.add(t)
            continue
        if adjust == "skip" or not fixed(t):
            continue
        local = datetime.fromtimestamp(t, zone).replace(tzinfo=None)

        def shift(step: int, local: datetime = local) -> tuple[date, int] | None:
            for k in range(1, max_shift_days + 1):
                wall = local + timedelta(days=step * k)
                got = wall_to_instants(wall, zone, gap_shift=True, fold_once=True)
                if got and not excluded(got[0]):
                    return wall.date(), got[0]
            return None

        if adjust == "modified_following":
            found = shift(+1)
            if found is None or (found[0].year, found[0].month) != (local.year, local.month):
                found = shift(-1)
        else:
            found = shift(+1 if adjust == "next_business_day" else -1)
        if found is not None:
            out.add(found[1])
    return sorted(out)


def business_day_fires(
    nth: int,
    time_of_day: tuple[int, int],
    zone: ZoneInfo,
    excluded_date: Callable[[date], bool],
    first: date,
    last: date,
) -> list[int]:
    """Instants of the nth business day (Mon-Fri not excluded) of each month."""
    out = []
    year, month = first.year, first.month
    while (year, month) <= (last.year, last.month):
        d = date(year, month, 1)
        days = []
        while d.month == month:
            if d.weekday() < 5 and not excluded_date(d):
                days.append(d)
            d += timedelta(days=1)
        if len(days) >= abs(nth):
            day = days[nth - 1] if nth > 0 else days[nth]
            wall = datetime(day.year, day.month, day.day, *time_of_day)
            out.extend(wall_to_instants(wall, zone, gap_shift=True, fold_once=True))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def utc(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())
