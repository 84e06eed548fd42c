"""The Faust models cannot drift from the codec: every record the codec builds reads
into its model and writes back to the same JSON; unknown fields are tolerated,
``"v"`` is checked, and the app refuses to read uncommitted records.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import faust
import orjson
import pytest
from faust.exceptions import ValueDecodeError
from faust.serializers.registry import Registry
from faust.transport import by_url

from actors.faust import (
    AlertRecord,
    CalendarRecord,
    DeadLetterRecord,
    RejectedRecord,
    ResultRecord,
    RunCancelRecord,
    RunRecord,
    declare_topics,
    dlq_replay,
    kafkron_app,
    ratelimit_pause,
    ratelimit_resume,
    schedule_pause,
    schedule_resume,
    schedule_trigger,
    send_command,
    validated,
)
from actors.faust.serializers import (
    ALERT,
    CALENDAR,
    DEAD_LETTER,
    REJECTED,
    RESULT,
    RUN,
    RUN_CANCEL,
    KafkronCodec,
    WireShape,
    alert_codec,
    calendar_codec,
    dead_letter_codec,
    model_fields,
    rejected_codec,
    result_codec,
    run_codec,
)
from actors.faust.transport import ISOLATION_LEVEL, ReadCommittedConsumerThread, Transport
from actors.sending import encode
from topics import command_builders as build
from topics import messages, ratelimit_builders
from topics.alerts import Alert, AlertType, DeadlineKind, alert_value
from topics.calendar_commands import calendar_value
from topics.command_builders import InvalidCommand
from topics.command_parts import Every
from topics.command_types import Job
from topics.concurrency import Concurrency
from topics.covers import Covers
from topics.names import Settings
from topics.ratelimits import RateLimit
from topics.timefmt import parse_instant
from topics.vocabulary import ConcurrencyStrategy

T0 = 1_790_000_000_000
KEY = Concurrency("customer-42", 2, ConcurrencyStrategy.CANCEL_IN_PROGRESS)
RATE = RateLimit("customer-42", 2.5, 4)
RUN_ID = messages.run_id_for("pay", T0)
TASK_RUN_ID = messages.run_id_for("nightly", T0, "charge")


def _run(**optional: Any) -> bytes:
    return messages.run_value(
        run_id=RUN_ID,
        schedule_id="pay",
        task=optional.get("task"),
        scheduled_ms=T0,
        fired_ms=T0 + 5,
        attempt=2,
        job=Job(
            "billing.charge",
            {"customers": [1, 2], "dry": False},
            optional.get("queue", "default"),
            optional.get("concurrency"),
            optional.get("priority", 0),
            optional.get("rate_limit"),
        ),
        idempotency_key=messages.idempotency_key(RUN_ID),
        deadline_ms=T0 + 60_000,
        logical_date_ms=optional.get("logical_date_ms"),
        data_interval=optional.get("data_interval"),
        report_start=optional.get("report_start", False),
    )


def _alert(**optional: Any) -> bytes:
    return alert_value(
        Alert(
            type=optional.get("type", AlertType.MISSED),
            deadline=optional.get("deadline", DeadlineKind.START),
            run_id=RUN_ID,
            schedule_id="pay",
            task=None,
            scheduled_ms=T0,
            due_ms=T0 + 5_000,
            attempt=1,
            late_by_ms=optional.get("late_by_ms", 5_000),
            at_ms=T0 + 10_000,
            seen_ms=optional.get("seen_ms"),
        )
    )


def _result(**optional: Any) -> bytes:
    return messages.result_value(
        run_id=RUN_ID,
        schedule_id="pay",
        task=optional.get("task"),
        attempt=3,
        status=optional.get("status", "succeeded"),
        scheduled_ms=T0,
        started_ms=optional.get("started_ms", T0 + 10),
        finished_ms=optional.get("finished_ms", T0 + 20),
        worker="w1",
        error=optional.get("error"),
        counts=optional.get("counts"),
        progress=optional.get("progress"),
        covers=optional.get("covers"),
        target=optional.get("target"),
    )


def _cancel(**optional: Any) -> bytes:
    return messages.cancel_value(
        run_id=RUN_ID,
        schedule_id="pay",
        task=optional.get("task"),
        attempt=2,
        reason="stopped by the operator",
        requested_ms=T0 + 7,
    )


def _dead_letter(**optional: Any) -> bytes:
    return messages.dlq_value(
        run_id=RUN_ID,
        schedule_id="pay",
        task=optional.get("task"),
        job=Job(
            "billing.charge",
            {},
            optional.get("queue", "default"),
            optional.get("concurrency"),
            optional.get("priority", 0),
            optional.get("rate_limit"),
        ),
        last_error=optional.get("last_error"),
        attempts=[
            {"attempt": 1, "status": "failed", "error": {"type": "E", "message": "m"}},
            {"attempt": 2, "status": "timed_out", "error": None},
        ],
        dead_at_ms=T0 + 99,
    )


def _rejected(original: bytes | None) -> bytes:
    return messages.rejected_value(
        reason="spec: bad", original=original, topic="ns.commands", partition=2, offset=41
    )


def _calendar(**fields: Any) -> bytes:
    """A ``{ns}.calendars`` record as the shard writes it (the calendar as it was given)."""
    return calendar_value({"dates": ["2026-12-25"], **fields})


FULL_CALENDAR = {
    "tz": "Europe/London",
    "dates": ["2026-12-25", "2026-12-28"],
    "ranges": [["2026-08-03", "2026-08-14"]],
    "weekdays": ["SAT", "SUN"],
}

ERROR = {"type": "CardDeclined", "message": "insufficient funds"}
COVERS = Covers(T0 - 86_400_000, T0, 1440, exact=True)
PROGRESS = ({"rows": 120}, T0 + 15)
KAFKA_DONE = {"kafka": {"topic": "orders.due", "partition": 3}}
HTTP_DONE = {"http": {"status": 503, "duration_ms": 41, "body": "busy"}}

# Every variant of every record: each optional field absent, and each present.
VARIANTS: list[tuple[WireShape, KafkronCodec, bytes]] = [
    (RUN, run_codec, _run()),
    (RUN, run_codec, _run(task="charge", logical_date_ms=T0 - 86_400_000)),
    (RUN, run_codec, _run(data_interval=(T0 - 86_400_000, T0))),
    (RUN, run_codec, _run(queue="gpu")),
    (RUN, run_codec, _run(concurrency=KEY)),
    (RUN, run_codec, _run(priority=7)),
    (RUN, run_codec, _run(rate_limit=RATE)),
    (RUN, run_codec, _run(rate_limit=RateLimit("sms", 20, 1))),
    (RUN, run_codec, _run(report_start=True)),
    (RESULT, result_codec, _result()),
    (RESULT, result_codec, _result(task="charge", status="failed", error=ERROR)),
    (RESULT, result_codec, _result(status="missed", started_ms=None, finished_ms=None)),
    (RESULT, result_codec, _result(counts={"succeeded": 3, "failed": 1}, error=ERROR)),
    (RESULT, result_codec, _result(status="missed", error=ERROR, covers=COVERS)),
    (RESULT, result_codec, _result(status="running", finished_ms=None, progress=PROGRESS)),
    (RESULT, result_codec, _result(target=KAFKA_DONE)),
    (RESULT, result_codec, _result(status="failed", error=ERROR, target=HTTP_DONE)),
    (RUN_CANCEL, run_codec, _cancel()),
    (RUN_CANCEL, run_codec, _cancel(task="charge")),
    (DEAD_LETTER, dead_letter_codec, _dead_letter()),
    (DEAD_LETTER, dead_letter_codec, _dead_letter(task="charge", last_error=ERROR)),
    (DEAD_LETTER, dead_letter_codec, _dead_letter(queue="gpu")),
    (DEAD_LETTER, dead_letter_codec, _dead_letter(concurrency=KEY)),
    (DEAD_LETTER, dead_letter_codec, _dead_letter(rate_limit=RATE)),
    (REJECTED, rejected_codec, _rejected(b"\x00not json")),
    (REJECTED, rejected_codec, _rejected(None)),
    (ALERT, alert_codec, _alert()),
    (CALENDAR, calendar_codec, _calendar()),
    (CALENDAR, calendar_codec, _calendar(tz="Asia/Tokyo", weekdays=["SUN"])),
    (CALENDAR, calendar_codec, calendar_value({"ranges": [["2026-08-03", "2026-08-14"]]})),
    (CALENDAR, calendar_codec, calendar_value(FULL_CALENDAR)),
    (ALERT, alert_codec, _alert(type=AlertType.RECOVERED, seen_ms=T0 + 9_000, late_by_ms=4_000)),
    (ALERT, alert_codec, _alert(deadline=DeadlineKind.FINISH, seen_ms=T0 + 8_000)),
]
# The variant of each kind with every optional field present.
FULLEST: list[tuple[type[faust.Record], bytes]] = [
    (
        RunRecord,
        _run(
            task="charge",
            logical_date_ms=T0,
            data_interval=(T0 - 86_400_000, T0),
            queue="gpu",
            concurrency=KEY,
            priority=3,
            rate_limit=RATE,
            report_start=True,
        ),
    ),
    (
        ResultRecord,
        _result(
            task="charge",
            status="failed",
            error=ERROR,
            counts={"failed": 1},
            progress=PROGRESS,
            covers=COVERS,
            target=HTTP_DONE,
        ),
    ),
    (RunCancelRecord, _cancel(task="charge")),
    (
        DeadLetterRecord,
        _dead_letter(
            task="charge",
            last_error=ERROR,
            queue="gpu",
            concurrency=KEY,
            priority=3,
            rate_limit=RATE,
        ),
    ),
    (RejectedRecord, _rejected(b"x")),
    (AlertRecord, _alert(seen_ms=T0 + 9_000)),
    (CalendarRecord, calendar_value(FULL_CALENDAR)),
]

registry = Registry()


def _read(shape: WireShape, codec: KafkronCodec, value: bytes) -> Any:
    return registry.loads_value(shape.model, value, serializer=codec)


def _write(shape: WireShape, codec: KafkronCodec, record: Any) -> bytes:
    return bytes(registry.dumps_value(shape.model, record, serializer=codec))


def _keys(model: type[faust.Record]) -> dict[str, Any]:
    """The model's field names, nested models as dicts of theirs."""
    return {name: _keys(n) if n else None for name, n in model_fields(model).items()}


