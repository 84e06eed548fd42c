"""A schedule's own state for people: active, paused (with its note, author and end),
pausing after the run in flight, or completed; and its count against ``max_runs``.

Read from the changelog record the shard writes (`actors.shard.state`): ``paused``,
``pause`` (``at``, ``note``, ``until``, ``by``, ``pending``), ``completed``
(``"max_runs"`` or ``"end"``) and ``fired_count``, and the definition's
``max_runs``. `kafkron ls`, the web console and the Python client show the same
words, from here:

    active                      fires as its spec says
    active (runs 1/3)           with max_runs 3, one run started so far
    paused until 2026-12-03 14:00 UTC by ops: db migration
    pausing after the current run, then paused by ops: deploy
    completed (max_runs 3/3)    every run it may start has started
    completed (end)             its spec has nothing more (an end, a one-off)
    waiting for calendar 'uk'   it names a calendar the namespace does not have
                                (docs/DESIGN.md §5.7): it fires nothing until it comes
    resuming as of 2026-12-03 14:00 UTC, once its calendars are known that fresh
                                a resume whose report of what came due while paused
                                waits for the calendars (§5.7): it fires nothing yet
"""

from __future__ import annotations

from typing import Any

import orjson

from actors.shard.state import ScheduleState
from topics.timefmt import format_ms


def max_runs_of(state: ScheduleState) -> int | None:
    """The definition's ``max_runs`` (None: no limit), as the changelog holds it."""
    value = orjson.loads(state.def_bytes).get("max_runs")
    return value if isinstance(value, int) else None


def when_text(at_ms: int) -> str:
    """``2026-12-03 14:00 UTC`` (seconds and milliseconds only when not zero)."""
    text = format_ms(at_ms)[:-1].replace("T", " ")
    text = text.removesuffix(".000")
    return f"{text.removesuffix(':00')} UTC"


def pause_json(state: ScheduleState) -> dict[str, Any] | None:
    """What the pause said (``at``, ``note``, ``until``, ``by``, ``pending``,
    ``resumed``, ``resumed_as_of``), or None."""
    pause = state.pause
    return None if pause is None else pause.json()


def _said(note: str | None, until_ms: int | None, by: str | None) -> str:
    text = "" if until_ms is None else f" until {when_text(until_ms)}"
    text += "" if by is None else f" by {by}"
    return text + ("" if note is None else f": {note}")


def status_text(state: ScheduleState) -> str:
    """One line: ``paused until 2026-12-03 14:00 UTC by ops: db migration``, ``completed
    (max_runs 3/3)``, ``active (runs 1/3)`` ... (see the module's table)."""
    limit = max_runs_of(state)
    count = f"{state.fired_count}/{limit}" if limit is not None else None
    completed = state.completed
    if completed == "max_runs":
        return f"completed (max_runs {count})"
    if completed is not None:
        return f"completed ({completed})"
    pause = state.pause
    if pause is not None and pause.pending:  # paused; its runs in flight not all ended
        said = _said(pause.note, pause.until_ms, pause.by)
        return "pausing after the current run" + (f", then paused{said}" if said else "")
    if state.paused and pause is not None and pause.resumed and pause.until_ms is not None:
        return (
            f"resuming as of {when_text(pause.until_ms)}, once its calendars are known that fresh"
        )
    if state.paused:
        return "paused" + ("" if pause is None else _said(pause.note, pause.until_ms, pause.by))
    if state.waiting is not None:
        return f"waiting for calendar {state.waiting!r}"
    return "active" if count is None else f"active (runs {count})"


def status_json(state: ScheduleState) -> dict[str, Any]:
    """The same for scripts: ``state`` (the line), ``pause``, ``completed``,
    ``fired_count`` and ``max_runs``."""
    return {
        "state": status_text(state),
        "pause": pause_json(state),
        "completed": state.completed,
        "fired_count": state.fired_count,
        "max_runs": max_runs_of(state),
        "waiting_for_calendar": state.waiting,
    }
