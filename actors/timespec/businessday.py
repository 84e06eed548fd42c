"""The N-th (or N-th last) business day of each month at a local time of day.

``{"business_day": -1, "time": "18:00", "tz": "Europe/London"}`` fires at 18:00 on
the last business day of every month. A business day is a Monday to Friday that no
``exclude`` of the schedule's spec takes away (a calendar of holidays, say), so the
same spec follows the calendar it is given (docs/DESIGN.md §5.6). It is fixed-time:
a time of day inside a DST gap fires at the gap's end, in a fold once (the dst
policy applies as to a fixed-time cron).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from actors.timespec.base import BoundedSpec
from actors.timespec.errors import SpecError
from actors.timespec.wall import DAY_S, day_of, instants_of
from actors.timespec.zones import ZoneTable

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
# A month has at most 23 weekdays.
MAX_NTH = 23
# Months searched for an answer: ten years (a month whose every weekday is
# excluded has no N-th business day; a calendar that excludes all forever, none).
_MAX_MONTHS = 120


def parse_time_of_day(value: object) -> int:
    """Seconds since local midnight of ``spec.time`` (``HH:MM`` or ``HH:MM:SS``)."""
    if isinstance(value, str):
        parts = value.split(":")
        if len(parts) in (2, 3) and all(p.isdigit() and len(p) == 2 for p in parts):
            h, m = int(parts[0]), int(parts[1])
            sec = int(parts[2]) if len(parts) == 3 else 0
            if h < 24 and m < 60 and sec < 60:
                return h * 3600 + m * 60 + sec
    raise SpecError(f'spec.time: expected a local time of day such as "18:00", got {value!r}')


def parse_nth(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value == 0 or abs(value) > MAX_NTH:
        raise SpecError(
            f"spec.business_day: expected 1 to {MAX_NTH} (the N-th of the month) or -1 to "
            f"-{MAX_NTH} (-1 is the last), got {value!r}"
        )
    return value


class BusinessDaySpec(BoundedSpec):
    """Fires at ``time_s`` on the ``nth`` business day of each month of ``zone``."""

    __slots__ = ("_fold_once", "_gap_shift", "excluded_day", "nth", "time_s", "zone")

    kind = "business_day"
    fixed_time = True

    def __init__(
        self,
        nth: int,
        time_s: int,
        zone: ZoneTable | None,
        *,
        gap_shift: bool = True,
        fold_once: bool = True,
        offset_ms: int = 0,
        start_ms: int | None = None,
        end_ms: int | None = None,
    ):
        super().__init__(offset_ms, start_ms, end_ms)
        self.nth = nth
        self.time_s = time_s
        self.zone = zone
        self._gap_shift = gap_shift
        self._fold_once = fold_once
        # Set by a composite spec to its exclusions; alone, weekends only.
        self.excluded_day: Callable[[int], bool] = lambda _day: False

    def business_days(self, year: int, month: int) -> list[int]:
        """The month's business days (days since 1970-01-01), in order."""
        first = date(year, month, 1).toordinal() - _EPOCH_ORDINAL
        nxt = date(year + month // 12, month % 12 + 1, 1).toordinal() - _EPOCH_ORDINAL
        excluded = self.excluded_day
        return [d for d in range(first, nxt) if (d + 3) % 7 < 5 and not excluded(d)]

    def _next_nominal_ms(self, after_ms: int) -> int | None:
        after_s = after_ms // 1000
        today = date.fromordinal(day_of(self.zone, after_s) + _EPOCH_ORDINAL)
        year, month = today.year, today.month
        for _ in range(_MAX_MONTHS):
            days = self.business_days(year, month)
            if len(days) >= abs(self.nth):
                day = days[self.nth - 1] if self.nth > 0 else days[self.nth]
                for instant_s in instants_of(
                    self.zone,
                    day * DAY_S + self.time_s,
                    gap_shift=self._gap_shift,
                    fold_once=self._fold_once,
                ):
                    if instant_s > after_s:
                        return instant_s * 1000
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        return None
