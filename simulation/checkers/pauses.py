"""Pauses with an end, as the changelog's history tells them (for `checkers.pause_until`).

A ``schedule.pause`` with ``until`` shows in its schedule's changelog record as
``"paused": true, "pause": {"at": ..., "until": ...}``; the ``at`` (when the shard
applied it) tells one pause from another. `PauseLog.see` reads the committed
records of the changelog in log order (per key, the order they were written) and
keeps, per pause, the broker's append instant of the first record showing it, of
the first showing the schedule resumed, and of any record showing that same pause
again after it had resumed (it must never: a pause ``until`` resumes once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topics.timefmt import parse_instant


@dataclass(slots=True)
class PauseWindow:
    schedule_id: str
    at: str
    """The pause's ``at``: when the shard applied it (its clock), its identity."""
    until_ms: int
    paused_ms: int
    """Append instant (true time) of the first record showing it paused."""
    resumed_ms: int | None = None
    """Append instant of the first record showing it resumed; None while paused."""
    ended: str | None = None
    """``"resumed"``, ``"deleted"`` or ``"replaced"`` (by another pause); None: on."""
    ended_ms: int | None = None
    """Append instant of the record that ended it."""
    again_ms: int | None = None
    """Append instant of a record showing this pause again after it had ended."""


class PauseLog:
    def __init__(self) -> None:
        self.windows: list[PauseWindow] = []
        self._open: dict[str, PauseWindow] = {}
        self._ended: dict[tuple[str, str], PauseWindow] = {}

    def see(self, schedule_id: str, append_ms: int, state: dict[str, Any] | None) -> None:
        """One committed changelog record of ``schedule_id`` (None: a tombstone)."""
        pause = None if state is None else state.get("pause")
        timed = (
            state is not None
            and state.get("paused") is True
            and isinstance(pause, dict)
            and pause.get("until") is not None
        )
        current = self._open.get(schedule_id)
        if timed:
            assert isinstance(pause, dict)
            at = str(pause["at"])
            if current is not None and current.at == at:
                return  # the same pause, still on
            ended = self._ended.get((schedule_id, at))
            if ended is not None:
                if ended.again_ms is None:
                    ended.again_ms = append_ms
                return
            self._close(current, "replaced", append_ms)
            window = PauseWindow(schedule_id, at, parse_instant(pause["until"]), append_ms)
            self._open[schedule_id] = window
            self.windows.append(window)
            return
        if current is None:
            return
        if state is None:
            self._close(current, "deleted", append_ms)
        elif state.get("paused") is not True:
            self._close(current, "resumed", append_ms)
        else:
            self._close(current, "replaced", append_ms)  # paused on, by another pause

    def _close(self, window: PauseWindow | None, how: str, append_ms: int) -> None:
        if window is None:
            return
        window.ended, window.ended_ms = how, append_ms
        if how == "resumed":
            window.resumed_ms = append_ms
        del self._open[window.schedule_id]
        self._ended[(window.schedule_id, window.at)] = window
