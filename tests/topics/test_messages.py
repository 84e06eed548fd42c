"""Codec round trips for every record kafkron writes, run ids, idempotency keys,
and strict parsing (a bad record raises ValueError naming the field)."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from topics.commands import Job
from topics.messages import (
    STATUSES,
    DeadLetter,
    Rejected,
    Result,
    Run,
    dlq_value,
    idempotency_key,
    parse_dlq,
    parse_rejected,
    parse_result,
    parse_run,
    parse_run_id,
    rejected_value,
    result_value,
    run_id_for,
    run_value,
)
from topics.timefmt import parse_instant

MAX_INSTANT_MS = parse_instant("9999-12-31T23:59:59.999Z")

instants = st.integers(min_value=0, max_value=MAX_INSTANT_MS)
ids = st.text(
    alphabet=st.characters(exclude_characters="@/", categories=["L", "N", "P", "S", "Zs"]),
    min_size=1,
    max_size=40,
)
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=10,
)
jobs = st.builds(Job, name=texts.filter(bool), args=st.dictionaries(texts, json_values, max_size=4))
errors = st.none() | st.fixed_dictionaries({"type": texts, "message": texts})
tasks = st.none() | ids


@given(
    schedule_id=ids,
    task=tasks,
    scheduled_ms=instants,
    fired_ms=instants,
    attempt=st.integers(min_value=1, max_value=1000),
    job=jobs,
    deadline_ms=instants,
    logical_date_ms=st.none() | instants,
    data_interval=st.none() | st.tuples(instants, instants),
)
def test_run_round_trip(
    schedule_id: str,
    task: str | None,
    scheduled_ms: int,
    fired_ms: int,
    attempt: int,
    job: Job,
    deadline_ms: int,
    logical_date_ms: int | None,
    data_interval: tuple[int, int] | None,
) -> None:
    run_id = run_id_for(schedule_id, scheduled_ms, task)
    expected = Run(
        run_id=run_id,
        schedule_id=schedule_id,
        task=task,
        scheduled_ms=scheduled_ms,
        fired_ms=fired_ms,
        attempt=attempt,
        job=job,
        idempotency_key=idempotency_key(run_id),
        deadline_ms=deadline_ms,
        logical_date_ms=logical_date_ms,
        data_interval=data_interval,
    )
    value = run_value(
        run_id=run_id,
        schedule_id=schedule_id,
        task=task,
        scheduled_ms=scheduled_ms,
        fired_ms=fired_ms,
        attempt=attempt,
        job=job,
        idempotency_key=idempotency_key(run_id),
        deadline_ms=deadline_ms,
        logical_date_ms=logical_date_ms,
        data_interval=data_interval,
    )
    assert parse_run(value) == expected
    assert orjson.loads(value)["v"] == 1


def test_run_wire_format() -> None:
    scheduled_ms = parse_instant("2026-10-10T00:00:00Z")
    run_id = run_id_for("nightly-billing", scheduled_ms, "fx-rates")
    value = run_value(
        run_id=run_id,
        schedule_id="nightly-billing",
        task="fx-rates",
        scheduled_ms=scheduled_ms,
        fired_ms=scheduled_ms + 7,
        attempt=2,
        job=Job("fx.rates", {"currency": "EUR"}),
        idempotency_key="k",
        deadline_ms=scheduled_ms + 3_600_000,
    )
    assert orjson.loads(value) == {
        "v": 1,
        "run_id": "nightly-billing@2026-10-10T00:00:00.000Z/fx-rates",
        "schedule_id": "nightly-billing",
        "task": "fx-rates",
        "scheduled_at": "2026-10-10T00:00:00.000Z",
        "fired_at": "2026-10-10T00:00:00.007Z",
        "attempt": 2,
        "job": {"name": "fx.rates", "args": {"currency": "EUR"}},
        "idempotency_key": "k",
        "deadline": "2026-10-10T01:00:00.000Z",
    }


@given(
    schedule_id=ids,
    task=tasks,
    attempt=st.integers(min_value=1, max_value=1000),
    status=st.sampled_from(STATUSES),
    scheduled_ms=instants,
    started_ms=st.none() | instants,
    finished_ms=st.none() | instants,
    worker=texts,
    error=errors,
)
def test_result_round_trip(
    schedule_id: str,
    task: str | None,
    attempt: int,
    status: str,
    scheduled_ms: int,
    started_ms: int | None,
    finished_ms: int | None,
    worker: str,
    error: dict[str, str] | None,
) -> None:
    fields: dict[str, Any] = {
        "run_id": run_id_for(schedule_id, scheduled_ms, task),
        "schedule_id": schedule_id,
        "task": task,
        "attempt": attempt,
        "status": status,
        "scheduled_ms": scheduled_ms,
        "started_ms": started_ms,
        "finished_ms": finished_ms,
        "worker": worker,
        "error": error,
    }
    assert parse_result(result_value(**fields)) == Result(**fields)


def test_result_wire_format_of_a_missed_occurrence() -> None:
    value = result_value(
        run_id="a@2026-10-10T00:00:00.000Z",
        schedule_id="a",
        task=None,
        attempt=1,
        status="missed",
        scheduled_ms=parse_instant("2026-10-10T00:00:00Z"),
        started_ms=None,
        finished_ms=None,
        worker="shard-2",
        error=None,
    )
    assert orjson.loads(value) == {
        "v": 1,
        "run_id": "a@2026-10-10T00:00:00.000Z",
        "schedule_id": "a",
        "attempt": 1,
        "status": "missed",
        "scheduled_at": "2026-10-10T00:00:00.000Z",
        "started_at": None,
        "finished_at": None,
        "worker": "shard-2",
    }


def test_result_builder_refuses_an_unknown_status() -> None:
    with pytest.raises(ValueError, match="'done' is not one of succeeded"):
        result_value(
            run_id="a@2026-10-10T00:00:00.000Z",
            schedule_id="a",
            task=None,
            attempt=1,
            status="done",
            scheduled_ms=0,
            started_ms=0,
            finished_ms=0,
            worker="w",
            error=None,
        )


@given(
    schedule_id=ids,
    task=tasks,
    scheduled_ms=instants,
    job=jobs,
    last_error=errors,
    attempts=st.lists(st.dictionaries(texts, json_values, max_size=3), max_size=5),
    dead_at_ms=instants,
)
def test_dlq_round_trip(
    schedule_id: str,
    task: str | None,
    scheduled_ms: int,
    job: Job,
    last_error: dict[str, str] | None,
    attempts: list[dict[str, Any]],
    dead_at_ms: int,
) -> None:
    run_id = run_id_for(schedule_id, scheduled_ms, task)
    value = dlq_value(
        run_id=run_id,
        schedule_id=schedule_id,
        task=task,
        job=job,
        last_error=last_error,
        attempts=list(attempts),
        dead_at_ms=dead_at_ms,
    )
    assert parse_dlq(value) == DeadLetter(
        run_id=run_id,
        schedule_id=schedule_id,
        task=task,
        job=job,
        last_error=last_error,
        attempts=tuple(attempts),
        dead_at_ms=dead_at_ms,
    )


@given(
    reason=texts,
    original=st.none() | st.binary(max_size=300),
    topic=texts,
    partition=st.integers(min_value=0, max_value=10_000),
    offset=st.integers(min_value=0, max_value=2**62),
)
def test_rejected_round_trip(
    reason: str, original: bytes | None, topic: str, partition: int, offset: int
) -> None:
    value = rejected_value(
        reason=reason, original=original, topic=topic, partition=partition, offset=offset
    )
    assert parse_rejected(value) == Rejected(reason, original, topic, partition, offset)


@given(schedule_id=ids, scheduled_ms=instants, task=tasks)
def test_run_id_round_trip(schedule_id: str, scheduled_ms: int, task: str | None) -> None:
    run_id = run_id_for(schedule_id, scheduled_ms, task)
    assert parse_run_id(run_id) == (schedule_id, scheduled_ms, task)


def test_run_id_format() -> None:
    scheduled_ms = parse_instant("2026-10-10T00:00:00Z")
    assert run_id_for("invoice-nightly", scheduled_ms) == "invoice-nightly@2026-10-10T00:00:00.000Z"
    assert run_id_for("dag", scheduled_ms + 5, "t") == "dag@2026-10-10T00:00:00.005Z/t"


@pytest.mark.parametrize(
    "text",
    ["no-at-sign", "@2026-10-10T00:00:00.000Z", "a@yesterday", "a@2026-10-10T00:00:00.000Z/"],
)
def test_parse_run_id_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_run_id(text)


def test_idempotency_key_is_stable_and_distinct() -> None:
    run_id = "invoice-nightly@2026-10-10T00:00:00.000Z"
    key = idempotency_key(run_id, "charge", "c-42")
    assert key == idempotency_key(run_id, "charge", "c-42")
    assert len(key) == 64 and int(key, 16) >= 0
    # the documented derivation, recomputed: changing it would re-run every side effect
    framed = b"".join(len(p).to_bytes(4, "big") + p for p in (run_id.encode(), b"charge", b"c-42"))
    assert key == hashlib.sha256(framed).hexdigest()
    distinct = {
        idempotency_key(run_id),
        idempotency_key(run_id, "charge"),
        idempotency_key(run_id, "char", "ge"),
        idempotency_key(run_id, "ch", "arge"),
        idempotency_key(run_id + "/t", "charge"),
        idempotency_key("invoice-nightly@2026-10-11T00:00:00.000Z", "charge"),
    }
    assert len(distinct) == 6


GOOD_RUN = orjson.loads(
    run_value(
        run_id="a@2026-10-10T00:00:00.000Z",
        schedule_id="a",
        task=None,
        scheduled_ms=0,
        fired_ms=0,
        attempt=1,
        job=Job("j", {}),
        idempotency_key="k",
        deadline_ms=0,
    )
)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"v": 2}, "run.v"),
        ({"v": True}, "run.v"),
        ({"run_id": 5}, "run.run_id"),
        ({"attempt": "1"}, "run.attempt"),
        ({"attempt": True}, "run.attempt"),
        ({"scheduled_at": "yesterday"}, "run.scheduled_at"),
        ({"deadline": None}, "run.deadline"),
        ({"job": "j"}, "run.job"),
        ({"job": {"args": {}}}, "run.job.name"),
        ({"job": {"name": "j", "args": []}}, "run.job.args"),
        ({"data_interval": {"start": "2026-10-10T00:00:00Z"}}, "run.data_interval.end"),
        ({"task": 3}, "run.task"),
    ],
)
def test_parse_run_names_the_bad_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field.replace('.', '[.]')}"):
        parse_run(orjson.dumps({**GOOD_RUN, **change}))


@pytest.mark.parametrize("value", [b"", b"not json", b"[]", b'"run"', b"\xff"])
def test_parsers_refuse_what_is_not_a_record(value: bytes) -> None:
    for parse in (parse_run, parse_result, parse_dlq, parse_rejected):
        with pytest.raises(ValueError):
            parse(value)


def test_parse_result_refuses_unknown_status_and_bad_error() -> None:
    good = orjson.loads(
        result_value(
            run_id="a@2026-10-10T00:00:00.000Z",
            schedule_id="a",
            task=None,
            attempt=1,
            status="failed",
            scheduled_ms=0,
            started_ms=0,
            finished_ms=1,
            worker="w",
            error={"type": "Boom", "message": "it broke"},
        )
    )
    assert parse_result(orjson.dumps(good)).error == {"type": "Boom", "message": "it broke"}
    with pytest.raises(ValueError, match=r"result.status"):
        parse_result(orjson.dumps({**good, "status": "done"}))
    with pytest.raises(ValueError, match=r"result.error.message"):
        parse_result(orjson.dumps({**good, "error": {"type": "Boom"}}))


def test_parse_dlq_and_rejected_refuse_bad_fields() -> None:
    dead = orjson.loads(
        dlq_value(
            run_id="a@2026-10-10T00:00:00.000Z",
            schedule_id="a",
            task=None,
            job=Job("j", {}),
            last_error=None,
            attempts=[{"attempt": 1, "status": "timed_out"}],
            dead_at_ms=0,
        )
    )
    with pytest.raises(ValueError, match=r"dlq.attempts"):
        parse_dlq(orjson.dumps({**dead, "attempts": [1]}))
    rejected = orjson.loads(
        rejected_value(reason="r", original=b"x", topic="t", partition=0, offset=1)
    )
    with pytest.raises(ValueError, match=r"rejected.original"):
        parse_rejected(orjson.dumps({**rejected, "original": "***"}))
    with pytest.raises(ValueError, match=r"rejected.offset"):
        parse_rejected(orjson.dumps({**rejected, "offset": 1.5}))


def test_a_rejection_of_a_huge_command_carries_a_bounded_prefix_and_names_the_rest() -> None:
    """A whole base64 copy of a ~1 MiB command outgrows the rejected topic; a refused
    rejection would fail its shard's transaction on every rebuild, forever."""
    import hashlib

    import orjson

    from topics.messages import REJECTED_ORIGINAL_MAX_BYTES, parse_rejected, rejected_value

    original = b"x" * (1024 * 1024)
    value = rejected_value(reason="too large", original=original, topic="t", partition=0, offset=9)
    assert len(value) < 100 * 1024
    parsed = parse_rejected(value)
    assert parsed.original == original[:REJECTED_ORIGINAL_MAX_BYTES]
    fields = orjson.loads(value)
    assert fields["original_bytes"] == len(original)
    assert fields["original_sha256"] == hashlib.sha256(original).hexdigest()
    small = rejected_value(reason="r", original=b"{}", topic="t", partition=0, offset=1)
    assert "original_bytes" not in orjson.loads(small)
