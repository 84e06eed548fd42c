"""Cron expressions to sets of allowed values, with Jenkins ``H`` resolved.

Accepted (case-insensitive), per field: ``*``, ``N``, ``A-B``, ``*/S``, ``A/S``
(from A to the field's maximum), ``A-B/S``, comma lists of these, month names
``JAN``-``DEC``, weekday names ``SUN``-``SAT`` (0 and 7 are both Sunday), ``L``
(last day) in day-of-month, and Jenkins' ``H``, ``H/S``, ``H(A-B)``, ``H(A-B)/S``.
Five fields (minute hour day-of-month month day-of-week) or six (a leading second).
Aliases: ``@yearly @annually @monthly @weekly @daily @midnight @hourly``.

``H`` is a number drawn from sha256 of the schedule id, one independent draw per
field (see ``hashing``); in day-of-month, ``H`` and ``H/S`` stay within 1-28 so
the day exists in every month. Resolution is textual: ``H/15`` in the minute field
of schedule ``a`` becomes e.g. ``7-59/15``, and the resolved text is what the
compiled tables are keyed on, so schedules that resolve alike share one table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from actors.timespec.errors import SpecError
from actors.timespec.hashing import stable_draw

ALIASES = {
    "@YEARLY": "0 0 1 1 *",
    "@ANNUALLY": "0 0 1 1 *",
    "@MONTHLY": "0 0 1 * *",
    "@WEEKLY": "0 0 * * 0",
    "@DAILY": "0 0 * * *",
    "@MIDNIGHT": "0 0 * * *",
    "@HOURLY": "0 * * * *",
}


@dataclass(frozen=True, slots=True)
class FieldDef:
    name: str
    lo: int
    hi: int
    hash_lo: int  # the range of a bare H
    hash_hi: int
    names: tuple[str, ...] = ()  # names[i] means value names_base + i
    names_base: int = 0


SECOND = FieldDef("second", 0, 59, 0, 59)
MINUTE = FieldDef("minute", 0, 59, 0, 59)
HOUR = FieldDef("hour", 0, 23, 0, 23)
DOM = FieldDef("day-of-month", 1, 31, 1, 28)
_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
MONTH = FieldDef("month", 1, 12, 1, 12, _MONTH_NAMES, 1)
DOW = FieldDef("day-of-week", 0, 7, 0, 6, _DAY_NAMES, 0)
FIELDS: tuple[FieldDef, ...] = (SECOND, MINUTE, HOUR, DOM, MONTH, DOW)

_HASH_ITEM = re.compile(r"H(?:\(([0-9A-Z]+)-([0-9A-Z]+)\))?(?:/([0-9]+))?", re.ASCII)


def _is_number(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts '²', which ``int`` rejects."""
    return text.isascii() and text.isdigit()


def _where(position: int, field: FieldDef) -> str:
    return f"spec.cron: field {position} ({field.name})"


def split_fields(expr: object) -> tuple[tuple[str, ...], int]:
    """Upper-cased six field texts (seconds first) and the count the user wrote (5 or 6)."""
    if not isinstance(expr, str):
        raise SpecError(
            f"spec.cron: expected a string like '0 9 * * MON-FRI', got {type(expr).__name__}"
        )
    text = expr.strip().upper()
    if text.startswith("@"):
        alias = ALIASES.get(text)
        if alias is None:
            raise SpecError(
                f"spec.cron: unknown alias {expr.strip()!r}; use one of "
                + ", ".join(a.lower() for a in ALIASES)
            )
        text = alias
    parts = text.split()
    if len(parts) == 5:
        return ("0", *parts), 5
    if len(parts) == 6:
        return tuple(parts), 6
    raise SpecError(
        f"spec.cron: {expr!r} has {len(parts)} fields; write 5 (minute hour day-of-month "
        "month day-of-week) or 6 (a leading second)"
    )


