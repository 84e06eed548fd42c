"""What the demo's live view knows: the outcome topics folded into counters and events.

`DemoFeed.apply` takes one record of ``{ns}.runs``, ``{ns}.results``, ``{ns}.dlq``
or ``{ns}.rejected`` (read_committed) and returns the `Event` a person should see,
updating the totals. It is pure, so the view's arithmetic is tested without Kafka.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from topics import messages
from topics.names import TopicKind
from topics.vocabulary import RunStatus

RECENT_EVENTS = 14


@dataclass(frozen=True, slots=True)
class Event:
    at_ms: int  # when it happened (fired, finished, dead, rejected)
    kind: str  # fired | retry | result | dead_letter | rejected
    schedule_id: str
    text: str  # the rest of the line: attempt, status, lateness, duration, error
    status: str = ""  # a result's status, for colour


@dataclass(slots=True)
class ScheduleLine:
    fired: int = 0
    last_status: str = "-"
    last_lateness_ms: int | None = None
    last_duration_ms: int | None = None


@dataclass(slots=True)
class DemoFeed:
    fired: int = 0  # first attempts emitted
    retries: int = 0  # attempts after the first
    succeeded: int = 0
    failed_attempts: int = 0  # failed or timed_out
    other_results: int = 0  # skipped, missed, cancelled, upstream_failed
    dead_letters: int = 0
    rejected: int = 0
    undecodable: int = 0
    lateness_ms: list[int] = field(default_factory=list)
    schedules: dict[str, ScheduleLine] = field(default_factory=dict)
    recent: deque[Event] = field(default_factory=lambda: deque(maxlen=RECENT_EVENTS))

    def _line(self, schedule_id: str) -> ScheduleLine:
        line = self.schedules.get(schedule_id)
        if line is None:
            line = self.schedules[schedule_id] = ScheduleLine()
        return line

    def apply(
        self, kind: TopicKind, key: bytes | None, value: bytes | None, timestamp_ms: int
    ) -> Event | None:
        if value is None:
            return None
        try:
            event = self._apply(kind, key, value, timestamp_ms)
        except (ValueError, KeyError, TypeError):
            self.undecodable += 1
            return None
        if event is not None:
            self.recent.append(event)
        return event

    def _apply(
        self, kind: TopicKind, key: bytes | None, value: bytes, timestamp_ms: int
    ) -> Event | None:
        if kind is TopicKind.RUNS and messages.is_cancel(value):
            cancel = messages.parse_cancel(value)
            name = cancel.schedule_id + (f"/{cancel.task}" if cancel.task else "")
            return Event(cancel.requested_ms, "cancel", name, cancel.reason)
        if kind is TopicKind.RUNS:
            run = messages.parse_run(value)
            name = run.schedule_id + (f"/{run.task}" if run.task else "")
            line = self._line(name)
            if run.attempt == 1:
                self.fired += 1
                line.fired += 1
                lateness_ms = run.fired_ms - run.scheduled_ms
                self.lateness_ms.append(lateness_ms)
                line.last_lateness_ms = lateness_ms
                line.last_status = "running"
                return Event(run.fired_ms, "fired", name, f"{run.job.name}, {lateness_ms} ms late")
            self.retries += 1
            line.last_status = "retrying"
            return Event(run.fired_ms, "retry", name, f"attempt {run.attempt} of {run.run_id}")
        if kind is TopicKind.RESULTS:
            result = messages.parse_result(value)
            name = result.schedule_id + (f"/{result.task}" if result.task else "")
            line = self._line(name)
            line.last_status = result.status
            if result.status == RunStatus.SUCCEEDED:
                self.succeeded += 1
            elif result.status in (RunStatus.FAILED, RunStatus.TIMED_OUT):
                self.failed_attempts += 1
            else:
                self.other_results += 1
            duration_ms = (
                result.finished_ms - result.started_ms
                if result.finished_ms is not None and result.started_ms is not None
                else None
            )
            line.last_duration_ms = duration_ms
            text = f"attempt {result.attempt} {result.status}"
            if duration_ms is not None:
                text += f" in {duration_ms} ms"
            if result.worker:
                text += f" on {result.worker}"
            if result.error:
                text += f": {result.error.get('type', '')}: {result.error.get('message', '')}"
            at_ms = result.finished_ms or result.started_ms or result.scheduled_ms
            return Event(at_ms, "result", name, text, result.status)
        if kind is TopicKind.DLQ:
            dead = messages.parse_dlq(value)
            name = dead.schedule_id + (f"/{dead.task}" if dead.task else "")
            self.dead_letters += 1
            self._line(name).last_status = "dead_lettered"
            error = dead.last_error or {}
            text = (
                f"{dead.run_id} after {len(dead.attempts)} attempts: "
                f"{error.get('type', '')}: {error.get('message', '')}"
            )
            return Event(dead.dead_at_ms, "dead_letter", name, text, "dead_lettered")
        if kind is TopicKind.REJECTED:
            rejected = messages.parse_rejected(value)
            self.rejected += 1
            name = (key or b"").decode("utf-8", errors="replace") or "(no key)"
            return Event(timestamp_ms, "rejected", name, rejected.reason, "rejected")
        return None

    def lateness_summary(self) -> str:
        if not self.lateness_ms:
            return "-"
        ordered = sorted(self.lateness_ms)
        p50 = ordered[len(ordered) // 2]
        p99 = ordered[min(len(ordered) - 1, (len(ordered) * 99) // 100)]
        return f"p50 {p50} ms, p99 {p99} ms, max {ordered[-1]} ms"
