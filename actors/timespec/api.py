"""The protocol every compiled spec satisfies (what schedule actors code against)."""

from __future__ import annotations

from typing import Protocol


class CompiledSpec(Protocol):
    """A parsed, validated schedule: ask it for fires, never re-parse."""

    def next_after(self, after_ms: int) -> int | None:
        """The first fire (epoch ms UTC) strictly after ``after_ms``, spread offset
        included; None when the schedule is exhausted (an ``at`` already past, or
        beyond ``end``)."""
        ...

    @property
    def kind(self) -> str:
        """``"cron"``, ``"every"`` or ``"at"``."""
        ...
