"""Durations written the way people write them: ``90s``, ``5m``, ``1h30m``, ``1d``, ``2w``."""

from __future__ import annotations

import re

from actors.timespec.errors import SpecError

_UNIT_S = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+)([wdhms])", re.ASCII)
_WHOLE = re.compile(r"(?:\d+[wdhms])+", re.ASCII)
# A century: longer intervals are surely a typo, and the bound keeps instants in range.
MAX_DURATION_S = 100 * 366 * 86_400


def parse_duration_s(text: str) -> int:
    """Seconds in ``text``: one or more ``<integer><unit>`` parts, units ``w d h m s``.

    Units must appear largest first and at most once (``1h30m``, not ``30m1h``).
    The result is at least 1 second. Raises ``SpecError`` otherwise.
    """
    if not isinstance(text, str):
        raise SpecError(
            f"expected a duration string like '90s' or '1h30m', got {type(text).__name__}"
        )
    compact = text.strip().lower()
    if not _WHOLE.fullmatch(compact):
        raise SpecError(
            f"{text!r} is not a duration; write <number><unit> parts with units w, d, h, m, s "
            "(examples: '90s', '5m', '1h30m', '1d')"
        )
    total_s = 0
    order = "wdhms"
    last_rank = -1
    for number, unit in _PART.findall(compact):
        rank = order.index(unit)
        if rank <= last_rank:
            raise SpecError(f"{text!r}: write units once each, largest first (like '1h30m')")
        last_rank = rank
        total_s += int(number) * _UNIT_S[unit]
    if total_s < 1:
        raise SpecError(f"{text!r}: the shortest interval is 1s")
    if total_s > MAX_DURATION_S:
        raise SpecError(f"{text!r}: longer than {MAX_DURATION_S // 86_400} days")
    return total_s
