"""The concurrency key of a job on the wire (docs/DESIGN.md §8.2): decoded by the
shard's decoder, carried by the run record, parsed back by workers and readers."""

from __future__ import annotations

import actors.timespec  # noqa: F401  (installs the spec compiler the decoder uses)
from topics.command_builders import InvalidCommand, schedule_upsert
from topics.command_parts import Every, Task
from topics.command_types import Job, ScheduleUpsert
from topics.commands import decode_command
from topics.concurrency import Concurrency
from topics.messages import idempotency_key, parse_run, run_value
from topics.vocabulary import ConcurrencyStrategy

KEY = Concurrency("customer-42", 2, ConcurrencyStrategy.CANCEL_NEWEST)


def test_a_builder_writes_it_and_the_decoder_reads_it_back() -> None:
    record = schedule_upsert("s", Every("1m"), "billing.invoice", concurrency=KEY)
    command = decode_command(record.key, record.value, 0)
    assert isinstance(command, ScheduleUpsert)
    assert command.job.concurrency == KEY


def test_the_strategy_defaults_to_queue() -> None:
    body = b'{"v":1,"type":"schedule.upsert","id":"s","spec":{"every":"60s"},' + (
        b'"job":{"name":"j","concurrency":{"key":"k","limit":1}}}'
    )
    command = decode_command(b"s", body, 0)
    assert isinstance(command, ScheduleUpsert) and command.job.concurrency is not None
    assert command.job.concurrency.strategy == ConcurrencyStrategy.QUEUE


def test_a_bad_strategy_is_named_by_the_builder() -> None:
    bad = Concurrency("k", 1, "newest")  # type: ignore[arg-type]
    try:
        schedule_upsert("s", Every("1m"), "j", concurrency=bad)
    except InvalidCommand as error:
        assert error.field == "job.concurrency.strategy"
    else:
        raise AssertionError("a bad strategy was built")


def test_a_run_record_carries_it_and_parse_run_reads_it() -> None:
    value = run_value(
        run_id="s@2026-10-10T00:00:00.000Z",
        schedule_id="s",
        task=None,
        scheduled_ms=0,
        fired_ms=0,
        attempt=1,
        job=Job("j", {}, concurrency=KEY),
        idempotency_key=idempotency_key("s@2026-10-10T00:00:00.000Z"),
        deadline_ms=60_000,
    )
    assert b'"concurrency":{"key":"customer-42","limit":2,"strategy":"cancel_newest"}' in value
    assert parse_run(value).job.concurrency == KEY
    plain = value.replace(
        b',"concurrency":{"key":"customer-42","limit":2,"strategy":"cancel_newest"}', b""
    )
    assert parse_run(plain).job.concurrency is None


def test_a_dag_tasks_job_takes_one() -> None:
    assert Task(job="j", concurrency=KEY).json()["job"]["concurrency"] == {
        "key": "customer-42",
        "limit": 2,
        "strategy": "cancel_newest",
    }