def _shape_of(value: Any, model: type[faust.Record]) -> dict[str, Any]:
    """The keys of a JSON object, descending only where the model nests a model."""
    nested = model_fields(model)
    return {name: _shape_of(value[name], n) if (n := nested.get(name)) else None for name in value}


@pytest.mark.parametrize(("model", "value"), FULLEST, ids=lambda x: getattr(x, "__name__", ""))
def test_each_model_has_exactly_the_fields_the_codec_writes(
    model: type[faust.Record], value: bytes
) -> None:
    assert _keys(model) == _shape_of(orjson.loads(value), model)


@pytest.mark.parametrize(("shape", "codec", "value"), VARIANTS)
def test_every_record_the_codec_builds_round_trips_unchanged(
    shape: WireShape, codec: KafkronCodec, value: bytes
) -> None:
    record = _read(shape, codec, value)
    assert isinstance(record, shape.model)
    written = _write(shape, codec, record)
    assert orjson.loads(written) == orjson.loads(value)
    assert shape.parse(written) == shape.parse(value)


def test_the_models_read_what_the_parsers_read() -> None:
    run = _read(RUN, run_codec, FULLEST[0][1])
    parsed = messages.parse_run(FULLEST[0][1])
    assert (run.run_id, run.scheduled_ms, run.fired_ms, run.deadline_ms) == (
        parsed.run_id,
        parsed.scheduled_ms,
        parsed.fired_ms,
        parsed.deadline_ms,
    )
    assert (run.job.name, run.job.args) == (parsed.job.name, parsed.job.args)
    assert run.job.priority == parsed.job.priority == 3
    assert run.data_interval is not None
    assert (
        parse_instant(run.data_interval.start),
        parse_instant(run.data_interval.end),
    ) == parsed.data_interval
    result = _read(RESULT, result_codec, FULLEST[1][1])
    assert result.error is not None and result.error.type == "CardDeclined"
    assert result.finished_ms == messages.parse_result(FULLEST[1][1]).finished_ms
    assert result.counts == {"failed": 1}
    letter = _read(DEAD_LETTER, dead_letter_codec, FULLEST[3][1])
    assert letter.last_attempt == 2 and letter.letter_id == f"{RUN_ID}#2"
    assert letter.dead_at_ms == T0 + 99
    rejected = _read(REJECTED, rejected_codec, FULLEST[4][1])
    assert rejected.original_bytes == b"x"


