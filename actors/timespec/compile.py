"""``compile_spec``: a command's spec, policy and bounds to a ``CompiledSpec``.

Validation lives here, once, so every caller (shard actor, CLI, simulation) rejects
the same inputs with the same messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.timespec.api import CompiledSpec
from actors.timespec.base import BoundedSpec
from actors.timespec.businessday import BusinessDaySpec, parse_nth, parse_time_of_day
from actors.timespec.composite_compile import compile_composite
from actors.timespec.cronparse import resolve_hash, split_fields, uses_hash
from actors.timespec.cronspec import CronSpec
from actors.timespec.crontable import compile_table
from actors.timespec.durations import parse_duration_s
from actors.timespec.errors import SpecError
from actors.timespec.hashing import spread_offset_ms
from actors.timespec.rrulespec import RRuleSpec, parse_rrule
from actors.timespec.simple import AtSpec, EverySpec
from actors.timespec.zones import ZoneTable, is_utc, load_zone
from topics.calendar_days import CalendarDays
from topics.timefmt import parse_instant
from topics.vocabulary import DstFold, DstGap

_KEYS = {
    "cron": {"cron", "tz"},
    "every": {"every", "anchor"},
    "at": {"at"},
    "rrule": {"rrule", "dtstart", "tz"},
    "business_day": {"business_day", "time", "tz"},
    "any": {"any", "exclude", "adjust", "tz"},
}
# Members of ``any`` and exclusions are single specs: no nesting.
_SINGLE = ("cron", "every", "at", "rrule", "business_day")
# A spread larger than a year would reorder a schedule's own occurrences.
_MAX_SPREAD_S = 366 * 86_400
_EXAMPLE = (
    '{"cron": "0 9 * * MON-FRI", "tz": "Europe/London"}, {"every": "90s"} or '
    '{"at": "2026-12-04T14:05:00Z"}, {"rrule": "FREQ=MONTHLY;BYMONTHDAY=1", "dtstart": '
    '"2026-01-01T09:00:00"} or {"any": [...], "exclude": [...]}'
)


def compile_spec(
    spec: Mapping[str, Any],
    *,
    schedule_id: str,
    dst: Mapping[str, Any] | None = None,
    spread_window_s: int = 0,
    start_ms: int | None = None,
    end_ms: int | None = None,
    calendars: Mapping[str, CalendarDays] | None = None,
) -> CompiledSpec:
    """Compile a schedule's ``spec`` object; raises ``SpecError`` (only) on bad input.

    ``dst`` is ``{"gap": "shift"|"skip", "fold": "once"|"twice"}`` (defaults shift,
    once; only fixed-time cron schedules consult it). ``spread_window_s`` adds the
    schedule's stable offset in ``[0, window)`` to every fire. ``start_ms`` and
    ``end_ms`` bound the (shifted) fires, both inclusive. ``calendars``: the named
    calendars ``exclude`` may name (`composite_compile.compile_composite`).
    """
    if not isinstance(schedule_id, str):
        raise SpecError(f"id: expected a string, got {type(schedule_id).__name__}")
    if not isinstance(spec, Mapping):
        raise SpecError(f"spec: expected an object like {_EXAMPLE}, got {type(spec).__name__}")
    kinds = [k for k in _KEYS if k in spec]
    if len(kinds) != 1:
        found = "none" if not kinds else " and ".join(kinds)
        raise SpecError(
            "spec: needs exactly one of cron, every, at, rrule, business_day, any "
            f"(found {found}); e.g. {_EXAMPLE}"
        )
    kind = kinds[0]
    _check_fields(spec, kind, "spec")
    gap_shift, fold_once = _dst_policy(dst)
    offset_ms = spread_offset_ms(schedule_id, _spread_s(spread_window_s))
    _check_bounds(start_ms, end_ms)
    if kind == "any":
        return compile_composite(
            spec,
            single=lambda member: _single(member, schedule_id, gap_shift, fold_once, 0, None, None),
            offset_ms=offset_ms,
            start_ms=start_ms,
            end_ms=end_ms,
            calendars=calendars,
        )
    return _single(spec, schedule_id, gap_shift, fold_once, offset_ms, start_ms, end_ms)


def _check_fields(spec: Mapping[str, Any], kind: str, path: str) -> None:
    unknown = sorted(str(k) for k in spec if k not in _KEYS[kind])
    if unknown:
        article = "an" if kind[0] in "aeiou" else "a"
        allowed = ", ".join(sorted(_KEYS[kind]))
        raise SpecError(
            f"{path}.{unknown[0]}: not a field of {article} {kind} spec (allowed: {allowed})"
        )


def _zone_of(spec: Mapping[str, Any]) -> ZoneTable | None:
    tz = spec.get("tz", "UTC")
    if not isinstance(tz, str):
        raise SpecError(f"spec.tz: expected an IANA zone name string, got {type(tz).__name__}")
    return None if is_utc(tz) else load_zone(tz)


def _single(
    spec: Mapping[str, Any],
    schedule_id: str,
    gap_shift: bool,
    fold_once: bool,
    offset_ms: int,
    start_ms: int | None,
    end_ms: int | None,
) -> BoundedSpec:
    """One spec of a single kind (cron, every, at, rrule, business_day)."""
    kinds = [k for k in _SINGLE if k in spec]
    if len(kinds) != 1:
        found = "none" if not kinds else " and ".join(kinds)
        raise SpecError(f"spec: needs exactly one of {', '.join(_SINGLE)} (found {found})")
    kind = kinds[0]
    _check_fields(spec, kind, "spec")
    if kind == "rrule":
        return RRuleSpec(
            parse_rrule(spec["rrule"], spec.get("dtstart")),
            _zone_of(spec),
            gap_shift=gap_shift,
            fold_once=fold_once,
            offset_ms=offset_ms,
            start_ms=start_ms,
            end_ms=end_ms,
        )
    if kind == "business_day":
        return BusinessDaySpec(
            parse_nth(spec["business_day"]),
            parse_time_of_day(spec.get("time")),
            _zone_of(spec),
            gap_shift=gap_shift,
            fold_once=fold_once,
            offset_ms=offset_ms,
            start_ms=start_ms,
            end_ms=end_ms,
        )
    if kind == "cron":
        fields, written = split_fields(spec["cron"])
        resolved = resolve_hash(fields, written, schedule_id)
        table = compile_table(resolved, written)
        return CronSpec(
            table,
            _zone_of(spec),
            gap_shift=gap_shift,
            fold_once=fold_once,
            uses_hash=uses_hash(fields),
            offset_ms=offset_ms,
            start_ms=start_ms,
            end_ms=end_ms,
        )
    if kind == "every":
        try:
            period_s = parse_duration_s(spec["every"])
        except SpecError as exc:
            raise SpecError(f"spec.every: {exc}") from None
        anchor_ms = _instant(spec, "anchor") if "anchor" in spec else 0
        return EverySpec(period_s, anchor_ms, offset_ms, start_ms, end_ms)
    return AtSpec(_instant(spec, "at"), offset_ms, start_ms, end_ms)


def _instant(spec: Mapping[str, Any], key: str) -> int:
    try:
        return parse_instant(spec[key])
    except (ValueError, TypeError, OverflowError) as exc:
        raise SpecError(f"spec.{key}: {exc}") from None


def _dst_policy(dst: Mapping[str, Any] | None) -> tuple[bool, bool]:
    """(gap_shift, fold_once) from the command's ``dst`` object."""
    if dst is None:
        return True, True
    if not isinstance(dst, Mapping):
        raise SpecError(
            'dst: expected an object like {"gap": "shift", "fold": "once"}, '
            f"got {type(dst).__name__}"
        )
    unknown = sorted(str(k) for k in dst if k not in ("gap", "fold"))
    if unknown:
        raise SpecError(f"dst.{unknown[0]}: unknown field (allowed: gap, fold)")
    gap = dst.get("gap", DstGap.SHIFT)
    fold = dst.get("fold", DstFold.ONCE)
    if gap not in DstGap._value2member_map_:
        raise SpecError(f"dst.gap: {gap!r} is not one of {', '.join(DstGap)}")
    if fold not in DstFold._value2member_map_:
        raise SpecError(f"dst.fold: {fold!r} is not one of {', '.join(DstFold)}")
    return gap == DstGap.SHIFT, fold == DstFold.ONCE


def _spread_s(window_s: object) -> int:
    if isinstance(window_s, bool) or not isinstance(window_s, int):
        raise SpecError(f"spread.window_s: expected whole seconds, got {type(window_s).__name__}")
    if not 0 <= window_s <= _MAX_SPREAD_S:
        raise SpecError(f"spread.window_s: {window_s} is outside 0-{_MAX_SPREAD_S} seconds")
    return window_s


def _check_bounds(start_ms: object, end_ms: object) -> None:
    for name, value in (("start", start_ms), ("end", end_ms)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise SpecError(f"{name}: expected epoch milliseconds, got {type(value).__name__}")
    if isinstance(start_ms, int) and isinstance(end_ms, int) and end_ms < start_ms:
        raise SpecError("end: is before start; the schedule would never fire")
