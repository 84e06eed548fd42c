"""UTC offsets of an IANA zone as a sorted list of fixed-offset stretches.

zoneinfo answers "what is the offset at instant t" but does not publish its
transition table, and the cron layer needs exactly that: the stretch of real time
around ``t`` during which wall time is ``t + offset``, and the offset just before
the stretch began (to know whether its start is a gap or a fold).

We ask zoneinfo only its public question. Per UTC calendar year we sample the offset
once a day and bisect each change down to the second. That is exact as long as no
two offset changes are less than a day apart: since 1970 the closest pair in tzdata
is about a week apart (the test suite checks every zone against zoneinfo's own
transition list), and rule-based years after 2037 have two changes months apart.
A stretch also ends at each UTC new year (keeping its real start), so year tables
are independent. A year costs about 1 ms once per zone; afterwards a lookup is one
``bisect``.
"""

from __future__ import annotations

import zoneinfo
from bisect import bisect_right
from datetime import date, datetime
from functools import lru_cache
from typing import NamedTuple

from actors.timespec.errors import SpecError

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_PROBE_S = 86_400
_LOOKBACK_S = 2 * 86_400
# Years beyond these are clamped: datetime stops at 9999, and the zone rules of year
# 9998 (a POSIX TZ rule by then) are as good as any for the instants after it.
_FIRST_YEAR = 1900
_LAST_YEAR = 9998


class Stretch(NamedTuple):
    """Real instants ``[start_s, end_s)`` with wall time = instant + ``offset_s``."""

    start_s: int
    end_s: int
    offset_s: int
    offset_before_s: int  # offset in force just before start_s (equal: no transition)


class ZoneTable:
    """Stretches of one zone, built per UTC year on first use."""

    __slots__ = ("_info", "_years", "name")

    def __init__(self, name: str, info: zoneinfo.ZoneInfo):
        self.name = name
        self._info = info
        self._years: dict[int, tuple[list[int], list[Stretch]]] = {}

    def offset_s(self, instant_s: int) -> int:
        delta = datetime.fromtimestamp(instant_s, self._info).utcoffset()
        return 0 if delta is None else int(delta.total_seconds())

    def stretch_at(self, instant_s: int) -> Stretch:
        """The stretch containing ``instant_s``."""
        year = date.fromordinal(
            min(max(instant_s // 86_400, _MIN_DAY), _MAX_DAY) + _EPOCH_ORDINAL
        ).year
        year = min(max(year, _FIRST_YEAR), _LAST_YEAR)
        table = self._years.get(year)
        if table is None:
            table = self._build_year(year)
        starts, stretches = table
        i = bisect_right(starts, instant_s) - 1
        if i < 0:  # before 1900: the first stretch stretches back
            i = 0
        stretch = stretches[i]
        if instant_s >= stretch.end_s:  # after 9998
            return Stretch(stretch.start_s, 2**62, stretch.offset_s, stretch.offset_before_s)
        return stretch

    def _build_year(self, year: int) -> tuple[list[int], list[Stretch]]:
        lo = _year_start_s(year)
        hi = _year_start_s(year + 1)
        # Probe from two days before the year so that a stretch that began just
        # before new year keeps its real start (and the offset before it): a fold
        # or gap straddling 1 January must look the same as any other.
        scan_lo = lo - _LOOKBACK_S
        changes: list[tuple[int, int]] = []  # (first instant of the new offset, new offset)
        prev_t, prev_off = scan_lo, self.offset_s(scan_lo)
        t = scan_lo
        while t < hi:
            t = min(t + _PROBE_S, hi)
            off = self.offset_s(t)
            if off != prev_off:
                a, b = prev_t, t  # offset(a) == prev_off != offset(b) == off
                while b - a > 1:
                    mid = (a + b) // 2
                    if self.offset_s(mid) == prev_off:
                        a = mid
                    else:
                        b = mid
                changes.append((b, off))
                prev_off = off
            prev_t = t
        early = [c for c in changes if c[0] <= lo]
        late = [c for c in changes if c[0] > lo]
        if early:
            start, offset = early[-1]
            before = self.offset_s(start - 1)
        else:
            start, offset = lo, self.offset_s(lo)
            before = offset  # no transition in the two days before: nothing to see
        starts = [lo]  # bisect keys: the first stretch answers for the whole year start
        stretches: list[Stretch] = []
        for change_s, new_offset in late:
            stretches.append(Stretch(start, change_s, offset, before))
            starts.append(change_s)
            start, before, offset = change_s, offset, new_offset
        stretches.append(Stretch(start, hi, offset, before))
        table = (starts, stretches)
        if len(self._years) > 64:
            self._years.clear()
        self._years[year] = table
        return table


_MIN_DAY = date(_FIRST_YEAR, 1, 1).toordinal() - _EPOCH_ORDINAL
_MAX_DAY = date(_LAST_YEAR, 12, 31).toordinal() - _EPOCH_ORDINAL


def _year_start_s(year: int) -> int:
    return (date(year, 1, 1).toordinal() - _EPOCH_ORDINAL) * 86_400


def is_utc(name: str) -> bool:
    return name in ("UTC", "Etc/UTC", "Etc/Zulu", "Zulu", "UCT", "Etc/UCT", "GMT", "Etc/GMT")


@lru_cache(maxsize=1024)
def load_zone(name: str) -> ZoneTable:
    """The shared table of an IANA zone; ``SpecError`` pointing at ``spec.tz`` if unknown."""
    try:
        info = zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise SpecError(
            f"spec.tz: unknown time zone {name!r}; use an IANA name like "
            "'Europe/London' or 'America/New_York'"
        ) from None
    return ZoneTable(name, info)
