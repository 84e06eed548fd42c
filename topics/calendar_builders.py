"""Builders of ``calendar.upsert`` and ``calendar.delete`` (docs/DESIGN.md §5.7), checked
by the shard's own decoder as every builder of `topics.command_builders` is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topics.command_builders import CommandRecord, validated


def calendar_upsert(name: str, calendar: Mapping[str, Any]) -> CommandRecord:
    """``calendar.upsert``: create or replace the named calendar ``name`` (its days:
    ``tz``, ``dates``, ``ranges``, ``weekdays``), which any schedule of the namespace may
    exclude by name (``"exclude": ["uk-holidays"]``); every schedule naming it is
    re-armed on every shard.

    Example: ``calendar_upsert("uk-holidays", {"tz": "Europe/London", "dates":
    ["2026-12-25", "2026-12-28"]})``.
    """
    body = {"v": 1, "type": "calendar.upsert", "id": name, "calendar": dict(calendar)}
    return validated(body)


def calendar_delete(name: str) -> CommandRecord:
    """``calendar.delete``: forget the named calendar; refused by a shard whose
    schedules name it (a schedule naming an unknown calendar waits for it).

    Example: ``calendar_delete("uk-holidays")``.
    """
    return validated({"v": 1, "type": "calendar.delete", "id": name})
