"""How kafkron shows things to a person: instants, durations, tables, JSON.

Shared by the command line and the demo's live view (both sit on top of it).

A table is drawn with rich (colours, borders) when stdout is a terminal, and as
plain aligned columns otherwise, so ``kafkron history | grep failed`` works without
escape codes. ``--json`` prints one JSON document (an array of objects) whatever
stdout is. ``NO_COLOR`` in the environment turns colour off, as everywhere.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import orjson

from topics.targets import HTTP_JOB, KAFKA_JOB
from topics.timefmt import format_ms
from topics.vocabulary import RunStatus

# Statuses a person should look at first get the loudest colours.
STATUS_STYLES: Mapping[str, str] = {
    RunStatus.SUCCEEDED: "green",
    RunStatus.SKIPPED: "dim",
    "running": "cyan",
    RunStatus.FAILED: "red",
    RunStatus.TIMED_OUT: "red",
    "dead_lettered": "bold red",
    RunStatus.MISSED: "yellow",
    RunStatus.UPSTREAM_FAILED: "yellow",
    RunStatus.CANCELLED: "yellow",
    "paused": "yellow",
}


def is_terminal(stream: TextIO | None = None) -> bool:
    stream = stream if stream is not None else sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def instant(value_ms: int | None) -> str:
    return "-" if value_ms is None else format_ms(value_ms)


def short_instant(value_ms: int | None) -> str:
    """``2026-10-10 00:00:01.250`` (UTC), narrower than RFC 3339 for tables."""
    return "-" if value_ms is None else format_ms(value_ms)[:-1].replace("T", " ")


def duration(value_ms: int | None) -> str:
    """A human duration: ``850 ms``, ``12.3 s``, ``4 m 05 s``, ``2 h 01 m``."""
    if value_ms is None:
        return "-"
    sign = "-" if value_ms < 0 else ""
    ms = abs(value_ms)
    if ms < 1_000:
        return f"{sign}{ms} ms"
    if ms < 60_000:
        return f"{sign}{ms / 1000:.1f} s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{sign}{minutes} m {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours} h {minutes:02d} m"


def carrier_target(job_name: str | None, args: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The target a carrier job stands for, in the wire's shape (``{"kafka": {...}}`` or
    ``{"http": {...}}``, its normalised fields); None for a job (`topics.targets`)."""
    if job_name == KAFKA_JOB:
        return {"kafka": dict(args or {})}
    if job_name == HTTP_JOB:
        return {"http": dict(args or {})}
    return None


def target_text(target: Mapping[str, Any] | None) -> str | None:
    """``kafka:TOPIC`` or ``METHOD URL`` of a target in the wire's shape; None for none."""
    if not target:
        return None
    kafka, http = target.get("kafka"), target.get("http")
    if isinstance(kafka, Mapping):
        return f"kafka:{kafka.get('topic', '?')}"
    if isinstance(http, Mapping):
        return f"{str(http.get('method') or 'POST').upper()} {http.get('url', '?')}"
    return None


def job_text(job_name: str | None, args: Mapping[str, Any] | None = None) -> str:
    """What every view shows for a job: ``→ kafka:TOPIC``, ``→ POST URL`` for a target
    (it travels as a carrier job; people should see where it goes, not the carrier's
    name), or the job's name (``-`` for none)."""
    target = target_text(carrier_target(job_name, args))
    if target is not None:
        return f"→ {target}"
    return job_name or "-"


def delivered_text(target: Mapping[str, Any] | None) -> str:
    """A result's ``target`` (what a target's attempt did) for people:
    ``kafka:orders.due[3]`` (topic and partition written) or ``HTTP 200 in 41 ms``;
    ``-`` for none."""
    if not target:
        return "-"
    kafka = target.get("kafka")
    if isinstance(kafka, Mapping):
        return f"kafka:{kafka.get('topic', '?')}[{kafka.get('partition', '?')}]"
    http = target.get("http")
    if isinstance(http, Mapping):
        status = http.get("status")
        took = http.get("duration_ms")
        text = f"HTTP {status}" if status is not None else "HTTP, no response"
        return text + (f" in {duration(int(took))}" if isinstance(took, int) else "")
    return orjson.dumps(target).decode()


def target_cell(job_target: str | None, target_json: str | None) -> str:
    """A run's target in a table: where it goes and, once a result says, what it did:
    ``→ kafka:orders.due[3]``, ``→ POST https://... · HTTP 200 in 41 ms``; ``-`` for a job.
    ``job_target`` is `target_text`'s; ``target_json`` a result's ``target`` as JSON."""
    done = None if target_json is None else orjson.loads(target_json)
    if isinstance(done, Mapping) and "kafka" in done:
        return f"→ {delivered_text(done)}"
    parts = [f"→ {job_target}"] if job_target else []
    if done:
        parts.append(delivered_text(done))
    return " · ".join(parts) or "-"


def print_json(value: Any, stream: TextIO | None = None) -> None:
    stream = stream if stream is not None else sys.stdout
    stream.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode("utf-8") + "\n")


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    status_column: str | None = None,
    stream: TextIO | None = None,
) -> None:
    """Print ``rows`` under ``columns``; colour ``status_column`` cells on a terminal."""
    stream = stream if stream is not None else sys.stdout
    if is_terminal(stream):
        _rich_table(columns, rows, title=title, status_column=status_column, stream=stream)
        return
    if title:
        stream.write(f"{title}\n")
    widths = [len(c) for c in columns]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    for line in (columns, *rows):
        text = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line))
        stream.write(text.rstrip() + "\n")


def _rich_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None,
    status_column: str | None,
    stream: TextIO,
) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=stream, no_color=bool(os.environ.get("NO_COLOR")))
    table = Table(title=title, header_style="bold", title_justify="left")
    for name in columns:
        table.add_column(name, overflow="fold")
    status_index = columns.index(status_column) if status_column in columns else -1
    for row in rows:
        cells = [Text(cell) for cell in row]
        if status_index >= 0:
            cells[status_index].stylize(STATUS_STYLES.get(row[status_index], ""))
        table.add_row(*cells)
    console.print(table)
