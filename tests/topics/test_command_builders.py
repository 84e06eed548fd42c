"""The builders of commands (`topics.command_builders`, re-exported by `kafkron`):
every command type and every field of the schema can be written with them, what
they write is exactly what the shard decodes, and a mistake raises `InvalidCommand`
naming the field, as the shard's rejection would.
"""

from __future__ import annotations

import typing
from datetime import UTC, datetime, timedelta, timezone

import pytest

import kafkron
from topics import commands
from topics.alerts import Deadline
from topics.backfill_commands import BackfillCancel, ScheduleBackfill
from topics.calendar_builders import calendar_delete, calendar_upsert
from topics.command_builders import (
    InvalidCommand,
    backfill_cancel,
    dag_clear,
    dag_upsert,
    dlq_replay,
    field_of,
    run_cancel,
    schedule_backfill,
    schedule_delete,
    schedule_pause,
    schedule_resume,
    schedule_trigger,
    schedule_upsert,
    validated,
)
from topics.command_parts import (
    AnyOf,
    At,
    BusinessDay,
    Cron,
    Days,
    Dst,
    DstFoldName,
    DstGapName,
    Every,
    JitterName,
    Misfire,
    MisfireName,
    OverlapName,
    Retry,
    RRule,
    Task,
)
from topics.command_types import DagUpsert, RunCancel, ScheduleUpsert
from topics.commands import COMMAND_TYPES, decode_command
from topics.ratelimit_builders import ratelimit_pause, ratelimit_resume
from topics.vocabulary import DstFold, DstGap, JitterMode, MisfireMode, OverlapPolicy

NOW = 1_790_000_000_000  # 2026-09-21T...
LATER = datetime.fromtimestamp(NOW / 1000 + 3600, UTC)


def _every_field_upsert() -> kafkron.CommandRecord:
    return schedule_upsert(
        "invoice-nightly",
        Cron("0 0 * * *", tz="Europe/London"),
        "billing.invoice_nightly",
        args={"region": "eu"},
        misfire=Misfire("catch_up", grace_s=600, catch_up_max=10),
        overlap="buffer_one",
        dst=Dst(gap="skip", fold="twice"),
        spread_s=900,
        retry=Retry(
            max_attempts=3,
            initial_s=2,
            coefficient=3,
            max_interval_s=60,
            jitter="none",
            non_retryable=["AccountDeleted"],
        ),
        timeout_s=1800,
        start=LATER,
        end=LATER + timedelta(days=30),
        max_runs=12,
        deadline=Deadline(start_within_s=5, finish_within_s=600),
        now_ms=NOW,
    )


def test_every_field_of_an_upsert_is_written_and_decoded_as_given() -> None:
    record = _every_field_upsert()
    # ``target`` is the other way to say what runs: its own test below.
    missing = commands._UPSERT_KEYS - set(record.body) - {"target"}
    assert not missing, f"schedule_upsert cannot write {sorted(missing)}: give it a parameter"
    decoded = decode_command(record.key, record.value, NOW)
    assert isinstance(decoded, ScheduleUpsert) and decoded.raw == record.body
    assert isinstance(record.decoded, ScheduleUpsert) and record.decoded.raw == record.body
    assert decoded.misfire == commands.MisfirePolicy(MisfireMode.CATCH_UP, 600, 10)
    assert decoded.overlap is OverlapPolicy.BUFFER_ONE
    assert decoded.dst == {"gap": "skip", "fold": "twice"} and decoded.spread_window_s == 900
    assert decoded.retry == commands.RetryPolicy(
        3, 2.0, 3.0, 60.0, JitterMode.NONE, ("AccountDeleted",)
    )
    assert (decoded.timeout_s, decoded.job.args) == (1800, {"region": "eu"})
    assert decoded.deadline == Deadline(5, 600)
    assert decoded.start_ms == NOW + 3_600_000


