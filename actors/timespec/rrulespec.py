"""An RFC 5545 RRULE in a zone: ``{"rrule": "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
"dtstart": "2026-01-01T18:00:00", "tz": "Europe/London"}``.

The recurrence is expanded in local wall time from ``dtstart`` (a local time, no
offset: RFC 5545's DTSTART with a TZID) by python-dateutil's ``rrule``, the
reference implementation of the RFC in Python; turning wall times into instants is
ours, with the cron DST rule (docs/DESIGN.md §5.3): a rule of FREQ DAILY or coarser
is fixed-time (the ``dst`` policy applies: a gap's wall time fires at the gap's end
or not at all, a fold's once or twice), a sub-daily rule fires at every real instant
of its wall times, as a wildcard cron does.

dateutil answers "the first occurrence after" by walking from ``dtstart``; a shard
asks with ever later instants, so the occurrences walked are kept (a window of
them, ``_KEEP``) and each question continues the same walk: amortised O(1) per fire.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from datetime import datetime

from dateutil.rrule import DAILY, rrule, rrulestr

from actors.timespec.base import BoundedSpec
from actors.timespec.errors import SpecError
from actors.timespec.wall import DAY_S, instants_of, offset_at
from actors.timespec.zones import ZoneTable

_NAIVE_EPOCH = datetime(1970, 1, 1)
_KEEP = 4096  # wall times kept behind the walk's front (re-walked from dtstart if asked earlier)
_MAX_WALK = 200_000  # occurrences walked for one answer before giving up (None)


def parse_rrule(text: object, dtstart: object) -> rrule:
    """dateutil's rule of ``spec.rrule`` from ``spec.dtstart``; `SpecError` otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError('spec.rrule: expected an RFC 5545 rule such as "FREQ=WEEKLY;BYDAY=MO"')
    body = text.strip()
    if body.upper().startswith("RRULE:"):
        body = body[6:]
    if "\n" in body or "DTSTART" in body.upper() or "TZID" in body.upper():
        raise SpecError(
            "spec.rrule: one RRULE line only; give its start as spec.dtstart and its zone "
            "as spec.tz"
        )
    if not isinstance(dtstart, str):
        raise SpecError(
            'spec.dtstart: required with an rrule, a local time such as "2026-01-05T09:00:00"'
        )
    try:
        start = datetime.fromisoformat(dtstart)
    except ValueError:
        raise SpecError(
            f"spec.dtstart: {dtstart!r} is not a local time YYYY-MM-DDTHH:MM:SS"
        ) from None
    if start.tzinfo is not None:
        raise SpecError(
            f"spec.dtstart: {dtstart!r} has an offset; give the local time and the zone as spec.tz"
        )
    try:
        rule = rrulestr(body, dtstart=start.replace(microsecond=0))
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise SpecError(f"spec.rrule: {exc}") from None
    if not isinstance(rule, rrule):
        raise SpecError("spec.rrule: one RRULE only (no EXDATE, RDATE or sets)")
    return rule


class RRuleSpec(BoundedSpec):
    """Fires at the instants of an RRULE's wall times in ``zone`` (None: UTC)."""

    __slots__ = (
        "_done",
        "_fold_once",
        "_gap_shift",
        "_trimmed",
        "_walk",
        "_walls",
        "fixed_time",
        "rule",
        "zone",
    )

    kind = "rrule"

    def __init__(
        self,
        rule: rrule,
        zone: ZoneTable | None,
        *,
        gap_shift: bool = True,
        fold_once: bool = True,
        offset_ms: int = 0,
        start_ms: int | None = None,
        end_ms: int | None = None,
    ):
        super().__init__(offset_ms, start_ms, end_ms)
        self.rule = rule
        self.zone = zone
        # FREQ DAILY or coarser names times of day: fixed-time, the dst policy applies.
        self.fixed_time = rule._freq <= DAILY
        self._gap_shift = gap_shift if self.fixed_time else False
        self._fold_once = fold_once if self.fixed_time else False
        self._walls: list[int] = []
        self._walk: Iterator[datetime] = iter(rule)
        self._done = False
        self._trimmed = False

    def _restart(self) -> None:
        self._walls = []
        self._walk = iter(self.rule)
        self._done = False
        self._trimmed = False

    def _extend(self) -> int:
        """One more wall time onto ``_walls``: how many were dropped from its front
        to keep it bounded, or -1 when the rule is exhausted."""
        if self._done:
            return -1
        found = next(self._walk, None)
        if found is None:
            self._done = True
            return -1
        self._walls.append(int((found - _NAIVE_EPOCH).total_seconds()))
        if len(self._walls) > 2 * _KEEP:
            del self._walls[:_KEEP]
            self._trimmed = True
            return _KEEP
        return 0

    def _next_nominal_ms(self, after_ms: int) -> int | None:
        after_s = after_ms // 1000
        zone = self.zone
        # An instant after ``after`` has a wall time above this: at most one
        # transition lies within a day of it (zones.py), so its offset is one of two.
        low_wall_s = after_s + min(offset_at(zone, after_s), offset_at(zone, after_s + DAY_S))
        if self._trimmed and self._walls and self._walls[0] > low_wall_s:
            self._restart()  # asked about a time before the kept window
        i = bisect_right(self._walls, low_wall_s)
        best_s: int | None = None
        stop_wall_s = 0
        for _ in range(_MAX_WALK):
            if i >= len(self._walls):
                dropped = self._extend()
                if dropped < 0:
                    break
                i -= dropped
                continue
            wall_s = self._walls[i]
            i += 1
            if best_s is not None and wall_s > stop_wall_s:
                break
            for instant_s in instants_of(
                zone, wall_s, gap_shift=self._gap_shift, fold_once=self._fold_once
            ):
                if instant_s > after_s and (best_s is None or instant_s < best_s):
                    best_s = instant_s
                    # A later wall time reaches an earlier instant only across a
                    # fall-back, and by no more than its size.
                    fall_s = offset_at(zone, instant_s - DAY_S) - offset_at(zone, instant_s)
                    stop_wall_s = wall_s + max(0, fall_s)
        return None if best_s is None else best_s * 1000
