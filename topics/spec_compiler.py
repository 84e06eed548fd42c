"""The spec compiler port: how the wire layer gets a command's spec compiled.

`decode_command` judges a spec (a cron that can never be read is rejected with the
field at fault) and hands the shard its compiled form, but the time rules live one
layer up, in `actors.timespec` (docs/DESIGN.md §4.2). So this layer owns the
interface, and the time package installs its implementation when it is imported
(`actors.timespec` calls `install(compile_spec)`; importing any `actors` module
does that). Decoding a timed command before any compiler is installed raises
`NoSpecCompiler`, a programming error, never a rejection.

The port exists while the shard reads ``command.compiled``; once specs are compiled
where definitions are built, the wire types carry the validated spec alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class SpecError(ValueError):
    """A schedule spec that cannot be compiled.

    The message starts with the path of the offending field of the command
    (``spec.cron``, ``spec.tz``, ``dst.gap``, ...) and says what would be accepted,
    e.g. ``spec.cron: field 2 (hour) '25' out of range 0-23``.
    """


class NoSpecCompiler(RuntimeError):
    """No compiler was installed: import `actors.timespec` before decoding commands."""


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


class SpecCompiler(Protocol):
    """``actors.timespec.compile_spec``'s signature; raises only `SpecError`."""

    def __call__(
        self,
        spec: Mapping[str, Any],
        *,
        schedule_id: str,
        dst: Mapping[str, str],
        spread_window_s: int,
        start_ms: int | None,
        end_ms: int | None,
    ) -> CompiledSpec: ...


_installed: list[SpecCompiler] = []


def install(compiler: SpecCompiler) -> None:
    """Make ``compiler`` the one `decode_command` uses (the last install wins)."""
    _installed[:] = [compiler]


def compiler() -> SpecCompiler:
    if not _installed:
        raise NoSpecCompiler(
            "no spec compiler is installed; import actors.timespec before decoding commands"
        )
    return _installed[0]