def test_a_cancel_record_on_the_runs_topic_reads_as_its_own_model() -> None:
    # The runs topic's value type is RunRecord; its cancel records still decode (an
    # agent on {ns}.runs must not fail on them) as RunCancelRecord.
    cancel = registry.loads_value(RunRecord, _cancel(task="charge"), serializer=run_codec)
    assert isinstance(cancel, RunCancelRecord)
    parsed = messages.parse_cancel(_cancel(task="charge"))
    assert (cancel.run_id, cancel.attempt, cancel.reason, cancel.task) == (
        parsed.run_id,
        parsed.attempt,
        parsed.reason,
        parsed.task,
    )
    assert cancel.requested_ms == parsed.requested_ms
    run = registry.loads_value(RunRecord, _run(), serializer=run_codec)
    assert type(run) is RunRecord


def _with_unknown(value: bytes, nested: str | None) -> bytes:
    data = orjson.loads(value)
    data["added_in_v1_5"] = {"anything": [1, 2]}
    if nested is not None:
        data[nested]["also_new"] = True
    return orjson.dumps(data)


@pytest.mark.parametrize(
    ("shape", "codec", "value", "nested"),
    [
        (RUN, run_codec, FULLEST[0][1], "job"),
        (RUN, run_codec, FULLEST[0][1], "data_interval"),
        (RESULT, result_codec, FULLEST[1][1], "error"),
        (DEAD_LETTER, dead_letter_codec, FULLEST[3][1], "last_error"),
        (REJECTED, rejected_codec, FULLEST[4][1], None),
    ],
)
def test_unknown_fields_are_tolerated_and_not_written_back(
    shape: WireShape, codec: KafkronCodec, value: bytes, nested: str | None
) -> None:
    record = _read(shape, codec, _with_unknown(value, nested))
    assert record == _read(shape, codec, value)
    assert orjson.loads(_write(shape, codec, record)) == orjson.loads(value)


