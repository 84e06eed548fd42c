"""The ``deadline`` field and the ``{ns}.alerts`` records (`topics.alerts`)."""

from __future__ import annotations

import orjson
import pytest

from topics.alerts import Alert, AlertType, Deadline, DeadlineKind, alert_value, parse_alert
from topics.commands import Rejection, ScheduleUpsert, decode_command
from topics.timefmt import parse_instant

T0 = parse_instant("2026-10-10T00:00:00Z")


def decode(**fields: object) -> ScheduleUpsert | Rejection:
    body = {
        "v": 1,
        "type": "schedule.upsert",
        "id": "etl",
        "spec": {"every": "1h"},
        "job": {"name": "etl.load"},
        **fields,
    }
    found = decode_command(b"etl", orjson.dumps(body), T0)
    assert isinstance(found, ScheduleUpsert | Rejection)
    return found


def test_a_deadline_is_decoded_with_either_part_or_both() -> None:
    both = decode(deadline={"start_within_s": 5, "finish_within_s": 600})
    assert isinstance(both, ScheduleUpsert)
    assert both.deadline == Deadline(5, 600)
    start = decode(deadline={"start_within_s": 5})
    assert isinstance(start, ScheduleUpsert) and start.deadline == Deadline(5, None)
    none = decode()
    assert isinstance(none, ScheduleUpsert) and none.deadline is None


@pytest.mark.parametrize(
    ("deadline", "says"),
    [
        ({}, "deadline: give start_within_s"),
        ({"start_within_s": 0}, "deadline.start_within_s: must be between 1"),
        ({"start_within_s": 5.5}, "deadline.start_within_s: expected an integer"),
        ({"start_within": 5}, "did you mean 'start_within_s'"),
        ({"start_within_s": 60, "finish_within_s": 30}, "finish_within_s (30) is before"),
        ("5s", "deadline: expected a JSON object"),
    ],
)
def test_a_wrong_deadline_is_rejected_naming_its_field(deadline: object, says: str) -> None:
    found = decode(deadline=deadline)
    assert isinstance(found, Rejection)
    assert says in found.reason


def test_a_kafka_target_takes_no_deadline() -> None:
    found = decode_command(
        b"due",
        orjson.dumps(
            {
                "v": 1,
                "type": "schedule.upsert",
                "id": "due",
                "spec": {"every": "1h"},
                "target": {"kafka": {"topic": "orders.due", "value": "x"}},
                "deadline": {"start_within_s": 5},
            }
        ),
        T0,
    )
    assert isinstance(found, Rejection) and found.reason.startswith("deadline: a Kafka target")


@pytest.mark.parametrize("kind", list(DeadlineKind))
@pytest.mark.parametrize("seen", [None, T0 + 7_000])
def test_an_alert_reads_back_as_written(kind: DeadlineKind, seen: int | None) -> None:
    alert = Alert(
        type=AlertType.MISSED,
        deadline=kind,
        run_id="etl@2026-10-10T00:00:00.000Z",
        schedule_id="etl",
        task=None,
        scheduled_ms=T0,
        due_ms=T0 + 5_000,
        attempt=1,
        late_by_ms=2_000,
        at_ms=T0 + 7_000,
        seen_ms=seen,
    )
    value = alert_value(alert)
    assert parse_alert(value) == alert
    assert orjson.loads(value)["observed_at"] == (
        None if seen is None else "2026-10-10T00:00:07.000Z"
    )


def test_what_is_not_an_alert_is_refused_naming_why() -> None:
    with pytest.raises(ValueError, match="alert"):
        parse_alert(b'{"v": 1, "type": "deadline_missed"}')
    with pytest.raises(ValueError, match="alert: not JSON"):
        parse_alert(b"{")
