"""Kafka targets' records as the checkers read them: each one's occurrence, from its headers.

A target record names its occurrence only in kafkron's headers (`topics.targets`):
its key and value are the user's. The same parsing serves the simulation (records
kept by `simulation.targets`) and the broker tests (records read from a real target
topic with a read_committed consumer), so both are judged by one checker
(`simulation.checkers.target_once`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from simulation.targets import TargetSeen
from topics.targets import (
    ATTEMPT_HEADER,
    IDEMPOTENCY_KEY_HEADER,
    RUN_ID_HEADER,
    SCHEDULE_ID_HEADER,
    SCHEDULED_AT_HEADER,
)
from topics.timefmt import parse_instant

REQUIRED_HEADERS = (
    RUN_ID_HEADER,
    SCHEDULE_ID_HEADER,
    SCHEDULED_AT_HEADER,
    ATTEMPT_HEADER,
    IDEMPOTENCY_KEY_HEADER,
)


@dataclass(frozen=True, slots=True)
class TargetDelivery:
    """One target record a read_committed reader saw, and the occurrence it names."""

    topic: str
    partition: int
    offset: int
    append_ms: int  # the record's timestamp: the broker's clock in the simulation
    key: bytes | None
    run_id: str
    schedule_id: str
    scheduled_ms: int | None  # None: the header is missing or not an instant
    attempt: int
    idempotency_key: str
    missing: tuple[str, ...]  # kafkron's headers the record lacks

    def where(self) -> str:
        return f"{self.topic}[{self.partition}] offset {self.offset}"


def deliveries(records: Iterable[TargetSeen]) -> list[TargetDelivery]:
    """Every record, parsed (a record missing kafkron's headers is kept, naming them)."""
    out = []
    for record in records:
        headers = {name: value.decode(errors="replace") for name, value in record.headers}
        missing = tuple(h for h in REQUIRED_HEADERS if h not in headers)
        try:
            scheduled: int | None = parse_instant(headers.get(SCHEDULED_AT_HEADER, ""))
        except ValueError:
            scheduled = None
        attempt = headers.get(ATTEMPT_HEADER, "")
        out.append(
            TargetDelivery(
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
                append_ms=record.append_ms,
                key=record.key,
                run_id=headers.get(RUN_ID_HEADER, ""),
                schedule_id=headers.get(SCHEDULE_ID_HEADER, ""),
                scheduled_ms=scheduled,
                attempt=int(attempt) if attempt.isdigit() else 0,
                idempotency_key=headers.get(IDEMPOTENCY_KEY_HEADER, ""),
                missing=missing,
            )
        )
    return out
