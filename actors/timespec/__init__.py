"""When does a schedule fire? Pure functions of (spec, schedule id, instant).

Public interface::

    spec = compile_spec({"cron": "30 1 * * *", "tz": "America/New_York"},
                        schedule_id="invoice-nightly", dst={"gap": "shift", "fold": "once"},
                        spread_window_s=0, start_ms=None, end_ms=None)
    spec.next_after(after_ms)  # first fire strictly after, epoch ms UTC; None when exhausted
    spec.kind                  # "cron" | "every" | "at"

``compile_spec`` raises ``SpecError`` (a ``ValueError``), and only that, on any bad
input; the message starts with the field at fault (``spec.cron: field 2 (hour) '25'
out of range 0-23``, ``spec.tz: unknown time zone ...``). Compiled cron tables are
shared between schedules whose expressions resolve alike, and zone tables between
schedules in the same zone, so thousands of schedules cost little memory.

Spec forms
----------
- ``{"cron": EXPR, "tz": ZONE}``: five fields (or six with leading seconds), see
  ``cronparse`` for the syntax including Jenkins ``H``; ``tz`` is an IANA name,
  default UTC.
- ``{"every": "90s" | "5m" | "1h30m" | "1d", "anchor": INSTANT}``: fires at
  ``anchor + k * every``, k >= 0. Without an anchor the phase is the Unix epoch, so
  a restart (or another process) never shifts it.
- ``{"at": INSTANT}``: once.

Spread: with ``spread_window_s`` every fire is moved later by the same stable offset
in ``[0, window)`` drawn from sha256 of the schedule id (``spread_offset_ms``); the
moved time is the run's scheduled time. Never earlier than nominal.

Bounds: ``start_ms`` and ``end_ms`` keep fires inside ``[start, end]`` (inclusive).

Daylight saving time: the rule
------------------------------
Cron is matched against local wall time in the schedule's zone. What happens when
the wall clock jumps is cronie's rule by default, adjustable per schedule:

- A **wildcard** schedule is one whose minute or hour field starts with ``*``
  (``*``, ``*/5``, ...; aliases count as written out, so ``@hourly`` is one). It
  fires at every real instant whose wall time matches. A wall time skipped by a
  spring-forward gap is not real, so it does not fire; a wall time repeated by a
  fall-back fold is real twice, so it fires twice. The ``dst`` policy does not
  apply to it.
- Every other cron schedule is **fixed-time**:

  - ``gap: "shift"`` (default): matching wall times inside a gap fire once, at
    the first instant after the gap (New York, 2026-03-08: ``30 2 * * *`` fires
    at 03:00 EDT, 07:00Z). ``gap: "skip"``: no fire for them that day.
  - ``fold: "once"`` (default): a repeated wall time fires at its first
    occurrence only (``30 1 * * *`` on 2026-11-01 fires at 01:30 EDT, 05:30Z).
    ``fold: "twice"``: at both, the literal wall clock (as Temporal does).

``every`` and ``at`` are instants, untouched by zones. Seconds fields and
30-minute (Lord Howe) or midnight (Havana) shifts follow the same rule.
"""

from __future__ import annotations

from actors.timespec.api import CompiledSpec
from actors.timespec.compile import compile_spec
from actors.timespec.composite_compile import CalendarNotBound, UnknownCalendar
from actors.timespec.durations import parse_duration_s
from actors.timespec.errors import SpecError
from actors.timespec.hashing import spread_offset_ms
from topics import spec_compiler

# The wire layer decodes commands through this compiler without importing us.
spec_compiler.install(compile_spec)

__all__ = [
    "CalendarNotBound",
    "CompiledSpec",
    "SpecError",
    "UnknownCalendar",
    "compile_spec",
    "parse_duration_s",
    "spread_offset_ms",
]