def position_of(index: int, written: int) -> int:
    """1-based position of field ``index`` (0 = second) as the user wrote the expression."""
    return index + 1 if written == 6 else index


def value_of(token: str, field: FieldDef, position: int) -> int:
    if _is_number(token):
        number = int(token)
    elif token in field.names:
        number = field.names.index(token) + field.names_base
    else:
        hint = f" or a name ({field.names[0]}-{field.names[-1]})" if field.names else ""
        raise SpecError(f"{_where(position, field)} {token!r} is not a number{hint}")
    if not field.lo <= number <= field.hi:
        raise SpecError(f"{_where(position, field)} {token!r} out of range {field.lo}-{field.hi}")
    return number


def resolve_hash(fields: tuple[str, ...], written: int, schedule_id: str) -> tuple[str, ...]:
    """Replace every ``H`` item by plain cron syntax, drawn from the schedule id."""
    if not uses_hash(fields):
        return fields
    resolved = []
    for index, (text, field) in enumerate(zip(fields, FIELDS, strict=True)):
        position = position_of(index, written)
        items = []
        for item in text.split(","):
            if not item.startswith("H"):
                items.append(item)
                continue
            match = _HASH_ITEM.fullmatch(item)
            if match is None:
                raise SpecError(
                    f"{_where(position, field)} {item!r}: H forms are H, H/S, H(A-B), H(A-B)/S"
                )
            lo_text, hi_text, step_text = match.groups()
            if lo_text is not None and hi_text is not None:
                lo = value_of(lo_text, field, position)
                hi = value_of(hi_text, field, position)
                if lo > hi:
                    raise SpecError(
                        f"{_where(position, field)} {item!r}: range start after its end"
                    )
            else:
                lo, hi = field.hash_lo, field.hash_hi
            draw_label = f"H:{field.name}"
            if step_text is None:
                items.append(str(lo + stable_draw(schedule_id, draw_label, hi - lo + 1)))
                continue
            step = int(step_text)
            if step < 1:
                raise SpecError(f"{_where(position, field)} {item!r}: step must be at least 1")
            first = lo + stable_draw(schedule_id, draw_label, min(step, hi - lo + 1))
            items.append(f"{first}-{hi}/{step}")
        resolved.append(",".join(items))
    return tuple(resolved)


def uses_hash(fields: tuple[str, ...]) -> bool:
    return any(item.startswith("H") for text in fields for item in text.split(","))


@dataclass(frozen=True, slots=True)
class FieldValues:
    values: frozenset[int]
    last_day: bool  # "L" in day-of-month


def parse_field(text: str, field: FieldDef, position: int) -> FieldValues:
    """Allowed values of one resolved field (no ``H`` left). Weekday 7 becomes 0."""
    values: set[int] = set()
    last_day = False
    for item in text.split(","):
        if item == "L":
            if field is not DOM:
                raise SpecError(f"{_where(position, field)} 'L' is only allowed in day-of-month")
            last_day = True
            continue
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not _is_number(step_text) or int(step_text) < 1:
                raise SpecError(
                    f"{_where(position, field)} {item!r}: step must be a whole number >= 1"
                )
            step = int(step_text)
        if base == "*":
            lo, hi = field.lo, field.hi
        elif "-" in base:
            lo_text, _, hi_text = base.partition("-")
            lo = value_of(lo_text, field, position)
            hi = value_of(hi_text, field, position)
            if lo > hi:
                raise SpecError(
                    f"{_where(position, field)} {item!r}: range start after its end "
                    "(wrap-around ranges are not supported; use a list)"
                )
        elif base == "":
            raise SpecError(f"{_where(position, field)} {text!r} has an empty item")
        else:
            lo = value_of(base, field, position)
            hi = field.hi if slash else lo
        values.update(range(lo, hi + 1, step))
    if field is DOW and 7 in values:
        values.discard(7)
        values.add(0)
    return FieldValues(frozenset(values), last_day)