# As strict as the codec's parsers, which take 1.0 for 1 (JSON does not tell them apart).
@pytest.mark.parametrize("version", [2, 0, "1", True, None])
@pytest.mark.parametrize(("shape", "codec", "value"), VARIANTS[::3])
def test_v_must_be_exactly_1(
    shape: WireShape, codec: KafkronCodec, value: bytes, version: object
) -> None:
    data = orjson.loads(value)
    data["v"] = version
    with pytest.raises(ValueDecodeError, match=r"\.v: expected 1"):
        _read(shape, codec, orjson.dumps(data))


@pytest.mark.parametrize(
    ("shape", "codec", "value", "field", "bad"),
    [
        (RUN, run_codec, _run(), "attempt", "2"),
        (RESULT, result_codec, _result(), "status", "exploded"),
        (RESULT, result_codec, _result(), "finished_at", "yesterday"),
        (DEAD_LETTER, dead_letter_codec, _dead_letter(), "attempts", [1]),
        (REJECTED, rejected_codec, _rejected(b"x"), "original", "***"),
    ],
)
def test_a_bad_field_is_named(
    shape: WireShape, codec: KafkronCodec, value: bytes, field: str, bad: object
) -> None:
    data = orjson.loads(value)
    data[field] = bad
    with pytest.raises(ValueDecodeError, match=field):
        _read(shape, codec, orjson.dumps(data))


