"""A refused read of {ns}.calendars is reported as a denial (DESIGN §5.7)."""

from __future__ import annotations

from aiokafka.errors import KafkaConnectionError, TopicAuthorizationFailedError

from actors.scheduler.calendar_follower import read_failure


def test_a_refused_read_of_the_calendars_is_named_as_a_denial() -> None:
    why = read_failure(TopicAuthorizationFailedError("ns.calendars"), "ns")
    assert why.startswith("denied: ") and "ns.calendars" in why and "Read" in why


def test_any_other_failure_is_reported_as_itself() -> None:
    why = read_failure(KafkaConnectionError("down"), "ns")
    assert not why.startswith("denied") and "KafkaConnectionError" in why and "down" in why
