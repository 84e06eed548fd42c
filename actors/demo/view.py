"""Drawing the demo: a rich live screen on a terminal, one line per event otherwise."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from actors.demo.feed import DemoFeed, Event
from actors.display import STATUS_STYLES, duration, short_instant

KIND_STYLES = {
    "fired": "cyan",
    "retry": "yellow",
    "result": "",
    "dead_letter": "bold red",
    "rejected": "magenta",
}


def event_line(event: Event) -> str:
    """The plain-text form of an event, as the non-terminal output prints it."""
    stamp = short_instant(event.at_ms)[11:] if event.at_ms else "-"
    return f"{stamp}  {event.kind:<11}  {event.schedule_id:<22}  {event.text}"


def totals_line(feed: DemoFeed) -> str:
    return (
        f"fired {feed.fired}  retries {feed.retries}  succeeded {feed.succeeded}  "
        f"failed attempts {feed.failed_attempts}  dead letters {feed.dead_letters}  "
        f"rejected {feed.rejected}  lateness {feed.lateness_summary()}"
    )


class PlainView:
    """One line per event on a stream that is not a terminal (CI logs, pipes)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def show(self, feed: DemoFeed, events: list[Event], status: str) -> None:
        for event in events:
            self.stream.write(event_line(event) + "\n")
        if events:
            self.stream.flush()

    def note(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()


class LiveView:
    """A rich Live screen: totals, one line per schedule, the latest events."""

    def __init__(
        self, namespace: str, duration_s: float | None, console_url: str | None = None
    ) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console()
        self.namespace = namespace
        self.duration_s = duration_s
        self.console_url = console_url
        self.started = time.monotonic()
        self.notes: list[str] = []
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)

    def __enter__(self) -> LiveView:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.__exit__(*exc)

    def note(self, text: str) -> None:
        self.notes = [*self.notes[-3:], text]

    def show(self, feed: DemoFeed, events: list[Event], status: str) -> None:
        self.live.update(self._render(feed, status))

    def _render(self, feed: DemoFeed, status: str) -> Any:
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        elapsed_s = time.monotonic() - self.started
        limit = f" of {self.duration_s:.0f}" if self.duration_s else ""
        header = Text.assemble(
            ("kafkron demo", "bold"),
            f"  namespace {self.namespace}  {elapsed_s:.0f}{limit} s  {status}\n",
            totals_line(feed),
            f"\nweb console {self.console_url}" if self.console_url else "",
        )
        schedules = Table(title="schedules", title_justify="left", expand=True)
        for column in ("schedule", "fired", "last status", "last lateness", "last duration"):
            schedules.add_column(column)
        for name, line in sorted(feed.schedules.items()):
            schedules.add_row(
                name,
                str(line.fired),
                Text(line.last_status, style=STATUS_STYLES.get(line.last_status, "")),
                duration(line.last_lateness_ms),
                duration(line.last_duration_ms),
            )
        recent = Table(title="latest events (UTC)", title_justify="left", expand=True)
        for column in ("at", "event", "schedule", "details"):
            recent.add_column(column, overflow="fold")
        for event in reversed(feed.recent):
            style = STATUS_STYLES.get(event.status, "") or KIND_STYLES.get(event.kind, "")
            recent.add_row(
                short_instant(event.at_ms)[11:] if event.at_ms else "-",
                Text(event.kind, style=style),
                event.schedule_id,
                event.text,
            )
        parts: list[Any] = [Panel(header), schedules, recent]
        if self.notes:
            parts.append(Text("\n".join(self.notes), style="dim"))
        parts.append(Text("Ctrl-C stops everything cleanly.", style="dim"))
        return Group(*parts)
