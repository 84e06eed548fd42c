"""A cron schedule in a time zone: wall-time matches turned into real instants.

The rule (cronie's by default; the package docstring states it for users):

- wildcard schedules (minute or hour field starts with ``*``) fire at every real
  instant whose local wall time matches: skipped wall times are not real, and
  repeated ones are real twice;
- fixed-time schedules do the same, except that with ``gap: shift`` the matching
  wall times inside a spring-forward gap fire once, at the first instant after the
  gap (the transition itself), and with ``fold: once`` the wall times of a
  fall-back fold fire only at their first occurrence.

How: real time is a sequence of stretches with a fixed UTC offset (``zones``).
Inside a stretch, wall time is instant + offset, so the compiled table's
``next_wall_s`` answers directly; when the answer falls beyond the stretch we jump
to the next one. The two policies act only at a stretch's first instant (gap) or
on the wall times that the previous stretch already showed (fold). A UTC schedule
skips all of this.
"""

from __future__ import annotations

from actors.timespec.base import BoundedSpec
from actors.timespec.crontable import CronTable
from actors.timespec.zones import Stretch, ZoneTable

# Bound on stretches walked for one answer: 400 years of DST and new-year stretches
# (a satisfiable day rule matches at least once in that span).
_MAX_STRETCHES = 401 * 6


class CronSpec(BoundedSpec):
    """A compiled cron spec (see the module docstring for the DST rule)."""

    __slots__ = ("_fold_once", "_gap_shift", "_next_wall", "_stretch", "table", "uses_hash", "zone")

    kind = "cron"

    def __init__(
        self,
        table: CronTable,
        zone: ZoneTable | None,
        *,
        gap_shift: bool = True,
        fold_once: bool = True,
        uses_hash: bool = False,
        offset_ms: int = 0,
        start_ms: int | None = None,
        end_ms: int | None = None,
    ):
        super().__init__(offset_ms, start_ms, end_ms)
        self.table = table
        self.zone = zone
        self.uses_hash = uses_hash
        # Wildcard schedules ignore the policy: every real matching instant fires.
        self._gap_shift = gap_shift and not table.wildcard
        self._fold_once = fold_once and not table.wildcard
        self._next_wall = table.next_wall_s
        self._stretch = Stretch(0, 0, 0, 0)  # the last stretch used: consecutive asks reuse it

    def _next_nominal_ms(self, after_ms: int) -> int | None:
        after_s = after_ms // 1000
        if self.zone is None:
            wall_s = self._next_wall(after_s)
            return None if wall_s is None else wall_s * 1000
        fire_s = self._next_zoned_s(after_s)
        return None if fire_s is None else fire_s * 1000

    def _next_zoned_s(self, after_s: int) -> int | None:
        assert self.zone is not None
        next_wall = self._next_wall
        t = after_s
        for _ in range(_MAX_STRETCHES):
            stretch = self._stretch
            if not stretch.start_s <= t + 1 < stretch.end_s:
                stretch = self._stretch = self.zone.stretch_at(t + 1)
            start_s, end_s, offset_s, before_s = stretch
            if self._gap_shift and before_s < offset_s and t + 1 == start_s:
                # Entering a stretch right after a gap: the skipped wall times were
                # [start + before, start + offset). Any match there fires now.
                wall_s = next_wall(start_s + before_s - 1)
                if wall_s is not None and wall_s < start_s + offset_s:
                    return start_s
            after_wall_s = t + offset_s
            if self._fold_once and offset_s < before_s:
                # After a fall-back, wall times below start + before already
                # happened in the previous stretch: they fired there.
                after_wall_s = max(after_wall_s, start_s + before_s - 1)
            wall_s = next_wall(after_wall_s)
            if wall_s is None:
                return None
            fire_s = wall_s - offset_s
            if fire_s < end_s:
                return fire_s
            t = end_s - 1
        return None