def test_every_field_of_a_dag_and_of_its_tasks_is_written() -> None:
    record = dag_upsert(
        "etl",
        Every(timedelta(hours=1), anchor="2026-01-01T00:05:00Z"),
        {
            "extract": Task("etl.extract", args={"day": 1}),
            "load": Task("etl.load", after=["extract"], retry=Retry(max_attempts=1), timeout_s=30),
        },
        max_active_runs=2,
        misfire=Misfire("skip"),
        dst=Dst(gap="shift"),
        spread_s=0,
        retry=Retry(max_attempts=4),
        timeout_s=60,
        start=LATER,
        end=LATER + timedelta(days=1),
        deadline=Deadline(start_within_s=60, finish_within_s=None),
        now_ms=NOW,
    )
    missing = commands._DAG_KEYS - set(record.body)
    assert not missing, f"dag_upsert cannot write {sorted(missing)}: give it a parameter"
    missing = commands._TASK_KEYS - set(record.body["tasks"]["load"]) - {"target"}
    assert not missing, f"Task cannot write {sorted(missing)}: give it a field"
    decoded = record.decoded
    assert isinstance(decoded, DagUpsert)
    assert decoded.topo_order == ("extract", "load") and decoded.max_active_runs == 2
    assert decoded.tasks["extract"].retry.max_attempts == 4  # the DAG's
    assert decoded.tasks["load"].retry.max_attempts == 1 and decoded.tasks["load"].timeout_s == 30
    assert decoded.deadline == Deadline(60, None)
    assert record.body["spec"] == {"every": "3600s", "anchor": "2026-01-01T00:05:00Z"}


def test_every_part_can_write_every_field_the_decoder_knows() -> None:
    """A field the schema gains fails here until the builders can write it."""
    retry = Retry(1, 1, 1, 1, "full", ["E"]).json()
    assert set(retry) == set(commands.RetryPolicy.__dataclass_fields__)
    assert set(Misfire("skip", 1, 1).json()) == set(commands.MisfirePolicy.__dataclass_fields__)
    assert set(Dst("shift", "once").json()) == {"gap", "fold"}
    kinds = {
        k
        for s in (
            Cron("x", "UTC"),
            Every("1m", "2026-01-01T00:00:00Z"),
            At("x"),
            RRule("FREQ=DAILY", "2026-01-01T00:00:00", "UTC"),
            BusinessDay(1, "09:00", "UTC"),
            AnyOf([Cron("x")], exclude=[Days(weekdays=("SAT",))], adjust="skip", tz="UTC"),
        )
        for k in s.json()
    }
    assert kinds == commands._SPEC_KEYS


def test_a_builder_exists_for_every_command_type() -> None:
    run = "a@2026-10-10T00:00:00.000Z"
    built = [
        _every_field_upsert(),
        schedule_delete("a"),
        schedule_pause("a"),
        schedule_resume("a"),
        schedule_trigger("a"),
        dag_upsert("a", At(LATER), {"t": Task("j")}, now_ms=NOW),
        dag_clear(run, "t"),
        dlq_replay(run + "/t"),
        run_cancel(run, "bad input file"),
        schedule_backfill("a", "b1", [(NOW - 60_000, NOW, 2)], max_parallel=4),
        backfill_cancel("a", "b1", running=True, reason="wrong input"),
    ]
    calendars = [calendar_upsert("uk", {"dates": ["2026-12-25"]}), calendar_delete("uk")]
    rates = [ratelimit_pause("payments", note="quota"), ratelimit_resume("payments")]
    assert [record.type for record in [*built, *calendars, *rates]] == list(COMMAND_TYPES)
    assert built[-2].decoded == ScheduleBackfill("a", "b1", ((NOW - 60_000, NOW, 2),), 4)
    assert built[-1].decoded == BackfillCancel("a", "b1", True, "wrong input")
    cancel = built[-3].decoded
    assert cancel == RunCancel("a", run, "bad input file")
    assert built[2].value == b'{"v":1,"type":"schedule.pause","id":"a"}' and built[2].key == b"a"


