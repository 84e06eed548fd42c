"""Per-schedule SLO figures from the history: `kafkron slo` and the console's schedule page.

Each schedule's share of runs started within S of their instant (S given, else its
own ``deadline.start_within_s``, else `DEFAULT_WITHIN_MS`), start lateness
percentiles and outcomes (`actors.history.audit: slo`), with the audit's count of
its gaps (`AuditSource.audit`) and the ``deadline_missed`` alerts decided in the
window (`actors.history.alerts`): one code for both front ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.history.alerts import missed_counts, read_sync
from actors.history.audit import AuditSource, SloReport, slo
from topics.vocabulary import RunStatus

# "95% of tasks begin within five seconds of their scheduled time".
DEFAULT_WITHIN_MS = 5_000


@dataclass(frozen=True, slots=True)
class ScheduleSlo:
    schedule_id: str
    report: SloReport
    gaps: int
    alerts: dict[str, int] | None = None
    """``deadline_missed`` alerts decided in the window, by deadline (``start``,
    ``finish``), from the database's ``alerts`` table; None when it has none yet."""

    @property
    def succeeded(self) -> int:
        return self.report.outcomes.get(RunStatus.SUCCEEDED, 0)

    @property
    def failed(self) -> int:
        return sum(
            n
            for status, n in self.report.outcomes.items()
            if status in (RunStatus.FAILED, RunStatus.TIMED_OUT)
        )

    @property
    def dead_lettered(self) -> int:
        return self.report.outcomes.get("dead_lettered", 0)

    def text(self) -> str:
        """``99.20% started within 5 s (992 of 1000); start lateness p50 12 ms, ...``."""
        report = self.report
        share = "-" if report.share is None else f"{report.share * 100:.2f}%"
        return (
            f"{share} started within {report.within_ms / 1000:g} s ({report.on_time} of "
            f"{report.started + report.missed}); start lateness p50 {_ms(report.p50_ms)}, "
            f"p95 {_ms(report.p95_ms)}, p99 {_ms(report.p99_ms)}; {self.succeeded} succeeded, "
            f"{self.failed} failed, {self.dead_lettered} dead-lettered, {self.gaps} gaps"
            + _alerts_text(self.alerts)
        )


def schedule_slos(
    source: AuditSource,
    ids: list[str] | None,
    from_ms: int,
    to_ms: int,
    within_ms: int | None,
) -> tuple[list[ScheduleSlo], SloReport]:
    """Each schedule's figures (S its own when ``within_ms`` is None) and the overall
    ones (over every schedule asked, at ``within_ms`` or the default)."""
    chosen = ids if ids is not None else source.schedule_ids()
    recorded = read_sync(source.connection, ids=chosen, since_ms=from_ms)
    missed = (
        None
        if recorded is None
        else missed_counts(a for a in recorded if a.at_ms <= to_ms)  # decided in the window
    )
    found = []
    for sid in chosen:
        own_ms = within_ms
        if own_ms is None:
            own_ms = source.start_within_ms(sid) or DEFAULT_WITHIN_MS
        gaps = source.audit(from_ms, to_ms, [sid]).gap_count  # the audit's own count
        alerts = None if missed is None else missed.get(sid, {"start": 0, "finish": 0})
        found.append(ScheduleSlo(sid, slo(source, from_ms, to_ms, own_ms, [sid]), gaps, alerts))
    overall_ms = DEFAULT_WITHIN_MS if within_ms is None else within_ms
    return found, slo(source, from_ms, to_ms, overall_ms, chosen)


def _alerts_text(alerts: dict[str, int] | None) -> str:
    if not alerts or not (alerts["start"] or alerts["finish"]):
        return ""
    return f"; deadline_missed: {alerts['start']} start, {alerts['finish']} finish"


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value} ms"
