"""decode_command: every bad input of docs/DESIGN.md §2 gives a Rejection naming the field;
valid commands decode with the documented defaults; nothing ever raises."""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actors.timespec  # noqa: F401  (installs the spec compiler the decoder uses)
from topics.commands import (
    MAX_COMMAND_BYTES,
    DagClear,
    DagUpsert,
    DlqReplay,
    Job,
    MisfirePolicy,
    Rejection,
    RetryPolicy,
    ScheduleDelete,
    SchedulePause,
    ScheduleResume,
    ScheduleTrigger,
    ScheduleUpsert,
    command_id,
    decode_command,
    decode_object,
)
from topics.dag_graph import GraphError, topological_order
from topics.timefmt import format_ms, parse_instant

NOW_MS = parse_instant("2026-06-01T12:00:00Z")
COMMAND_CLASSES = (
    ScheduleUpsert,
    ScheduleDelete,
    SchedulePause,
    ScheduleResume,
    ScheduleTrigger,
    DagUpsert,
    DagClear,
    DlqReplay,
)


def upsert(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "v": 1,
        "type": "schedule.upsert",
        "id": "invoice-nightly",
        "spec": {"cron": "0 0 * * *", "tz": "Europe/London"},
        "job": {"name": "billing.invoice_nightly", "args": {"customer": "c-42"}},
    }
    body.update(changes)
    return body


def dag(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "v": 1,
        "type": "dag.upsert",
        "id": "nightly-billing",
        "spec": {"cron": "0 2 * * *"},
        "tasks": {
            "usage-rollup": {"job": {"name": "usage.rollup"}},
            "fx-rates": {"job": {"name": "fx.rates"}},
            "invoice-nightly": {
                "job": {"name": "billing.invoice_nightly"},
                "after": ["usage-rollup", "fx-rates"],
            },
            "send-invoices": {"job": {"name": "billing.send"}, "after": ["invoice-nightly"]},
        },
    }
    body.update(changes)
    return body


def tasks(**after: list[str]) -> dict[str, Any]:
    return {name: {"job": {"name": "j"}, "after": deps} for name, deps in after.items()}


def encode(body: Any) -> bytes:
    return orjson.dumps(body)


def decode(body: Any, key: bytes | None = None) -> Any:
    return decode_command(key, encode(body), NOW_MS)


def at(offset_s: int) -> str:
    return format_ms(NOW_MS + offset_s * 1000)