def test_parts_given_empty_are_left_out_as_parts_not_given() -> None:
    record = schedule_upsert(
        "a", Every("1m"), "j", misfire=Misfire(), dst=Dst(), retry=Retry(), now_ms=NOW
    )
    assert record.body == {
        "v": 1,
        "type": "schedule.upsert",
        "id": "a",
        "spec": {"every": "1m"},
        "job": {"name": "j", "args": {}},
    }


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: schedule_upsert("a", Cron("0 25 * * *"), "j"), "spec.cron"),
        (lambda: schedule_upsert("a", Cron("0 0 * * *", tz="Mars/Base"), "j"), "spec.tz"),
        (lambda: schedule_upsert("a", Every("1x"), "j"), "spec.every"),
        (lambda: schedule_upsert("a", Every(timedelta(milliseconds=1500)), "j"), "spec.every"),
        (lambda: schedule_upsert("a", At(datetime(2030, 1, 1)), "j"), "spec.at"),
        (lambda: schedule_upsert("a", At("2020-01-01T00:00:00Z"), "j"), "spec.at"),
        (lambda: schedule_upsert("a", Every("1m"), ""), "job.name"),
        (lambda: schedule_upsert("a", Every("1m"), "j", args={"x": {1, 2}}), "value"),
        (
            lambda: schedule_upsert("a", Every("1m"), "j", retry=Retry(max_attempts=0)),
            "retry.max_attempts",
        ),
        (
            lambda: schedule_upsert("a", Every("1m"), "j", retry=Retry(jitter="some")),
            "retry.jitter",
        ),  # type: ignore[arg-type]
        (
            lambda: schedule_upsert("a", Every("1m"), "j", misfire=Misfire(grace_s=-1)),
            "misfire.grace_s",
        ),
        (lambda: schedule_upsert("a", Every("1m"), "j", overlap="never"), "overlap"),  # type: ignore[arg-type]
        (lambda: schedule_upsert("a", Every("1m"), "j", dst=Dst(fold="thrice")), "dst.fold"),  # type: ignore[arg-type]
        (lambda: schedule_upsert("a", Every("1m"), "j", spread_s=86_401), "spread.window_s"),
        (lambda: schedule_upsert("a", Every("1m"), "j", timeout_s=0), "timeout_s"),
        (lambda: schedule_upsert("a", Every("1m"), "j", end="2020-01-01T00:00:00Z"), "end"),
        (lambda: schedule_upsert("a@b", Every("1m"), "j"), "id"),
        (lambda: dag_upsert("d", Every("1m"), {}), "tasks"),
        (lambda: dag_upsert("d", Every("1m"), {"a": Task("j", after=["a"])}), "tasks"),
        (lambda: dag_upsert("d", Every("1m"), {"a/b": Task("j")}), "tasks"),
        (
            lambda: dag_upsert("d", Every("1m"), {"a": Task("j")}, max_active_runs=0),
            "max_active_runs",
        ),
        (lambda: dag_clear("d@2026-10-10T00:00:00.000Z/t", "t"), "run_id"),
        (lambda: dlq_replay("no-instant"), "run_id"),
        (lambda: run_cancel("a@2026-10-10T00:00:00.000Z", "x" * 501), "reason"),
        (lambda: validated({"v": 1, "type": "schedule.pause"}), "id"),
        (
            lambda: validated({"v": 1, "type": "schedule.pause", "id": "a", "until": "soon"}),
            "until",
        ),
    ],
)
def test_a_mistake_raises_invalid_command_naming_its_field(
    build: typing.Callable[[], object], field: str
) -> None:
    with pytest.raises(InvalidCommand) as raised:
        build()
    assert raised.value.field == field, raised.value.reason
    assert isinstance(raised.value, ValueError)


def test_the_reason_is_the_one_the_shard_would_write_to_rejected() -> None:
    body = (
        b'{"v":1,"type":"schedule.upsert","id":"a","spec":{"cron":"0 25 * * *"},"job":{"name":"j"}}'
    )
    rejection = decode_command(b"a", body, NOW)
    with pytest.raises(InvalidCommand) as raised:
        schedule_upsert("a", Cron("0 25 * * *"), "j", now_ms=NOW)
    assert isinstance(rejection, commands.Rejection) and raised.value.reason == rejection.reason


