"""What ``{ns}.alerts`` says now: the deadline alerts still open.

An alert is open from its ``deadline_missed`` record until the ``deadline_recovered``
record of the same run and deadline (the run started or ended at last, or ended
without starting, or its schedule was deleted). `open_alerts` is the pure fold of the
records; the history database answers the same with one query
(`actors.history.alerts.query`), which the console and `kafkron alerts` use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from topics.alerts import Alert, AlertType


@dataclass(frozen=True, slots=True)
class OpenAlert:
    alert: Alert
    late_now_ms: int
    """How late the run is at the instant asked about (its deadline to then)."""


def open_alerts(alerts: Iterable[Alert], now_ms: int) -> list[OpenAlert]:
    """The ``deadline_missed`` alerts no ``deadline_recovered`` closed, latest first."""
    found: dict[tuple[str, str], Alert] = {}
    for alert in alerts:
        key = (alert.run_id, alert.deadline.value)
        if alert.type is AlertType.MISSED:
            found[key] = alert
        else:
            found.pop(key, None)
    shown = sorted(found.values(), key=lambda a: (a.at_ms, a.run_id), reverse=True)
    return [OpenAlert(alert, now_ms - alert.due_ms) for alert in shown]
