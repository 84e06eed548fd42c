"""The range of occurrences one folded ``missed`` or ``skipped`` result stands for.

A long backlog (a takeover after days, a resume after a long pause) is not
reported one result per occurrence: the shard writes a result for each of the
oldest ones and folds the rest into one more result whose ``covers`` field says
which occurrences it stands for (docs/DESIGN.md §2.4, §3.2)::

    "covers": {"from": "2026-10-10T00:00:00.000Z", "to": "2026-10-12T23:59:00.000Z",
               "count": 4220, "exact": true}

``from`` and ``to`` are the first and last occurrence covered (both included; the
result's own run id names ``from``), ``count`` how many occurrences that is, and
``exact`` false when ``count`` is only a lower bound (the shard stopped counting
after a clock jump). A result without ``covers`` stands for its own occurrence.

Results written before the field existed said the same thing only in their
error message; `covers_from_message` reads that text, so old topics and history
databases still answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from topics.timefmt import format_ms, parse_instant


@dataclass(frozen=True, slots=True)
class Covers:
    """The occurrences a folded result stands for: ``count`` of them in [from, to]."""

    from_ms: int
    to_ms: int
    count: int
    exact: bool = True
    """False when ``count`` is a lower bound."""


def covers_json(covers: Covers) -> dict[str, Any]:
    """The ``covers`` object of a result."""
    return {
        "from": format_ms(covers.from_ms),
        "to": format_ms(covers.to_ms),
        "count": covers.count,
        "exact": covers.exact,
    }


def parse_covers(value: Any, path: str) -> Covers:
    """The `Covers` in a decoded ``covers`` object; ``ValueError`` naming the field."""
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected an object, got {value!r}")
    try:
        from_ms = parse_instant(value["from"])
        to_ms = parse_instant(value["to"])
    except KeyError as missing:
        raise ValueError(f"{path}.{missing.args[0]}: missing") from None
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: from and to must be instants ({error})") from None
    count, exact = value.get("count"), value.get("exact", True)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"{path}.count: expected a positive integer, got {count!r}")
    if not isinstance(exact, bool):
        raise ValueError(f"{path}.exact: expected true or false, got {exact!r}")
    if to_ms < from_ms:
        raise ValueError(f"{path}: to ({value['to']}) is before from ({value['from']})")
    return Covers(from_ms, to_ms, count, exact)


# What `actors.shard.runs` wrote before ``covers``: "N occurrences from A to B (why)",
# N possibly "at least N".
_LEGACY = re.compile(r"^(at least )?(\d+) occurrences from (\S+) to (\S+) \(")


def covers_from_message(message: str) -> Covers | None:
    """The range an old folded result's message states, or None if it states none."""
    match = _LEGACY.match(message)
    if match is None:
        return None
    try:
        from_ms, to_ms = parse_instant(match.group(3)), parse_instant(match.group(4))
    except ValueError:
        return None
    return Covers(from_ms, to_ms, int(match.group(2)), exact=match.group(1) is None)
