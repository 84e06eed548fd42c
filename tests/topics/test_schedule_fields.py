"""The schedule's keyword fields, typed once (topics/schedule_fields.py): every surface
that takes them refuses a keyword that is not one, as a plain signature would."""

from __future__ import annotations

from typing import Any

import pytest

from kafkron.schedules import Schedule
from kafkron.updates import updated
from topics.command_builders import schedule_upsert
from topics.command_parts import Every, Retry
from topics.schedule_fields import FIELD_NAMES


def test_a_misspelt_field_is_a_type_error_not_a_dropped_field() -> None:
    typo: dict[str, Any] = {"timeout_ss": 3}
    with pytest.raises(TypeError, match="'timeout_ss'"):
        schedule_upsert("a", Every("5m"), "billing.fx", **typo)


def test_every_field_reaches_the_command() -> None:
    command = schedule_upsert(
        "a",
        Every("5m"),
        "billing.fx",
        args={"r": 1},
        overlap="skip",
        retry=Retry(max_attempts=3),
        timeout_s=60,
        spread_s=30,
        max_runs=7,
    )
    body = command.body
    assert (body["overlap"], body["timeout_s"], body["max_runs"]) == ("skip", 60, 7)
    assert (body["spread"], body["job"]["args"]) == ({"window_s": 30}, {"r": 1})
    assert {"args", "target", "retry", "max_runs", "start", "end"} <= FIELD_NAMES


def test_an_update_refuses_a_misspelt_field_too() -> None:
    current = Schedule.__new__(Schedule)
    typo: dict[str, Any] = {"max_run": 3}
    with pytest.raises(TypeError, match="'max_run'"):
        updated(current, **typo)
