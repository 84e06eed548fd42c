"""Keys from a run's placeholders (docs/DESIGN.md §8.2, §8.5): what an upsert may name
in a concurrency or rate-limit key, and what it renders to."""

from __future__ import annotations

from typing import Any

import pytest

import actors.timespec  # noqa: F401  (installs the spec compiler the decoder needs)
from topics.command_fields import FieldError
from topics.command_types import Job
from topics.commands import Rejection, ScheduleUpsert, decode_object
from topics.concurrency import Concurrency
from topics.key_templates import (
    check_key_template,
    names_schedule_id,
    render_key,
    rendered_job,
    rendered_key_of,
)
from topics.ratelimits import RateLimit


def _upsert(job: dict[str, Any], schedule_id: str = "s1") -> ScheduleUpsert | str:
    body = {"v": 1, "type": "schedule.upsert", "id": schedule_id, "spec": {"every": "1m"}}
    found = decode_object({**body, "job": job}, now_ms=0)
    if isinstance(found, Rejection):
        return found.reason
    assert isinstance(found, ScheduleUpsert)
    return found


def _keyed(key: str, args: dict[str, Any], field: str = "concurrency") -> ScheduleUpsert | str:
    limit = {"key": key, "limit": 1} if field == "concurrency" else {"key": key, "per_s": 2}
    return _upsert({"name": "billing.invoice", "args": args, field: limit})


@pytest.mark.parametrize("field", ["concurrency", "rate_limit"])
def test_a_key_may_name_the_schedule_id_and_top_level_args(field: str) -> None:
    found = _keyed("inv-{args.customer}-{schedule_id}", {"customer": "c-42"}, field)
    assert isinstance(found, ScheduleUpsert), found
    kept = found.job.concurrency if field == "concurrency" else found.job.rate_limit
    assert kept is not None and kept.key == "inv-{args.customer}-{schedule_id}"  # the template


@pytest.mark.parametrize("field", ["concurrency", "rate_limit"])
def test_a_per_run_placeholder_is_refused_saying_it_would_limit_nothing(field: str) -> None:
    for name in ("scheduled_at", "attempt", "run_id", "fired_at", "idempotency_key"):
        reason = _keyed(f"k-{{{name}}}", {}, field)
        assert isinstance(reason, str)
        assert reason.startswith(f"job.{field}.key: {{{name}}} differs per run"), reason
        assert "limit nothing" in reason


@pytest.mark.parametrize(
    "key", ["k-{customer}", "k-{", "k-}", "k-{}", "k-{args.}", "k-{args.a.b}", "k-{ARGS.a}"]
)
def test_any_other_brace_is_refused_naming_the_field(key: str) -> None:
    reason = _keyed(key, {"a": "x"})
    assert isinstance(reason, str) and reason.startswith("job.concurrency.key: "), reason
    assert "{schedule_id}, {args.NAME}" in reason


def test_doubled_braces_are_literal() -> None:
    found = _keyed("{{x}}-{args.a}", {"a": "1"})
    assert isinstance(found, ScheduleUpsert), found
    assert render_key("{{x}}-{args.a}", "s1", {"a": "1"}) == "{x}-1"


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ({}, "job.args.customer: missing"),
        ({"customer": 1.5}, "job.args.customer: 1.5"),
        ({"customer": None}, "job.args.customer: "),
        ({"customer": {"id": 1}}, "job.args.customer: "),
        ({"customer": ["c"]}, "job.args.customer: "),
    ],
)
def test_an_arg_that_is_missing_or_not_text_a_number_or_a_boolean_is_refused(
    args: dict[str, Any], why: str
) -> None:
    reason = _keyed("inv-{args.customer}", args)
    assert isinstance(reason, str) and reason.startswith(why), reason


def test_text_whole_numbers_and_booleans_render_as_json_spells_them() -> None:
    args = {"s": "c-42", "n": 7, "t": True, "f": False}
    assert render_key("{args.s}/{args.n}/{args.t}/{args.f}", "s1", args) == "c-42/7/true/false"


def test_a_rendered_key_must_be_a_key_as_a_worker_checks_it() -> None:
    reason = _keyed("inv-{args.c}", {"c": "x" * 300})
    assert isinstance(reason, str) and reason.startswith("job.concurrency.key: renders to")
    reason = _keyed("inv-{args.c}", {"c": "line\nbreak"})
    assert isinstance(reason, str) and reason.startswith("job.concurrency.key: renders to")
    reason = _keyed("pay-{args.c}", {"c": "a/b"}, "rate_limit")  # also a pause command's id
    assert isinstance(reason, str) and reason.startswith("job.rate_limit.key: 'pay-a/b'")


def test_a_dag_tasks_key_is_checked_naming_the_task() -> None:
    job = {"name": "etl.load", "args": {}, "concurrency": {"key": "{args.x}", "limit": 1}}
    body = {"v": 1, "type": "dag.upsert", "id": "d", "spec": {"every": "1m"}}
    found = decode_object({**body, "tasks": {"load": {"job": job}}}, now_ms=0)
    assert isinstance(found, Rejection)
    assert found.reason.startswith("tasks.load.job.args.x: missing"), found.reason


def test_rendered_job_renders_both_keys_and_keeps_a_literal_job_as_is() -> None:
    job = Job(
        "j",
        {"c": "c-42"},
        concurrency=Concurrency("inv-{args.c}", 1),
        rate_limit=RateLimit("inv-{args.c}", 2.0),
    )
    run_job = rendered_job(job, "s1")
    assert run_job.concurrency is not None and run_job.concurrency.key == "inv-c-42"
    assert run_job.rate_limit is not None and run_job.rate_limit.key == "inv-c-42"
    literal = Job("j", {}, concurrency=Concurrency("customer-42", 1))
    assert rendered_job(literal, "s1") is literal
    plain = Job("j", {})
    assert rendered_job(plain, "s1") is plain


def test_the_views_render_a_changelogs_key_and_say_nothing_for_a_literal_one() -> None:
    wire = {"key": "inv-{args.c}-{schedule_id}", "limit": 1}
    assert rendered_key_of(wire, "s1", {"c": 7}, True) == "inv-7-s1"
    assert rendered_key_of({"key": "customer-42", "limit": 1}, "s1", {}, True) is None
    assert names_schedule_id("x-{schedule_id}") and not names_schedule_id("{{schedule_id}}")


def test_check_key_template_returns_the_args_it_reads() -> None:
    assert check_key_template("{args.a}-{schedule_id}-{args.b_2}", "k") == ["a", "b_2"]
    with pytest.raises(FieldError):
        check_key_template("{data_interval_end}", "k")


def test_a_key_with_braces_from_before_placeholders_stays_literal() -> None:
    # Accepted as a literal key before this release (the decoder refuses it now): a
    # definition restored from such a changelog keeps the key its runs always carried.
    for old in ("a{b}", "{args.missing}", "x{"):
        job = Job("j", {}, concurrency=Concurrency(old, 1), rate_limit=RateLimit(old, 1.0))
        run_job = rendered_job(job, "s1")
        assert run_job.concurrency is not None and run_job.concurrency.key == old
        assert run_job.rate_limit is not None and run_job.rate_limit.key == old