def test_an_agent_cannot_write_an_invalid_record() -> None:
    record = _read(RESULT, result_codec, _result())
    broken = record.derive(status="exploded")
    with pytest.raises(ValueError, match="status"):
        _write(RESULT, result_codec, broken)
    with pytest.raises(ValueError, match="expected a ResultRecord"):
        result_codec.dumps([1, 2])


def test_keys_are_the_schedule_id_as_text() -> None:
    assert registry.loads_key(str, b"pay", serializer="raw") == "pay"
    assert registry.dumps_key(str, "pay", serializer="raw") == b"pay"


# --- commands -------------------------------------------------------------------------


def test_commands_go_through_the_same_validation_as_the_command_line() -> None:
    now = T0
    assert validated(dlq_replay(RUN_ID), now) == encode(dlq_replay(RUN_ID), now)
    assert validated(dlq_replay(TASK_RUN_ID), now)[0] == b"nightly"
    assert validated(schedule_trigger("pay"), now) == (
        b"pay",
        orjson.dumps({"v": 1, "type": "schedule.trigger", "id": "pay"}),
    )
    with pytest.raises(ValueError, match="not a run id"):
        dlq_replay("pay")
    with pytest.raises(ValueError, match="id"):
        validated(schedule_trigger("a/b"), now)
    with pytest.raises(ValueError, match="unknown field"):
        validated({**schedule_trigger("pay"), "force": True}, now)


def test_the_helpers_are_the_one_builder_of_commands() -> None:
    assert dlq_replay(RUN_ID) == dict(build.dlq_replay(RUN_ID).body)
    assert schedule_trigger("pay") == dict(build.schedule_trigger("pay").body)
    assert schedule_pause("pay") == dict(build.schedule_pause("pay").body)
    assert schedule_resume("pay") == dict(build.schedule_resume("pay").body)
    assert ratelimit_pause("payments", note="quota") == {
        "v": 1,
        "type": "ratelimit.pause",
        "id": "payments",
        "note": "quota",
    }
    assert ratelimit_resume("payments") == dict(
        ratelimit_builders.ratelimit_resume("payments").body
    )
    with pytest.raises(InvalidCommand) as raised:
        schedule_pause("a/b")
    assert raised.value.field == "id"


def test_a_pause_from_an_agent_says_why_until_when_and_by_whom() -> None:
    paused = schedule_pause(
        "pay", note="ledger freeze", until="2099-01-01T14:00:00Z", after_current=True, by="agent"
    )
    assert paused == {
        "v": 1, "type": "schedule.pause", "id": "pay", "note": "ledger freeze",
        "until": "2099-01-01T14:00:00Z", "after_current": True, "by": "agent",
    }  # fmt: skip
    before_ms = int(time.time() * 1000)
    later = schedule_pause("pay", until=timedelta(hours=2))
    assert parse_instant(later["until"]) >= before_ms + 7_200_000  # an instant from now
    validated(later)  # what send_command checks again
    with pytest.raises(InvalidCommand) as raised:
        schedule_pause("pay", note="x" * 501)
    assert raised.value.field == "note"


async def test_send_command_takes_a_dict_or_a_built_command() -> None:
    sent: list[tuple[bytes, bytes]] = []

    class Topic:
        async def send(self, *, key: bytes, value: bytes) -> asyncio.Future[None]:
            sent.append((key, value))
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done

    topic = cast(faust.TopicT, Topic())
    built = build.schedule_upsert("pay", Every("5m"), "billing.fx_rates")
    await send_command(topic, built)
    await send_command(topic, dlq_replay(RUN_ID))
    assert sent == [(built.key, built.value), encode(dlq_replay(RUN_ID), T0)]
    with pytest.raises(InvalidCommand, match="unknown field"):
        await send_command(topic, {**schedule_trigger("pay"), "force": True})
    assert len(sent) == 2


# --- the app and its transport ----------------------------------------------------------

SETTINGS = Settings(namespace="ns", bootstrap="127.0.0.1:1,127.0.0.2:2")