def test_aware_datetimes_of_any_zone_are_written_as_utc_instants() -> None:
    paris = timezone(timedelta(hours=2))
    record = schedule_upsert("a", At(datetime(2026, 9, 21, 16, 20, tzinfo=paris)), "j", now_ms=NOW)
    assert record.body["spec"] == {"at": "2026-09-21T14:20:00.000Z"}


def test_the_literal_names_are_the_vocabulary_words() -> None:
    for alias, words in [
        (OverlapName, OverlapPolicy),
        (MisfireName, MisfireMode),
        (JitterName, JitterMode),
        (DstGapName, DstGap),
        (DstFoldName, DstFold),
    ]:
        literal = [
            arg for arg in typing.get_args(alias) if typing.get_origin(arg) is typing.Literal
        ]
        assert [arg for lit in literal for arg in typing.get_args(lit)] == [w.value for w in words]


def test_field_of_reads_the_path_before_the_first_colon() -> None:
    assert field_of("run_id (the part after '@'): not an instant") == "run_id"
    assert (
        field_of("tasks.load.retry.jitter: expected one of full | none")
        == "tasks.load.retry.jitter"
    )


def test_a_target_replaces_the_job_and_is_decoded_as_given() -> None:
    kafka = kafkron.KafkaTarget(
        "orders.due", key="{schedule_id}", value={"due": "{scheduled_at}"}, headers={"a": "b"}
    )
    record = schedule_upsert("o", Cron("0 * * * *"), target=kafka, now_ms=NOW)
    assert "job" not in record.body
    assert record.body["target"] == {
        "kafka": {
            "topic": "orders.due",
            "key": "{schedule_id}",
            "value": {"due": "{scheduled_at}"},
            "headers": {"a": "b"},
        }
    }
    decoded = decode_command(record.key, record.value, NOW)
    assert isinstance(decoded, ScheduleUpsert) and decoded.job.name == "kafkron.kafka"
    raw = schedule_upsert("o", Cron("0 * * * *"), target=kafkron.KafkaTarget("t", raw=b"\x00"))
    assert raw.body["target"]["kafka"]["value"] == {"base64": "AA=="}
    http = kafkron.HttpTarget("https://example.com/x", body={"r": "{run_id}"}, timeout_s=5)
    decoded = schedule_upsert("h", Cron("0 * * * *"), target=http, now_ms=NOW).decoded
    assert isinstance(decoded, ScheduleUpsert) and decoded.job.name == "kafkron.http"
    assert decoded.job.args["timeout_s"] == 5 and decoded.job.args["method"] == "POST"
    with pytest.raises(kafkron.InvalidCommand) as bad:
        schedule_upsert("o", Cron("0 * * * *"), "a.job", target=kafka, now_ms=NOW)
    assert bad.value.field == "target"


def test_a_dag_task_may_call_a_url_instead_of_running_a_job() -> None:
    tasks = {"notify": Task(target=kafkron.HttpTarget("https://example.com/done"))}
    record = dag_upsert("d", Cron("0 * * * *"), tasks, now_ms=NOW)
    assert record.body["tasks"]["notify"] == {
        "target": {"http": {"url": "https://example.com/done"}}
    }
    decoded = record.decoded
    assert isinstance(decoded, DagUpsert) and decoded.tasks["notify"].job.name == "kafkron.http"


def test_a_pause_says_why_until_when_and_by_whom() -> None:
    from topics.command_builders import schedule_pause
    from topics.command_types import SchedulePause

    record = schedule_pause(
        "a", note="db migration", until=timedelta(hours=2), by="ops", after_current=True, now_ms=NOW
    )
    assert record.decoded == SchedulePause(
        "a", note="db migration", until_ms=NOW + 7_200_000, after_current=True, by="ops"
    )
    assert schedule_pause("a").body == {"v": 1, "type": "schedule.pause", "id": "a"}
