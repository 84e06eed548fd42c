"""The one exception of the time-spec package."""

from __future__ import annotations


class SpecError(ValueError):
    """A schedule spec that cannot be compiled.

    The message starts with the path of the offending field of the command
    (``spec.cron``, ``spec.tz``, ``dst.gap``, ...) and says what would be accepted,
    e.g. ``spec.cron: field 2 (hour) '25' out of range 0-23``.
    """
