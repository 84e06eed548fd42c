"""``{"any": [...], "exclude": [...], "adjust": ..., "tz": ...}`` to a `CompositeSpec`.

Members and spec exclusions are compiled by the single-spec compiler handed in
(`compile._single`), so they are judged exactly as a spec of their own; errors
name the member (``spec.any[1].cron: ...``, ``spec.exclude[0].calendar.dates[2]: ...``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from actors.timespec.base import BoundedSpec
from actors.timespec.businessday import BusinessDaySpec
from actors.timespec.composite import ADJUSTMENTS, CompositeSpec, DayRule, Member
from actors.timespec.cronspec import CronSpec
from actors.timespec.errors import SpecError
from actors.timespec.rrulespec import RRuleSpec
from actors.timespec.simple import AtSpec
from actors.timespec.wall import day_start_s
from actors.timespec.zones import ZoneTable, is_utc, load_zone
from topics.calendar_days import CalendarDays, check_calendar_name, parse_calendar_days

MAX_MEMBERS = 32
MAX_EXCLUSIONS = 32
_DAY_MEMO_MAX = 4096  # days remembered per spec exclusion


def compile_composite(
    spec: Mapping[str, Any],
    *,
    single: Callable[[Mapping[str, Any]], BoundedSpec],
    offset_ms: int,
    start_ms: int | None,
    end_ms: int | None,
    calendars: Mapping[str, CalendarDays] | None = None,
) -> CompositeSpec:
    """``calendars``: the named calendars an ``exclude`` entry that is a name refers
    to. None (a command being validated, docs/DESIGN.md §5.7) accepts any well-formed
    name, and the spec it returns raises `CalendarNotBound` if a named exclusion is
    ever consulted: only a shard, which knows the calendars, compiles one to fire.
    A name ``calendars`` lacks raises `UnknownCalendar`."""
    members_json = spec["any"]
    if not isinstance(members_json, list) or not members_json:
        raise SpecError('spec.any: expected a list of specs, such as [{"cron": "0 9 * * *"}]')
    if len(members_json) > MAX_MEMBERS:
        raise SpecError(f"spec.any: at most {MAX_MEMBERS} specs, got {len(members_json)}")
    zone_name = _zone_name(spec, members_json)
    zone = None if is_utc(zone_name) else load_zone(zone_name)
    members = []
    for i, member in enumerate(members_json):
        compiled = _within(f"spec.any[{i}]", _in_zone(member, spec, zone_name), single)
        members.append(Member(compiled, _fixed_time(compiled)))
    adjust = spec.get("adjust", "skip")
    if adjust not in ADJUSTMENTS:
        raise SpecError(f"spec.adjust: {adjust!r} is not one of {', '.join(ADJUSTMENTS)}")
    exclusions_json = spec.get("exclude", [])
    if not isinstance(exclusions_json, list):
        raise SpecError("spec.exclude: expected a list of specs and calendars")
    if len(exclusions_json) > MAX_EXCLUSIONS:
        raise SpecError(
            f"spec.exclude: at most {MAX_EXCLUSIONS} entries, got {len(exclusions_json)}"
        )
    exclusions = [
        _exclusion(f"spec.exclude[{i}]", _in_zone(entry, spec, zone_name), zone, single, calendars)
        for i, entry in enumerate(exclusions_json)
    ]
    return CompositeSpec(
        members, exclusions, adjust, zone, offset_ms=offset_ms, start_ms=start_ms, end_ms=end_ms
    )


def _within(
    path: str, member: object, single: Callable[[Mapping[str, Any]], BoundedSpec]
) -> BoundedSpec:
    if not isinstance(member, Mapping):
        raise SpecError(f'{path}: expected a spec object such as {{"cron": "0 9 * * *"}}')
    if "any" in member:
        raise SpecError(f"{path}: an any spec cannot hold another; list its specs here instead")
    try:
        return single(member)
    except SpecError as exc:
        text = str(exc)
        raise SpecError(path + text[4:] if text.startswith("spec") else f"{path}: {text}") from None


def _in_zone(member: object, spec: Mapping[str, Any], zone_name: str) -> object:
    """A member or spec exclusion without a zone of its own takes the any spec's
    zone (its ``tz``, or its first member's)."""
    zoned = ("cron", "rrule", "business_day")
    if isinstance(member, Mapping) and "tz" not in member and any(k in member for k in zoned):
        return {**member, "tz": zone_name}
    return member


def _fixed_time(spec: BoundedSpec) -> bool:
    """Does the member name times of day (so adjustment may move its fires)?"""
    if isinstance(spec, CronSpec):
        return not spec.table.wildcard
    if isinstance(spec, RRuleSpec):
        return bool(spec.fixed_time)
    return isinstance(spec, (AtSpec, BusinessDaySpec))


def _zone_name(spec: Mapping[str, Any], members: list[Any]) -> str:
    tz = spec.get("tz")
    if tz is None:
        tz = next(
            (m["tz"] for m in members if isinstance(m, Mapping) and isinstance(m.get("tz"), str)),
            "UTC",
        )
    if not isinstance(tz, str):
        raise SpecError(f"spec.tz: expected an IANA zone name string, got {type(tz).__name__}")
    load_zone(tz)  # an unknown zone is refused here, naming spec.tz
    return tz


def _exclusion(
    path: str,
    entry: object,
    zone: ZoneTable | None,
    single: Callable[[Mapping[str, Any]], BoundedSpec],
    calendars: Mapping[str, CalendarDays] | None = None,
) -> DayRule:
    if isinstance(entry, str):
        name = check_calendar_name(entry, path)
        if calendars is None:
            return None, _unbound(name)
        found = calendars.get(name)
        if found is None:
            raise UnknownCalendar(name)
        return (None if is_utc(found.tz) else load_zone(found.tz)), found.holds
    if isinstance(entry, Mapping) and "calendar" in entry:
        if len(entry) != 1:
            raise SpecError(f"{path}: a calendar exclusion holds only its calendar")
        days = parse_calendar_days(entry["calendar"], f"{path}.calendar")
        cal_zone = None if is_utc(days.tz) else load_zone(days.tz)
        return cal_zone, days.holds
    compiled = _within(path, entry, single)
    return zone, _fires_on_day(compiled, zone)


class UnknownCalendar(Exception):
    """A spec names a calendar its compiler was not given (the shard lets the
    schedule wait for it, docs/DESIGN.md §5.7)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class CalendarNotBound(RuntimeError):
    """A spec compiled without its named calendars was asked for a fire: a bug (only
    the shard's own compile, which binds them, may fire)."""


def _unbound(name: str) -> Callable[[int], bool]:
    def holds(day: int) -> bool:
        raise CalendarNotBound(f"calendar {name!r} was not bound before firing")

    return holds


def _fires_on_day(spec: BoundedSpec, zone: ZoneTable | None) -> Callable[[int], bool]:
    """Does ``spec`` fire at least once during local day ``day`` of ``zone``?"""
    memo: dict[int, bool] = {}

    def holds(day: int) -> bool:
        found = memo.get(day)
        if found is None:
            start_s = day_start_s(zone, day)
            fire = spec.next_after(start_s * 1000 - 1)
            found = fire is not None and fire < day_start_s(zone, day + 1) * 1000
            if len(memo) >= _DAY_MEMO_MAX:
                memo.clear()
            memo[day] = found
        return found

    return holds