# The app tests run in an event loop: a Faust app takes the running loop, and one it had
# to make itself would be left unclosed.


async def test_kafkron_brokers_select_the_read_committed_transport() -> None:
    assert by_url("kafkron://127.0.0.1:9092") is Transport
    app = kafkron_app("a", SETTINGS, partitions=3, web_enabled=False)
    assert [str(url) for url in app.conf.broker_consumer] == [
        "kafkron://127.0.0.1:1",
        "kafkron://127.0.0.2:2",
    ]
    assert app.conf.topic_partitions == 3


async def test_the_group_consumer_reads_committed_records_only() -> None:
    app = kafkron_app("a", SETTINGS, partitions=3, web_enabled=False)
    declare_topics(app, SETTINGS)
    thread = app.consumer._thread
    assert isinstance(thread, ReadCommittedConsumerThread)
    consumer = thread._create_worker_consumer(app.transport)
    try:
        assert consumer._isolation_level == ISOLATION_LEVEL
    finally:
        await consumer.stop()  # never started: only marks it closed
        thread.thread_loop.close()  # the thread never ran, so it never closed its loop


async def test_an_app_that_would_read_uncommitted_is_refused() -> None:
    app = faust.App("plain", broker="kafka://127.0.0.1:9092", web_enabled=False)
    with pytest.raises(ValueError, match="read_uncommitted"):
        declare_topics(app, SETTINGS)
    with pytest.raises(ValueError, match="shard count"):
        kafkron_app("a", SETTINGS, partitions=0)


async def test_declared_topics_carry_the_contract_serializers() -> None:
    app = kafkron_app("a", SETTINGS, partitions=3, web_enabled=False)
    topics = declare_topics(app, SETTINGS)
    assert topics.results.get_topic_name() == "ns.results"
    assert topics.results.value_type is ResultRecord
    assert topics.results.value_serializer is result_codec
    assert topics.dlq.value_type is DeadLetterRecord
    assert topics.runs.value_type is RunRecord
    assert topics.rejected.key_type is bytes
    assert (topics.commands.key_serializer, topics.commands.value_serializer) == ("raw", "raw")


async def test_the_app_connects_with_kafkrons_client_security(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same settings as every kafkron client: the group consumer uses SASL_SSL/SCRAM."""
    from tests.security.test_security_config import CA_PEM

    (tmp_path / "ca.pem").write_text(CA_PEM)
    (tmp_path / "pw").write_text("the-recorders-password\n")
    monkeypatch.setenv("KAFKRON_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("KAFKRON_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("KAFKRON_SASL_USERNAME", "rec")
    monkeypatch.setenv("KAFKRON_SASL_PASSWORD_FILE", str(tmp_path / "pw"))
    monkeypatch.setenv("KAFKRON_SSL_CAFILE", str(tmp_path / "ca.pem"))
    app = kafkron_app("a", SETTINGS, partitions=3, web_enabled=False)
    declare_topics(app, SETTINGS)
    thread = app.consumer._thread
    consumer = thread._create_worker_consumer(app.transport)
    try:
        client = consumer._client
        assert client._security_protocol == "SASL_SSL"
        assert client._sasl_mechanism == "SCRAM-SHA-512"
        assert client._sasl_plain_username == "rec"
        assert client._sasl_plain_password == "the-recorders-password"
        assert client._ssl_context is not None
    finally:
        await consumer.stop()
        thread.thread_loop.close()


def test_a_calendar_record_reads_as_the_shard_reads_it() -> None:
    record = _read(CALENDAR, calendar_codec, calendar_value(FULL_CALENDAR))
    assert isinstance(record, CalendarRecord)
    assert record.calendar.tz == "Europe/London" and record.calendar.weekdays == ["SAT", "SUN"]
    assert record.calendar.ranges == [["2026-08-03", "2026-08-14"]]
    with pytest.raises(ValueError, match="weekdays"):  # the shard's own check refuses it
        _write(CALENDAR, calendar_codec, {"v": 1, "calendar": {"weekdays": ["FUNDAY"]}})
