"""Instants on the wire: RFC 3339 UTC with milliseconds (``2026-10-10T00:00:00.000Z``).

Inside kafkron an instant is an ``int`` of milliseconds since the Unix epoch (UTC),
named ``*_ms``. Run ids embed the formatted scheduled time, so formatting sits on
the firing path: the date part is cached per day and the rest is integer arithmetic.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_MS_PER_DAY = 86_400_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_day_prefix_cache: dict[int, str] = {}


def format_ms(instant_ms: int) -> str:
    """RFC 3339 UTC with milliseconds and a ``Z``."""
    day, ms_of_day = divmod(instant_ms, _MS_PER_DAY)
    prefix = _day_prefix_cache.get(day)
    if prefix is None:
        prefix = (_EPOCH + timedelta(days=day)).strftime("%Y-%m-%dT")
        if len(_day_prefix_cache) > 4096:
            _day_prefix_cache.clear()
        _day_prefix_cache[day] = prefix
    seconds, ms = divmod(ms_of_day, 1000)
    minutes, s = divmod(seconds, 60)
    h, m = divmod(minutes, 60)
    return f"{prefix}{h:02d}:{m:02d}:{s:02d}.{ms:03d}Z"


def parse_instant(text: str) -> int:
    """Parse an RFC 3339 instant (``Z`` or a numeric offset) to epoch milliseconds.

    Raises ``ValueError`` with a readable message when the text is not an instant
    or carries no offset (a wall time without a zone is ambiguous).
    """
    if not isinstance(text, str):
        raise ValueError(f"expected an RFC 3339 instant string, got {type(text).__name__}")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an RFC 3339 instant (example: 2026-12-04T14:05:00Z)"
        ) from None
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset; add 'Z' or '+01:00'")
    delta = parsed - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def to_datetime(instant_ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=instant_ms)
