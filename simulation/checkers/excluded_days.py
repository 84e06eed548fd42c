"""No fire lands on an excluded day (docs/DESIGN.md §5.6).

For every schedule whose spec is an ``any`` with ``exclude``, each first attempt in
``{ns}.runs`` (and each Kafka target's record) is judged by its scheduled instant,
less the schedule's spread offset (spread moves a fire later, never onto another
day's rule): the local day of that instant must be held by no calendar of the spec
(its dates, ranges and weekdays, in the calendar's own zone, read by zoneinfo
here) and no spec exclusion must fire on it (the exclusion compiled alone, its day
bounded by zoneinfo). The judgement never asks the schedule's own compiled spec,
so a shard that fires the members without their exclusions is caught.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import orjson

from actors.timespec import compile_spec, spread_offset_ms
from simulation.checkers.evidence import Evidence, Verdict
from simulation.checkers.max_runs import first_attempts
from topics.calendar_days import calendar_names
from topics.timefmt import format_ms

_WEEKDAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")


def _zone_name(spec: Mapping[str, Any]) -> str:
    if isinstance(spec.get("tz"), str):
        return str(spec["tz"])
    for member in spec.get("any", []):
        if isinstance(member, Mapping) and isinstance(member.get("tz"), str):
            return str(member["tz"])
    return "UTC"


def _calendar_rule(days: Mapping[str, Any]) -> Callable[[int], bool]:
    zone = ZoneInfo(days.get("tz", "UTC"))
    held = {date.fromisoformat(d) for d in days.get("dates", [])}
    for first, last in days.get("ranges", []):
        d = date.fromisoformat(first)
        while d <= date.fromisoformat(last):
            held.add(d)
            d += timedelta(days=1)
    weekdays = {_WEEKDAYS.index(w.upper()[:3]) for w in days.get("weekdays", [])}

    def holds(instant_ms: int) -> bool:
        day = datetime.fromtimestamp(instant_ms / 1000, zone).date()
        return day in held or day.weekday() in weekdays

    return holds


def _spec_rule(entry: Mapping[str, Any], zone_name: str) -> Callable[[int], bool]:
    spec = dict(entry)
    if "tz" not in spec and any(k in spec for k in ("cron", "rrule", "business_day")):
        spec["tz"] = zone_name
    compiled = compile_spec(spec, schedule_id="")
    zone = ZoneInfo(zone_name)

    def holds(instant_ms: int) -> bool:
        day = datetime.fromtimestamp(instant_ms / 1000, zone).date()
        start = datetime.combine(day, time(), zone).timestamp()
        end = datetime.combine(day + timedelta(days=1), time(), zone).timestamp()
        fire = compiled.next_after(int(start * 1000) - 1)
        return fire is not None and fire < end * 1000

    return holds


def exclusion_rules(spec: Mapping[str, Any]) -> list[Callable[[int], bool]]:
    """The spec's inline exclusions as "is this instant's day excluded?" tests (its
    named calendars are judged by `_named_held`, by the version then in effect)."""
    if "any" not in spec:
        return []
    zone_name = _zone_name(spec)
    rules = []
    for entry in spec.get("exclude", []):
        if isinstance(entry, str):
            continue
        if "calendar" in entry:
            rules.append(_calendar_rule(entry["calendar"]))
        else:
            rules.append(_spec_rule(entry, zone_name))
    return rules


# A shard learns an edit at its next turn: a fire appended within this long after the
# edit was committed may have been decided by the version before it.
EDIT_SLACK_MS = 1_000


class CalendarVersions:
    """The named calendars as ``{ns}.calendars`` held them over time (DESIGN §5.7)."""

    def __init__(self, records: list[tuple[int, str, bytes | None]]) -> None:
        self._by_name: dict[str, list[tuple[int, Callable[[int], bool] | None]]] = {}
        for append_ms, name, value in records:
            rule = None if value is None else _calendar_rule(orjson.loads(value)["calendar"])
            self._by_name.setdefault(name, []).append((append_ms, rule))

    def at(self, name: str, at_ms: int) -> Callable[[int], bool] | None:
        """The calendar's rule in effect at ``at_ms`` (None: it did not exist)."""
        found = None
        for append_ms, rule in self._by_name.get(name, []):
            if append_ms > at_ms:
                break
            found = rule
        return found

    def held(self, name: str, instant_ms: int, decided_ms: int, live: bool = True) -> bool:
        """Was a fire at ``instant_ms`` decided by ``decided_ms`` surely excluded: its
        day held by the version in effect then, by the one a turn before, and (a live
        fire only: the backlog of an edit heard late is fired by the days before it,
        DESIGN §5.7; a backfill goes by the current book) by the one in effect at the
        instant, or the calendar unknown at all of them?"""
        rules = [self.at(name, decided_ms), self.at(name, decided_ms - EDIT_SLACK_MS)]
        if live:
            rules.append(self.at(name, instant_ms))
        return all(rule is None or rule(instant_ms) for rule in rules)


def check(evidence: Evidence) -> Verdict:
    verdict = Verdict("excluded-days", "no fire lands on a day its spec excludes")
    fired = first_attempts(evidence)
    appended = {r.run_id: r.append_ms for r in evidence.runs if r.attempt == 1}
    versions = CalendarVersions(evidence.calendars)
    # Instants a backfill may have fired: judged without the live backlog's relaxation.
    backfilled: dict[str, list[tuple[int, int]]] = {}
    for seen in evidence.backfills.values():
        spans = backfilled.setdefault(seen.schedule_id, [])
        spans.extend((first_ms, last_ms) for first_ms, last_ms, _ in seen.ranges)
    for schedule_id, command in sorted(evidence.definitions.items()):
        rules = exclusion_rules(command.spec)
        names = calendar_names(command.spec)
        if not rules and not names:
            continue
        verdict.checked += 1
        offset_ms = spread_offset_ms(schedule_id, command.spread_window_s)
        for run_id, scheduled_ms in sorted(fired.get(schedule_id, {}).items()):
            nominal_ms = scheduled_ms - offset_ms
            if any(rule(nominal_ms) for rule in rules):
                verdict.fail(f"{run_id} fired on an excluded day ({format_ms(nominal_ms)})")
            decided_ms = appended.get(run_id, scheduled_ms)
            spans = backfilled.get(schedule_id, [])
            live = not any(a <= scheduled_ms <= b for a, b in spans)
            for name in names:
                if versions.held(name, nominal_ms, decided_ms, live):
                    verdict.fail(
                        f"{run_id} fired on a day calendar {name!r} excluded (or before it"
                        f" existed) when it fired ({format_ms(decided_ms)})"
                    )
    return verdict
