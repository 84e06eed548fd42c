"""A job's rate limit and the pause commands on the wire (docs/DESIGN.md §8.5):
decoded by the shard's decoder, carried by the run record, built by the builders."""

from __future__ import annotations

from datetime import timedelta

import pytest

import actors.timespec  # noqa: F401  (installs the spec compiler the decoder uses)
from topics.command_builders import InvalidCommand, schedule_upsert
from topics.command_parts import Every, Task
from topics.command_types import Job, Rejection, ScheduleUpsert
from topics.commands import decode_command
from topics.concurrency import Concurrency
from topics.messages import idempotency_key, parse_run, run_value
from topics.ratelimit_builders import ratelimit_pause, ratelimit_resume
from topics.ratelimits import (
    RateLimit,
    RatePause,
    RateResume,
    decode_pause_value,
    placed_by,
)

RATE = RateLimit("payments", 10, 5)
NOW = 1_790_000_000_000


def _upsert(job: bytes) -> ScheduleUpsert | Rejection:
    body = b'{"v":1,"type":"schedule.upsert","id":"s","spec":{"every":"60s"},"job":' + job + b"}"
    command = decode_command(b"s", body, NOW)
    assert isinstance(command, ScheduleUpsert | Rejection)
    return command


def test_a_builder_writes_it_and_the_decoder_reads_it_back() -> None:
    record = schedule_upsert("s", Every("1m"), "billing.charge", rate_limit=RATE)
    command = decode_command(record.key, record.value, NOW)
    assert isinstance(command, ScheduleUpsert)
    assert command.job.rate_limit == RATE
    assert b'"rate_limit":{"key":"payments","per_s":10,"burst":5}' in record.value


def test_burst_defaults_to_1_and_a_decimal_rate_is_kept() -> None:
    command = _upsert(b'{"name":"j","rate_limit":{"key":"k","per_s":0.5}}')
    assert isinstance(command, ScheduleUpsert) and command.job.rate_limit is not None
    assert command.job.rate_limit.burst == 1 and command.job.rate_limit.per_ks == 500


@pytest.mark.parametrize(
    ("limit", "field"),
    [
        (b'{"key":"k"}', "job.rate_limit.per_s"),
        (b'{"key":"k","per_s":0}', "job.rate_limit.per_s"),
        (b'{"key":"k","per_s":0.0001}', "job.rate_limit.per_s"),
        (b'{"key":"k","per_s":1,"burst":0}', "job.rate_limit.burst"),
        (b'{"key":"a/b","per_s":1}', "job.rate_limit.key"),
        (b'{"key":"","per_s":1}', "job.rate_limit.key"),
        (b'{"key":"k","per_s":1,"rate":2}', "job.rate_limit"),
    ],
)
def test_a_bad_rate_limit_is_rejected_naming_the_field(limit: bytes, field: str) -> None:
    command = _upsert(b'{"name":"j","rate_limit":' + limit + b"}")
    assert isinstance(command, Rejection)
    assert command.reason.startswith(field), command.reason


def test_a_concurrency_key_and_a_rate_limit_must_name_the_same_key() -> None:
    both = b'"concurrency":{"key":"customer-42","limit":1}'
    refused = _upsert(b'{"name":"j",' + both + b',"rate_limit":{"key":"payments","per_s":1}}')
    assert isinstance(refused, Rejection)
    assert refused.reason.startswith("job.rate_limit.key") and "customer-42" in refused.reason
    same = _upsert(b'{"name":"j",' + both + b',"rate_limit":{"key":"customer-42","per_s":1}}')
    assert isinstance(same, ScheduleUpsert)
    assert placed_by(same.job.concurrency, same.job.rate_limit) == "customer-42"


def test_a_run_record_carries_it_and_parse_run_reads_it() -> None:
    value = run_value(
        run_id="s@2026-10-10T00:00:00.000Z",
        schedule_id="s",
        task=None,
        scheduled_ms=0,
        fired_ms=0,
        attempt=1,
        job=Job("j", {}, rate_limit=RateLimit("payments", 2.5, 3)),
        idempotency_key=idempotency_key("s@2026-10-10T00:00:00.000Z"),
        deadline_ms=60_000,
    )
    assert b'"rate_limit":{"key":"payments","per_s":2.5,"burst":3}' in value
    assert parse_run(value).job.rate_limit == RateLimit("payments", 2.5, 3)


def test_a_dag_tasks_job_takes_one() -> None:
    task = Task(job="j", rate_limit=RATE, concurrency=Concurrency("payments", 2))
    assert task.json()["job"]["rate_limit"] == {"key": "payments", "per_s": 10, "burst": 5}


def test_a_target_takes_no_rate_limit() -> None:
    from topics.command_parts import KafkaTarget

    with pytest.raises(InvalidCommand, match="rate_limit"):
        schedule_upsert("s", Every("1m"), target=KafkaTarget("orders"), rate_limit=RATE)


def test_pause_and_resume_commands() -> None:
    record = ratelimit_pause(
        "payments", until=timedelta(minutes=30), note="maintenance", now_ms=NOW
    )
    assert isinstance(record.decoded, RatePause)
    assert record.decoded.until_ms == NOW + 30 * 60_000
    state = decode_pause_value(record.decoded.value(NOW), "payments")
    assert (state.until_ms, state.note, state.at_ms) == (NOW + 1_800_000, "maintenance", NOW)
    assert state.holds(NOW + 1_799_999) and not state.holds(NOW + 1_800_000)
    forever = ratelimit_pause("payments", now_ms=NOW).decoded
    assert isinstance(forever, RatePause) and forever.until_ms is None
    assert isinstance(ratelimit_resume("payments").decoded, RateResume)


def test_a_pause_until_the_past_or_of_a_bad_key_is_refused() -> None:
    with pytest.raises(InvalidCommand) as past:
        ratelimit_pause("payments", until="2020-01-01T00:00:00Z", now_ms=NOW)
    assert past.value.field == "until"
    refused = decode_command(b"a@b", b'{"v":1,"type":"ratelimit.pause","id":"a@b"}', NOW)
    assert isinstance(refused, Rejection) and refused.reason.startswith("id")
    unknown = decode_command(b"k", b'{"v":1,"type":"ratelimit.pause","id":"k","for":"1h"}', NOW)
    assert isinstance(unknown, Rejection) and unknown.reason.startswith("for")
