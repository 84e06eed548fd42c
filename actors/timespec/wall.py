"""Local wall time and days of a zone, for the specs that think in days.

RRULEs, business days and excluded days reason in local dates and wall times; the
cron path has its own faster walk (``cronspec``). A wall time is seconds since
1970-01-01T00:00 *local* (naive), an instant is seconds since the epoch (UTC);
``zone`` None is UTC. The DST rule is the cron one (docs/DESIGN.md §5.3): a wall
time skipped by a gap is not real (``gap_shift``: it fires once at the gap's end),
a repeated one is real twice (``fold_once``: only the first counts).
"""

from __future__ import annotations

from actors.timespec.zones import ZoneTable

DAY_S = 86_400
# Offsets of every zone lie within ±26 h, and two transitions are days apart
# (zones.py): looking a day around a wall time sees every offset it can have.
_AROUND_S = DAY_S


def offset_at(zone: ZoneTable | None, instant_s: int) -> int:
    return 0 if zone is None else zone.stretch_at(instant_s).offset_s


def wall_of(zone: ZoneTable | None, instant_s: int) -> int:
    """The local wall time (naive seconds) of an instant."""
    return instant_s + offset_at(zone, instant_s)


def day_of(zone: ZoneTable | None, instant_s: int) -> int:
    """The local date of an instant, as days since 1970-01-01."""
    return wall_of(zone, instant_s) // DAY_S


def instants_of(
    zone: ZoneTable | None, wall_s: int, *, gap_shift: bool, fold_once: bool
) -> tuple[int, ...]:
    """The real instants whose local wall time is ``wall_s``, under the DST rule."""
    if zone is None:
        return (wall_s,)
    offsets = {
        zone.stretch_at(wall_s - _AROUND_S).offset_s,
        zone.stretch_at(wall_s).offset_s,
        zone.stretch_at(wall_s + _AROUND_S).offset_s,
    }
    real = sorted(
        {wall_s - off for off in offsets if zone.stretch_at(wall_s - off).offset_s == off}
    )
    if real:
        return (real[0],) if fold_once else tuple(real)
    if not gap_shift:
        return ()
    # Inside a gap: the first instant after it is the start of the stretch that
    # the wall time, read with the offset before the gap, falls into.
    before = min(offsets)
    return (zone.stretch_at(wall_s - before).start_s,)


def day_start_s(zone: ZoneTable | None, day: int) -> int:
    """The first instant of a local date (a midnight gap starts the day at its end)."""
    return instants_of(zone, day * DAY_S, gap_shift=True, fold_once=True)[0]
