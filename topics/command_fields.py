"""Field validators of the command schema: each names the field and says what to write.

Every validator takes the decoded JSON value and a dotted ``path`` (``retry.initial_s``)
and either returns a typed Python value or raises `FieldError` whose message is the
whole sentence a person reads in ``{ns}.rejected``: the field, what was expected,
what was found, and an example. Nothing here raises anything else, whatever the
JSON holds, so `topics.commands.decode_command` can promise it never raises.

JSON has one number type; Python's ``bool`` is an ``int``. Integer fields therefore
refuse booleans and floats (``300.0`` is refused for ``grace_s``: it is usually a
sign of a unit mistake), and number fields accept ints and finite floats.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Any, TypeVar

from topics.timefmt import parse_instant

# Ids are embedded in run ids ("{id}@{scheduled_at}/{task}") and in Kafka keys, so
# the separators and control characters are refused, and the length is bounded.
MAX_ID_CHARS = 200
_ID_FORBIDDEN = frozenset("@/")

_Word = TypeVar("_Word", bound=StrEnum)


class FieldError(ValueError):
    """A command field is wrong; ``str(error)`` is the reason for ``{ns}.rejected``."""


def clip(text: str, limit: int = 40) -> str:
    """``text`` shortened for an error message (reasons stay readable and small)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(value: Any) -> str:
    """A short, safe rendering of an offending value for an error message."""
    kind = json_kind(value)
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({kind})"


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def obj(value: Any, path: str, example: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FieldError(
            f"{path}: expected a JSON object, got {describe(value)}; example: {example}"
        )
    return value


def check_keys(
    value: Mapping[str, Any],
    path: str,
    allowed: Collection[str],
    aliases: Mapping[str, str] | None = None,
) -> None:
    """Refuse unknown keys, suggesting the closest known one (typos must not be silent).

    ``aliases`` maps names people commonly write (``timezone``) to ours (``tz``).
    """
    for key in value:
        if key not in allowed:
            if len(key) > 40:  # a runaway key: neither echo it whole nor fuzzy-match it
                raise FieldError(
                    f"{path or 'value'}: unknown field {clip(key)!r}; "
                    f"known fields are {', '.join(sorted(allowed))}"
                )
            alias = aliases.get(key) if aliases else None
            close = [alias] if alias else difflib.get_close_matches(key, list(allowed), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            where = f"{path}." if path else ""
            raise FieldError(
                f"{where}{key}: unknown field; {hint}known fields are {', '.join(sorted(allowed))}"
            )


def string(value: Any, path: str, *, max_chars: int = 1000, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise FieldError(f"{path}: expected a string, got {describe(value)}")
    if not value and not allow_empty:
        raise FieldError(f"{path}: must not be empty")
    if len(value) > max_chars:
        raise FieldError(f"{path}: at most {max_chars} characters, got {len(value)}")
    return value


def identifier(value: Any, path: str) -> str:
    """A schedule id or DAG task name: 1..200 chars, no '@', '/' or control characters."""
    text = string(value, path, max_chars=MAX_ID_CHARS)
    for char in text:
        if char in _ID_FORBIDDEN:
            raise FieldError(
                f"{path}: {text!r} contains {char!r}, which separates the parts of a run id "
                f"(id@scheduled_at/task); use letters, digits, '-', '_' or '.'"
            )
        if ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0:
            raise FieldError(
                f"{path}: {text!r} contains the control character U+{ord(char):04X}; remove it"
            )
    return text


def integer(value: Any, path: str, *, low: int, high: int, unit: str = "") -> int:
    suffix = f" {unit}" if unit else ""
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(
            f"{path}: expected an integer{suffix} between {low} and {high}, got {describe(value)}"
        )
    if not low <= value <= high:
        raise FieldError(f"{path}: must be between {low} and {high}{suffix}, got {value}")
    return value


def number(value: Any, path: str, *, low: float, high: float, unit: str = "") -> float:
    suffix = f" {unit}" if unit else ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(
            f"{path}: expected a number{suffix} between {low:g} and {high:g}, got {describe(value)}"
        )
    number_value = float(value)
    if not math.isfinite(number_value) or not low <= number_value <= high:
        raise FieldError(f"{path}: must be between {low:g} and {high:g}{suffix}, got {value}")
    return number_value


def choice(value: Any, path: str, words: type[_Word]) -> _Word:
    """The member of ``words`` (a `topics.vocabulary` enum) that ``value`` spells."""
    if not isinstance(value, str) or value not in words._value2member_map_:
        raise FieldError(f"{path}: expected one of {' | '.join(words)}, got {describe(value)}")
    return words(value)


def string_list(value: Any, path: str, *, max_items: int = 1000) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise FieldError(
            f'{path}: expected a list of strings (example: ["a", "b"]), got {describe(value)}'
        )
    if len(value) > max_items:
        raise FieldError(f"{path}: at most {max_items} entries, got {len(value)}")
    return tuple(string(item, f"{path}[{index}]") for index, item in enumerate(value))


def instant(value: Any, path: str) -> int:
    """An RFC 3339 instant with an offset, to epoch milliseconds."""
    if not isinstance(value, str):
        raise FieldError(
            f'{path}: expected an RFC 3339 instant string such as "2026-12-04T14:05:00Z", '
            f"got {describe(value)}"
        )
    try:
        instant_ms = parse_instant(value)
    except (ValueError, OverflowError) as error:
        detail = str(error) if len(value) <= 64 else f"{clip(value)!r} is not an RFC 3339 instant"
        raise FieldError(f"{path}: {detail}") from None
    return instant_ms