def with_field(path: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Set a dotted field of a copy of the body."""

    def change(body: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(body)
        *parents, leaf = path.split(".")
        target = body
        for parent in parents:
            if not isinstance(target.get(parent), dict):
                target[parent] = {}
            target = target[parent]
        target[leaf] = value
        return body

    return change


# (case id, key, value bytes or None, the field the reason must start with, a phrase it must hold)
BAD_RECORDS: list[tuple[str, bytes | None, bytes | None, str, str]] = [
    ("malformed json", None, b'{"v": 1, "type": ', "value:", "not valid JSON"),
    ("not utf-8 json", None, b'{"v": 1, "id": "\xff"}', "value:", "not valid JSON"),
    ("json array", None, b"[1, 2]", "value:", "expected a JSON object"),
    ("json string", None, b'"schedule.delete"', "value:", "expected a JSON object"),
    ("empty value", None, b"", "value:", "not valid JSON"),
    ("tombstone", b"x", None, "value:", "no value"),
    (
        "oversized",
        None,
        encode(upsert(job={"name": "j", "args": {"blob": "x" * MAX_COMMAND_BYTES}})),
        "value:",
        "256 KiB",
    ),
    ("non-utf-8 key", b"\xff\xfeid", encode(upsert()), "key:", "not valid UTF-8"),
    ("key differs from id", b"other", encode(upsert()), "key:", "differs from id"),
    ("missing v", None, encode({"type": "schedule.delete", "id": "a"}), "v:", '"v": 1'),
    ("v is 2", None, encode({"v": 2, "type": "schedule.delete", "id": "a"}), "v:", "expected 1"),
    (
        "v is true",
        None,
        encode({"v": True, "type": "schedule.delete", "id": "a"}),
        "v:",
        "expected 1",
    ),
    (
        "v is a string",
        None,
        encode({"v": "1", "type": "schedule.delete", "id": "a"}),
        "v:",
        "expected 1",
    ),
    ("missing type", None, encode({"v": 1, "id": "a"}), "type:", "schedule.upsert"),
    ("unknown type", None, encode(upsert(type="schedule.upsrt")), "type:", "unknown command type"),
    ("type not a string", None, encode(upsert(type=7)), "type:", "unknown command type"),
    ("missing id", None, encode({"v": 1, "type": "schedule.delete"}), "id:", "missing"),
    ("id null", None, encode(upsert(id=None)), "id:", "missing"),
    ("id a number", None, encode(upsert(id=42)), "id:", "expected a string"),
    ("id empty", None, encode(upsert(id="")), "id:", "must not be empty"),
    ("id too long", None, encode(upsert(id="x" * 201)), "id:", "at most 200"),
    ("id with @", None, encode(upsert(id="a@b")), "id:", "run id"),
    ("id with /", None, encode(upsert(id="a/b")), "id:", "run id"),
    ("id with newline", None, encode(upsert(id="a\nb")), "id:", "U+000A"),
    ("unknown field", None, encode(upsert(misfre={})), "misfre:", "did you mean 'misfire'"),
    ("args outside job", None, encode(upsert(args={})), "args:", "inside job"),
    ("missing spec", None, encode(upsert(spec=None)), "spec:", "missing"),
    ("spec a string", None, encode(upsert(spec="0 0 * * *")), "spec:", "JSON object"),
    (
        "spec two kinds",
        None,
        encode(upsert(spec={"cron": "* * * * *", "every": "1m"})),
        "spec:",
        "exactly one",
    ),
    ("spec no kind", None, encode(upsert(spec={"tz": "UTC"})), "spec:", "exactly one"),
    (
        "spec unknown key",
        None,
        encode(upsert(spec={"cron": "* * * * *", "timezone": "UTC"})),
        "spec.timezone:",
        "did you mean 'tz'",
    ),
    ("at not an instant", None, encode(upsert(spec={"at": "tomorrow"})), "spec.at:", "RFC 3339"),
    (
        "at without offset",
        None,
        encode(upsert(spec={"at": "2026-12-04T14:05:00"})),
        "spec.at:",
        "UTC offset",
    ),
    ("at a number", None, encode(upsert(spec={"at": 1764000000})), "spec.at:", "RFC 3339"),
    (
        "at in the distant past",
        None,
        encode(upsert(spec={"at": "2001-01-01T00:00:00Z"})),
        "spec.at:",
        "in the past",
    ),
    (
        "at just beyond grace",
        None,
        encode(upsert(spec={"at": at(-301)})),
        "spec.at:",
        "misfire.grace_s (300 s)",
    ),
    (
        "at beyond a custom grace",
        None,
        encode(upsert(spec={"at": at(-61)}, misfire={"grace_s": 60})),
        "spec.at:",
        "(60 s)",
    ),
    (
        "at in the far future",
        None,
        encode(upsert(spec={"at": "2040-01-01T00:00:00Z"})),
        "spec.at:",
        "10 years",
    ),
    ("missing job", None, encode(upsert(job=None)), "job:", "missing"),
    ("job a string", None, encode(upsert(job="billing")), "job:", "JSON object"),
    ("job.name missing", None, encode(upsert(job={"args": {}})), "job.name:", "expected a string"),
    ("job.name a number", None, encode(upsert(job={"name": 5})), "job.name:", "expected a string"),
    (
        "job.args a list",
        None,
        encode(upsert(job={"name": "j", "args": [1]})),
        "job.args:",
        "JSON object",
    ),
    (
        "job unknown key",
        None,
        encode(upsert(job={"name": "j", "kwargs": {}})),
        "job.kwargs:",
        "unknown field",
    ),
    ("misfire a string", None, encode(upsert(misfire="skip")), "misfire:", "JSON object"),
    (
        "unknown misfire policy",
        None,
        encode(upsert(misfire={"policy": "later"})),
        "misfire.policy:",
        "run_once | catch_up | skip",
    ),
    (
        "grace_s a string",
        None,
        encode(upsert(misfire={"grace_s": "300"})),
        "misfire.grace_s:",
        "expected an integer",
    ),
    (
        "grace_s a float",
        None,
        encode(upsert(misfire={"grace_s": 300.5})),
        "misfire.grace_s:",
        "expected an integer",
    ),
    (
        "grace_s negative",
        None,
        encode(upsert(misfire={"grace_s": -1})),
        "misfire.grace_s:",
        "between 0",
    ),
    (
        "catch_up_max zero",
        None,
        encode(upsert(misfire={"catch_up_max": 0})),
        "misfire.catch_up_max:",
        "between 1",
    ),
    (
        "unknown overlap policy",
        None,
        encode(upsert(overlap="queue")),
        "overlap:",
        "allow | skip | buffer_one",
    ),
    ("overlap a list", None, encode(upsert(overlap=["skip"])), "overlap:", "expected one of"),
    ("unknown dst gap", None, encode(upsert(dst={"gap": "jump"})), "dst.gap:", "shift | skip"),
    ("unknown dst fold", None, encode(upsert(dst={"fold": "thrice"})), "dst.fold:", "once | twice"),
    (
        "spread window too wide",
        None,
        encode(upsert(spread={"window_s": 90_000})),
        "spread.window_s:",
        "between 0 and 86400",
    ),
    (
        "spread window a string",
        None,
        encode(upsert(spread={"window_s": "15m"})),
        "spread.window_s:",
        "expected an integer",
    ),
    ("retry a list", None, encode(upsert(retry=[5])), "retry:", "JSON object"),
    (
        "max_attempts zero",
        None,
        encode(upsert(retry={"max_attempts": 0})),
        "retry.max_attempts:",
        "between 1",
    ),
    (
        "max_attempts a bool",
        None,
        encode(upsert(retry={"max_attempts": True})),
        "retry.max_attempts:",
        "expected an integer",
    ),
    (
        "max_attempts a float",
        None,
        encode(upsert(retry={"max_attempts": 2.5})),
        "retry.max_attempts:",
        "expected an integer",
    ),
    (
        "initial_s negative",
        None,
        encode(upsert(retry={"initial_s": -1})),
        "retry.initial_s:",
        "between",
    ),
    ("initial_s zero", None, encode(upsert(retry={"initial_s": 0})), "retry.initial_s:", "between"),
    (
        "initial_s a string",
        None,
        encode(upsert(retry={"initial_s": "1s"})),
        "retry.initial_s:",
        "expected a number",
    ),
    (
        "coefficient below 1",
        None,
        encode(upsert(retry={"coefficient": 0.5})),
        "retry.coefficient:",
        "between 1",
    ),
    (
        "cap below initial",
        None,
        encode(upsert(retry={"initial_s": 10, "max_interval_s": 5})),
        "retry.max_interval_s:",
        "below retry.initial_s",
    ),
    (
        "unknown jitter",
        None,
        encode(upsert(retry={"jitter": "partial"})),
        "retry.jitter:",
        "full | none",
    ),
    (
        "non_retryable a string",
        None,
        encode(upsert(retry={"non_retryable": "Boom"})),
        "retry.non_retryable:",
        "list of strings",
    ),
    (
        "non_retryable numbers",
        None,
        encode(upsert(retry={"non_retryable": [1]})),
        "retry.non_retryable[0]:",
        "expected a string",
    ),
    (
        "retry unknown key",
        None,
        encode(upsert(retry={"attempts": 3})),
        "retry.attempts:",
        "did you mean 'max_attempts'",
    ),
    ("timeout zero", None, encode(upsert(timeout_s=0)), "timeout_s:", "between 1"),
    ("timeout a float", None, encode(upsert(timeout_s=1.5)), "timeout_s:", "expected an integer"),
    ("start not an instant", None, encode(upsert(start="monday")), "start:", "RFC 3339"),
    (
        "end before start",
        None,
        encode(upsert(start=at(7200), end=at(3600))),
        "end:",
        "not after start",
    ),
    ("end already past", None, encode(upsert(end=at(-10))), "end:", "already past"),
    ("dag cycle", None, encode(dag(tasks=tasks(a=["b"], b=["a"]))), "tasks:", "cycle, a -> b -> a"),
    ("dag self loop", None, encode(dag(tasks=tasks(a=[], b=["b"]))), "tasks:", "cycle, b -> b"),
    (
        "dag cycle behind a root",
        None,
        encode(dag(tasks=tasks(root=[], x=["root", "z"], y=["x"], z=["y"]))),
        "tasks:",
        "cycle, x -> y -> z -> x",
    ),
    (
        "dag unknown dependency",
        None,
        encode(dag(tasks=tasks(extract=[], load=["extrct"]))),
        "tasks.load.after:",
        "'extrct' is not a task",
    ),
    ("dag empty graph", None, encode(dag(tasks={})), "tasks:", "at least one task"),
    ("dag tasks missing", None, encode(dag(tasks=None)), "tasks:", "JSON object"),
    (
        "dag too many tasks",
        None,
        encode(dag(tasks={f"t{i}": {"job": {"name": "j"}} for i in range(1001)})),
        "tasks:",
        "at most 1000",
    ),
    (
        "dag task name with /",
        None,
        encode(dag(tasks=tasks(**{"a/b": []}))),
        "tasks (a task name):",
        "run id",
    ),
    (
        "dag task unknown key",
        None,
        encode(dag(tasks={"a": {"job": {"name": "j"}, "afer": []}})),
        "tasks.a.afer:",
        "did you mean 'after'",
    ),
    ("dag task without job", None, encode(dag(tasks={"a": {}})), "tasks.a.job:", "missing"),
    (
        "dag after not a list",
        None,
        encode(dag(tasks={"a": {"job": {"name": "j"}, "after": "b"}})),
        "tasks.a.after:",
        "list of strings",
    ),
    (
        "dag task retry",
        None,
        encode(dag(tasks={"a": {"job": {"name": "j"}, "retry": {"max_attempts": -1}}})),
        "tasks.a.retry.max_attempts:",
        "between 1",
    ),
    (
        "dag max_active_runs zero",
        None,
        encode(dag(max_active_runs=0)),
        "max_active_runs:",
        "between 1",
    ),
    ("dag with overlap", None, encode(dag(overlap="skip")), "overlap:", "unknown field"),
    (
        "clear without run_id",
        None,
        encode({"v": 1, "type": "dag.clear", "id": "d", "task": "t"}),
        "run_id:",
        "expected a string",
    ),
    (
        "clear run of another dag",
        None,
        encode(
            {
                "v": 1,
                "type": "dag.clear",
                "id": "d",
                "run_id": "e@2026-01-01T00:00:00.000Z",
                "task": "t",
            }
        ),
        "run_id:",
        "not a run of 'd'",
    ),
    (
        "clear a task run id",
        None,
        encode(
            {
                "v": 1,
                "type": "dag.clear",
                "id": "d",
                "run_id": "d@2026-01-01T00:00:00.000Z/t",
                "task": "t",
            }
        ),
        "run_id:",
        "names a task run",
    ),
    (
        "clear without task",
        None,
        encode({"v": 1, "type": "dag.clear", "id": "d", "run_id": "d@2026-01-01T00:00:00.000Z"}),
        "task:",
        "expected a string",
    ),
    (
        "replay bad run time",
        None,
        encode({"v": 1, "type": "dlq.replay", "id": "d", "run_id": "d@yesterday"}),
        "run_id (the part after '@'):",
        "RFC 3339",
    ),
    (
        "delete with extra field",
        None,
        encode({"v": 1, "type": "schedule.delete", "id": "a", "spec": {}}),
        "spec:",
        "unknown field",
    ),
]


@pytest.mark.parametrize(
    ("key", "value", "field", "phrase"),
    [case[1:] for case in BAD_RECORDS],
    ids=[case[0] for case in BAD_RECORDS],
)
def test_bad_input_is_rejected_naming_the_field(
    key: bytes | None, value: bytes | None, field: str, phrase: str
) -> None:
    outcome = decode_command(key, value, NOW_MS)
    assert isinstance(outcome, Rejection), outcome
    assert outcome.reason.startswith(field), outcome.reason
    assert phrase in outcome.reason, outcome.reason


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"cron": "61 * * * *"}, "spec.cron"),
        ({"cron": "* * *"}, "spec.cron"),
        ({"cron": 5}, "spec.cron"),
        ({"cron": "0 0 * * *", "tz": "Mars/Olympus_Mons"}, "spec.tz"),
        ({"every": "soon"}, "spec.every"),
    ],
)
def test_invalid_spec_is_rejected_with_the_spec_error(spec: dict[str, Any], field: str) -> None:
    outcome = decode(upsert(spec=spec))
    assert isinstance(outcome, Rejection), outcome
    assert outcome.reason.startswith(field), outcome.reason


def test_schedule_upsert_defaults() -> None:
    body = upsert(spec={"cron": "0 0 * * *"})
    command = decode(body, key=b"invoice-nightly")
    assert isinstance(command, ScheduleUpsert), command
    assert command.id == "invoice-nightly"
    assert command.job == Job("billing.invoice_nightly", {"customer": "c-42"})
    assert command.misfire == MisfirePolicy("run_once", 300, 100)
    assert command.overlap == "skip"
    assert command.dst == {"gap": "shift", "fold": "once"}
    assert command.spread_window_s == 0
    assert command.retry == RetryPolicy(5, 1.0, 2.0, 100.0, "full", ())
    assert command.timeout_s == 3600
    assert (command.start_ms, command.end_ms) == (None, None)
    assert command.raw == body
    first = command.compiled.next_after(NOW_MS)
    assert first == parse_instant("2026-06-02T00:00:00Z")


def test_schedule_upsert_every_field() -> None:
    body = upsert(
        misfire={"policy": "catch_up", "grace_s": 3600, "catch_up_max": 10},
        overlap="buffer_all",
        dst={"gap": "skip", "fold": "twice"},
        spread={"window_s": 900},
        retry={
            "max_attempts": 3,
            "initial_s": 0.5,
            "coefficient": 3,
            "max_interval_s": 60,
            "jitter": "none",
            "non_retryable": ["AccountDeleted"],
        },
        timeout_s=120,
        start=at(3600),
        end=at(86_400 * 30),
    )
    command = decode(body)
    assert isinstance(command, ScheduleUpsert), command
    assert command.misfire == MisfirePolicy("catch_up", 3600, 10)
    assert command.overlap == "buffer_all"
    assert command.dst == {"gap": "skip", "fold": "twice"}
    assert command.spread_window_s == 900
    assert command.retry == RetryPolicy(3, 0.5, 3.0, 60.0, "none", ("AccountDeleted",))
    assert command.timeout_s == 120
    assert command.start_ms == NOW_MS + 3_600_000
    assert command.end_ms == NOW_MS + 86_400_000 * 30


def test_null_optional_fields_mean_defaults() -> None:
    command = decode(upsert(misfire=None, overlap=None, dst=None, retry=None, timeout_s=None))
    assert isinstance(command, ScheduleUpsert), command
    assert command.overlap == "skip"
    assert command.retry == RetryPolicy()
    assert command.job.args == {"customer": "c-42"}


def test_one_off_at_within_grace_is_accepted() -> None:
    recent = decode(upsert(spec={"at": at(-299)}))
    assert isinstance(recent, ScheduleUpsert), recent
    future = decode(upsert(spec={"at": "2030-01-01T09:00:00+01:00"}))
    assert isinstance(future, ScheduleUpsert), future
    assert future.compiled.next_after(NOW_MS) == parse_instant("2030-01-01T08:00:00Z")


def test_rebuild_from_raw_skips_clock_checks() -> None:
    body = upsert(spec={"at": at(60)})
    accepted = decode(body)
    assert isinstance(accepted, ScheduleUpsert), accepted
    later_ms = NOW_MS + 86_400_000
    assert isinstance(decode_command(None, encode(body), later_ms), Rejection)
    rebuilt = decode_object(accepted.raw, now_ms=None)
    assert isinstance(rebuilt, ScheduleUpsert), rebuilt
    assert rebuilt.spec == accepted.spec
    assert rebuilt.job == accepted.job
    assert isinstance(decode_object({"v": 1}, now_ms=None), Rejection)


def test_dag_upsert_order_and_inheritance() -> None:
    body = dag(retry={"max_attempts": 2}, timeout_s=600)
    body["tasks"]["fx-rates"]["retry"] = {"initial_s": 5}
    body["tasks"]["send-invoices"]["timeout_s"] = 30
    command = decode(body)
    assert isinstance(command, DagUpsert), command
    assert command.topo_order == ("usage-rollup", "fx-rates", "invoice-nightly", "send-invoices")
    assert command.tasks["invoice-nightly"].after == ("usage-rollup", "fx-rates")
    assert command.tasks["usage-rollup"].after == ()
    assert command.tasks["usage-rollup"].retry == RetryPolicy(max_attempts=2)
    # a task's own retry fields override the DAG's, field by field
    assert command.tasks["fx-rates"].retry == RetryPolicy(max_attempts=2, initial_s=5.0)
    assert command.tasks["send-invoices"].timeout_s == 30
    assert command.tasks["usage-rollup"].timeout_s == 600
    assert command.max_active_runs == 1
    assert command.misfire == MisfirePolicy()


def test_dag_order_puts_every_task_after_its_dependencies() -> None:
    body = dag(tasks=tasks(d=["b", "c"], c=["a"], b=["a", "a"], a=[]))
    command = decode(body)
    assert isinstance(command, DagUpsert), command
    assert command.topo_order == ("a", "c", "b", "d")
    assert command.tasks["b"].after == ("a",)


def test_simple_commands() -> None:
    for kind, cls in (
        ("schedule.delete", ScheduleDelete),
        ("schedule.pause", SchedulePause),
        ("schedule.resume", ScheduleResume),
        ("schedule.trigger", ScheduleTrigger),
    ):
        command = decode({"v": 1, "type": kind, "id": "invoice-nightly"}, key=b"invoice-nightly")
        assert command == cls("invoice-nightly")
    run_id = "nightly-billing@2026-10-10T00:00:00.000Z"
    clear = decode(
        {"v": 1, "type": "dag.clear", "id": "nightly-billing", "run_id": run_id, "task": "fx"}
    )
    assert clear == DagClear("nightly-billing", run_id, "fx")
    replay = decode(
        {"v": 1, "type": "dlq.replay", "id": "nightly-billing", "run_id": run_id + "/fx"}
    )
    assert replay == DlqReplay("nightly-billing", run_id + "/fx")


def test_key_rules() -> None:
    body = {"v": 1, "type": "schedule.pause", "id": "é-report"}
    assert decode(body, key="é-report".encode()) == SchedulePause("é-report")
    assert decode(body, key=None) == SchedulePause("é-report")
    assert decode(body, key=b"") == SchedulePause("é-report")
    assert isinstance(decode(body, key=b"e-report"), Rejection)


def test_command_id_routes_by_key_then_body() -> None:
    body = encode({"v": 1, "type": "schedule.pause", "id": "from-body"})
    assert command_id(b"from-key", body) == "from-key"
    assert command_id(None, body) == "from-body"
    assert command_id(b"\xff", body) == "from-body"
    assert command_id(None, b"not json") is None
    assert command_id(None, None) is None
    assert command_id(None, encode({"id": 3})) is None
    assert command_id(None, b" " * (MAX_COMMAND_BYTES + 1)) is None


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
field_names = st.sampled_from(
    [
        "v", "type", "id", "spec", "job", "misfire", "overlap", "dst", "spread", "retry",
        "timeout_s", "start", "end", "tasks", "run_id", "task", "max_active_runs", "args",
    ]
)  # fmt: skip


def assert_decoded(outcome: object) -> None:
    assert isinstance(outcome, (Rejection, *COMMAND_CLASSES))
    if isinstance(outcome, Rejection):
        assert isinstance(outcome.reason, str) and outcome.reason
        assert len(outcome.reason) < 1500, outcome.reason


@settings(max_examples=150, deadline=None)
@given(key=st.none() | st.binary(max_size=20), value=st.none() | st.binary(max_size=200))
def test_arbitrary_bytes_never_raise(key: bytes | None, value: bytes | None) -> None:
    assert_decoded(decode_command(key, value, NOW_MS))


@settings(max_examples=150, deadline=None)
@given(value=json_values)
def test_arbitrary_json_never_raises(value: Any) -> None:
    assert_decoded(decode_command(None, encode(value), NOW_MS))


@settings(max_examples=200, deadline=None)
@given(
    base=st.sampled_from([upsert(), dag()]),
    path=st.lists(field_names, min_size=1, max_size=3),
    value=json_values,
)
def test_valid_command_with_one_field_replaced_never_raises(
    base: dict[str, Any], path: list[str], value: Any
) -> None:
    body = with_field(".".join(path), value)(base)
    assert_decoded(decode_command(None, encode(body), NOW_MS))


@st.composite
def acyclic_graphs(draw: st.DrawFn) -> dict[str, list[str]]:
    """Acyclic graphs whose declaration order is not their dependency order."""
    size = draw(st.integers(min_value=1, max_value=20))
    rank = draw(st.permutations(range(size)))  # a hidden order the edges respect
    names = [f"t{i}" for i in range(size)]
    graph: dict[str, list[str]] = {}
    for i in range(size):
        earlier = [names[j] for j in range(size) if rank[j] < rank[i]]
        graph[names[i]] = draw(st.lists(st.sampled_from(earlier), max_size=4)) if earlier else []
    return graph


@settings(max_examples=100, deadline=None)
@given(graph=acyclic_graphs())
def test_topological_order_respects_every_dependency(graph: dict[str, list[str]]) -> None:
    order = topological_order(graph)
    assert sorted(order) == sorted(graph)
    position = {name: index for index, name in enumerate(order)}
    for name, after in graph.items():
        assert all(position[dep] < position[name] for dep in after)
    assert topological_order(dict(graph)) == order


@settings(max_examples=100, deadline=None)
@given(graph=acyclic_graphs(), data=st.data())
def test_a_back_edge_is_reported_as_a_real_cycle(
    graph: dict[str, list[str]], data: st.DataObject
) -> None:
    order = topological_order(graph)
    low = data.draw(st.integers(min_value=0, max_value=len(order) - 1))
    high = data.draw(st.integers(min_value=low, max_value=len(order) - 1))
    # chain order[low..high] explicitly, then close it: a cycle through those tasks
    chain = list(order[low : high + 1])
    cyclic = {name: list(after) for name, after in graph.items()}
    for before, after in itertools.pairwise(chain):
        cyclic[after].append(before)
    cyclic[chain[0]].append(chain[-1])
    with pytest.raises(GraphError) as raised:
        topological_order(cyclic)
    match = re.search(r"cycle, (.+?) \(", str(raised.value))
    assert match is not None, str(raised.value)
    loop = match.group(1).split(" -> ")
    assert loop[0] == loop[-1]
    if "..." in loop:  # a long cycle is named by its first tasks, then its size
        assert re.search(r"\((\d+) tasks\)", str(raised.value)), str(raised.value)
        loop = loop[: loop.index("...")]  # consecutive tasks of the cycle, none repeated
        assert len(set(loop)) == len(loop)
    else:
        assert len(set(loop[:-1])) == len(loop) - 1
    for before, after in itertools.pairwise(loop):
        assert before in cyclic[after], (before, after, cyclic)


def test_a_long_cycle_is_named_by_its_first_tasks_and_its_size() -> None:
    """The case the property above once drew: 13 tasks in one loop."""
    names = [f"t{i}" for i in range(13)]
    cyclic = {name: [names[i - 1]] for i, name in enumerate(names)}  # t12 closes it
    with pytest.raises(GraphError) as raised:
        topological_order(cyclic)
    text = str(raised.value)
    assert " -> ".join(names[:12]) + " -> ... -> t0 (13 tasks)" in text, text


retry_bodies = st.fixed_dictionaries(
    {},
    optional={
        "max_attempts": st.integers(min_value=1, max_value=1000),
        "initial_s": st.floats(min_value=0.001, max_value=50),
        "coefficient": st.floats(min_value=1, max_value=100),
        "max_interval_s": st.floats(min_value=50, max_value=604_800),
        "jitter": st.sampled_from(["full", "none"]),
        "non_retryable": st.lists(st.text(min_size=1, max_size=10), max_size=3),
    },
)
valid_upserts = st.fixed_dictionaries(
    {
        "spec": st.sampled_from(
            [
                {"cron": "0 0 * * *", "tz": "Europe/London"},
                {"cron": "H H(0-5) * * MON-FRI"},
                {"every": "90s"},
                {"every": "1h30m", "anchor": "2026-01-01T00:00:00Z"},
                {"at": "2027-03-01T09:30:00+01:00"},
            ]
        ),
        "job": st.fixed_dictionaries(
            # Names starting "kafkron." are the targets' carriers, refused in a job.
            {
                "name": st.text(min_size=1, max_size=30).filter(
                    lambda n: not n.startswith("kafkron.")
                )
            },
            optional={
                "args": st.dictionaries(st.text(max_size=5), st.integers(-1000, 1000), max_size=3)
            },
        ),
    },
    optional={
        "misfire": st.fixed_dictionaries(
            {},
            optional={
                "policy": st.sampled_from(["run_once", "catch_up", "skip"]),
                "grace_s": st.integers(min_value=0, max_value=366 * 86_400),
                "catch_up_max": st.integers(min_value=1, max_value=10_000),
            },
        ),
        "overlap": st.sampled_from(["allow", "skip", "buffer_one", "buffer_all", "cancel_other"]),
        "dst": st.fixed_dictionaries(
            {},
            optional={
                "gap": st.sampled_from(["shift", "skip"]),
                "fold": st.sampled_from(["once", "twice"]),
            },
        ),
        "spread": st.fixed_dictionaries({"window_s": st.integers(min_value=0, max_value=86_400)}),
        "retry": retry_bodies,
        "timeout_s": st.integers(min_value=1, max_value=30 * 86_400),
    },
)


@settings(max_examples=60, deadline=None)
@given(
    fields=valid_upserts, schedule_id=st.from_regex(r"[a-z0-9][a-z0-9._-]{0,40}", fullmatch=True)
)
def test_valid_upserts_decode_to_what_they_say(fields: dict[str, Any], schedule_id: str) -> None:
    body = {"v": 1, "type": "schedule.upsert", "id": schedule_id, **fields}
    command = decode(body, key=schedule_id.encode())
    assert isinstance(command, ScheduleUpsert), command
    assert command.spec == body["spec"]
    assert command.job == Job(body["job"]["name"], body["job"].get("args", {}))
    misfire = {
        **{"policy": "run_once", "grace_s": 300, "catch_up_max": 100},
        **fields.get("misfire", {}),
    }
    assert command.misfire == MisfirePolicy(**misfire)
    assert command.overlap == fields.get("overlap", "skip")
    assert command.dst == {"gap": "shift", "fold": "once", **fields.get("dst", {})}
    assert command.spread_window_s == fields.get("spread", {}).get("window_s", 0)
    retry = fields.get("retry", {})
    assert command.retry == RetryPolicy(
        max_attempts=retry.get("max_attempts", 5),
        initial_s=retry.get("initial_s", 1.0),
        coefficient=retry.get("coefficient", 2.0),
        max_interval_s=retry.get("max_interval_s", 100.0),
        jitter=retry.get("jitter", "full"),
        non_retryable=tuple(retry.get("non_retryable", ())),
    )
    assert command.timeout_s == fields.get("timeout_s", 3600)
    assert command.compiled.kind in body["spec"]
    # the raw object round-trips: decoding it again gives the same command
    again = decode_object(command.raw, now_ms=None)
    assert isinstance(again, ScheduleUpsert)
    assert (again.id, again.job, again.misfire, again.retry, again.dst) == (
        command.id,
        command.job,
        command.misfire,
        command.retry,
        command.dst,
    )
    first = command.compiled.next_after(NOW_MS)
    assert again.compiled.next_after(NOW_MS) == first


@pytest.mark.parametrize(
    "body",
    [
        upsert(**{"x" * 100_000: 1}),
        upsert(spec={"at": "9" * 100_000}),
        {"v": 1, "type": "dlq.replay", "id": "a", "run_id": "b" * 900},
        dag(tasks={f"{'t' * 150}{i}": {"job": {"name": "j"}} for i in range(900)} | tasks(z=["y"])),
        dag(
            tasks={
                f"{'t' * 150}{i}": {"job": {"name": "j"}, "after": [f"{'t' * 150}{i - 1}"]}
                for i in range(1, 1000)
            }
            | {"t" * 150 + "0": {"job": {"name": "j"}, "after": ["t" * 150 + "999"]}}
        ),
    ],
    ids=["runaway key", "runaway instant", "long run id", "unknown dep among many", "long cycle"],
)
def test_reasons_stay_small_whatever_the_input(body: dict[str, Any]) -> None:
    outcome = decode_command(
        b"x" * 10_000 if body.get("id") == "zzz" else None, encode(body), NOW_MS
    )
    assert isinstance(outcome, Rejection), outcome
    assert len(outcome.reason) < 1500, len(outcome.reason)
    key_outcome = decode_command(b"k" * 100_000, encode(upsert()), NOW_MS)
    assert isinstance(key_outcome, Rejection) and len(key_outcome.reason) < 1500
