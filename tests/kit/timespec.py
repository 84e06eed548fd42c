"""A brute-force oracle of when a cron schedule fires, DST days included.

It knows nothing of the compiler (actors/timespec): it walks every minute of a range,
takes the wall time of that minute in the zone from the standard library's
``zoneinfo``, and judges it by the rule of docs/DESIGN.md §5.3 alone:

- a *wildcard* cron (minute or hour field starting with ``*``) fires at every real
  minute whose wall time matches: a wall time a spring-forward gap skipped never
  fires, one a fall-back fold repeats fires twice;
- a *fixed-time* cron fires a repeated wall time once (``fold: once``, its first
  occurrence) or at both (``twice``), and a wall time inside a gap at the first
  minute after the gap (``gap: shift``) or not that day (``skip``).

Five-field expressions of numbers, lists, ranges, steps and ``*``; the day of the
month and the day of the week are not both restricted (cron's "either" rule for
that case is not modelled here).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

MINUTE_MS = 60_000

# (lowest, highest) value of each field: minute, hour, day of month, month, weekday
# (0 = Sunday).
_FIELD_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


def _field_values(text: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step = part.partition("/")
        if base == "*":
            first, last = low, high
        elif "-" in base:
            first, last = (int(x) for x in base.split("-"))
        else:
            first = last = int(base)
            if step:
                last = high
        values.update(range(first, last + 1, int(step or 1)))
    return frozenset(values)


class _Rule:
    """One expression with its DST policy, as sets of the values each field takes."""

    def __init__(self, expr: str, dst: dict[str, str]) -> None:
        fields = expr.split()
        if len(fields) != 5:
            raise ValueError(f"five fields expected: {expr!r}")
        if fields[2] != "*" and fields[4] != "*":
            raise ValueError(f"day of month and weekday both restricted: {expr!r}")
        bounds = zip(fields, _FIELD_BOUNDS, strict=True)
        self.sets = [_field_values(f, lo, hi) for f, (lo, hi) in bounds]
        self.wildcard = fields[0].startswith("*") or fields[1].startswith("*")
        self.fold_once = dst["fold"] == "once"
        self.gap_shift = dst["gap"] == "shift"

    def matches(self, wall: datetime) -> bool:
        minutes, hours, days, months, weekdays = self.sets
        return (
            wall.minute in minutes
            and wall.hour in hours
            and wall.day in days
            and wall.month in months
            and (wall.weekday() + 1) % 7 in weekdays
        )


def brute_force_many(
    zone_name: str, rules: Sequence[tuple[str, dict[str, str]]], from_ms: int, to_ms: int
) -> list[list[int]]:
    """For each ``(expression, dst)`` of ``rules``, its fires in ``[from_ms, to_ms)``
    (epoch ms, ascending), from one walk of every minute of the range in the zone."""
    zone = ZoneInfo(zone_name)
    judged = [_Rule(expr, dst) for expr, dst in rules]
    found: list[list[int]] = [[] for _ in judged]
    seen_walls: dict[datetime, int] = {}  # wall time -> the minute it was last seen
    previous_wall: datetime | None = None
    one_minute = timedelta(minutes=1)
    for t in range(from_ms - from_ms % MINUTE_MS, to_ms, MINUTE_MS):
        wall = datetime.fromtimestamp(t / 1000, zone).replace(tzinfo=None)
        repeated = wall in seen_walls  # a fold: this wall time was real before
        jumped = previous_wall is not None and wall - previous_wall > one_minute
        for rule, fires_at in zip(judged, found, strict=True):
            fires = rule.matches(wall)
            if fires and repeated and not rule.wildcard and rule.fold_once:
                fires = False  # the wall time's second occurrence
            if not fires and jumped and not rule.wildcard and rule.gap_shift:
                skipped = previous_wall + one_minute  # type: ignore[operator]
                while skipped < wall:
                    if rule.matches(skipped):
                        fires = True  # a wall time the gap skipped: the first minute after
                        break
                    skipped += one_minute
            if fires and t >= from_ms:
                fires_at.append(t)
        seen_walls[wall] = t
        if len(seen_walls) > 600:  # folds are at most hours long
            seen_walls = {w: s for w, s in seen_walls.items() if t - s < 6 * 3600_000}
        previous_wall = wall
    return found


def brute_force(
    expr: str, zone_name: str, from_ms: int, to_ms: int, dst: dict[str, str]
) -> list[int]:
    """The fires of one expression in ``[from_ms, to_ms)`` (see `brute_force_many`)."""
    return brute_force_many(zone_name, [(expr, dst)], from_ms, to_ms)[0]


def utc_ms(text: str) -> int:
    """``2026-03-01`` or ``2026-03-01T00:00:00`` (UTC) as epoch ms."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)
