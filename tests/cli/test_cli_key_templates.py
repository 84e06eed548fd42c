"""Keys from placeholders on every surface (docs/DESIGN.md §8.2): the CLI's flags,
`kafkron next`, `kafkron ls` and the console's job cell, the client's `Schedule`, and a
paused rendered key's waiting run."""

from __future__ import annotations

import json

import pytest

from actors.shard.state import ScheduleState
from actors.views.ratelimits import rate_waiting_note
from actors.views.schedules import schedule_json, shown_job
from actors.web.data import row_of
from kafkron.schedules import Schedule, schedule_of
from tests.kit.cli import cli
from tests.kit.shard import MINUTE, T0, Shard, upsert
from topics.key_templates import RENDERED_MARK
from topics.ratelimits import PauseState
from topics.targets import TargetTopic, TargetTopics

FROM = ("--from", "2026-12-01T00:00:00Z")
ADD = ("schedule", "add", "inv", "--every", "1h", "--job", "billing.invoice", "--print")
TEMPLATE = "invoice-{args.customer}"
KEY = {"key": TEMPLATE, "limit": 1, "strategy": "queue"}
JOB = {"name": "billing.invoice", "args": {"customer": "c-42"}, "concurrency": KEY}


def test_next_shows_the_template_and_the_key_its_runs_carry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = {"id": "inv", "spec": {"every": "1h"}, "job": JOB}
    code, out, _ = cli(capsys, "next", json.dumps(command), "-n", "1", *FROM)
    assert code == 0
    assert out.strip() == (
        "2026-12-01T01:00:00.000Z  → concurrency key 'invoice-{args.customer}' →"
        " 'invoice-c-42': at most 1 at once (queue)"
    )
    command["job"] = {**JOB, "args": {}}
    code, _, err = cli(capsys, "next", json.dumps(command), *FROM)
    assert code == 2 and "job.args.customer: missing" in err


def test_schedule_add_takes_a_template_and_names_args_for_a_missing_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = cli(
        capsys, *ADD, "--concurrency-key", TEMPLATE, "--args", '{"customer": "c-42"}'
    )
    assert code == 0 and json.loads(out)["job"]["concurrency"]["key"] == TEMPLATE
    code, _, err = cli(capsys, *ADD, "--concurrency-key", TEMPLATE)
    assert code != 0 and "--args: job.args.customer: missing" in err
    code, _, err = cli(capsys, *ADD, "--rate-key", "pay-{attempt}", "--rate-per-s", "1")
    assert code != 0 and "--rate-key: job.rate_limit.key: {attempt} differs per run" in err


def _state() -> tuple[Shard, ScheduleState]:
    shard = Shard()
    shard.core.set_target_topics(
        TargetTopics(known={"kafkron.runs": TargetTopic(12, 1_000_000)}, own_prefix="kafkron.")
    )
    rate = {"key": "pay-{schedule_id}", "per_s": 10, "burst": 5}
    shard.send(upsert("acme", job={"name": "j", "args": {}, "rate_limit": rate}), at_ms=T0 + 5)
    shard.advance(T0 + MINUTE)
    state = shard.core.schedule("acme")
    assert isinstance(state, ScheduleState)
    return shard, state


def test_ls_the_console_and_the_client_show_the_rendered_key_beside_the_template() -> None:
    assert shown_job({"job": JOB, RENDERED_MARK: True}, "inv") == (
        "billing.invoice [key invoice-{args.customer} → invoice-c-42 ≤ 1, queue]"
    )
    # A doc without the mark was written before keys had placeholders: literal.
    assert (
        shown_job({"job": JOB}, "inv") == "billing.invoice [key invoice-{args.customer} ≤ 1, queue]"
    )
    literal = {**JOB, "concurrency": {**KEY, "key": "c-42"}}
    assert shown_job({"job": literal}, "inv") == "billing.invoice [key c-42 ≤ 1, queue]"
    _, state = _state()
    assert schedule_json(state)["run_key"] == "pay-acme"  # `kafkron ls --json`
    assert row_of(state).job == "j [rate pay-{schedule_id} → pay-acme 10/s burst 5]"
    schedule = schedule_of(state)
    assert schedule.rate_limit is not None and schedule.rate_limit.key == "pay-{schedule_id}"
    assert schedule.run_key == "pay-acme"
    plain = Schedule("s", "schedule", {"job": literal}, False, (), None, "", (), ())
    assert plain.run_key == "c-42"


def test_a_paused_rendered_key_shows_its_schedules_run_waiting() -> None:
    _, state = _state()
    pause = PauseState(T0 + 2 * MINUTE, "quota", T0, "ops")
    note = rate_waiting_note(state, {"pay-acme": pause}, T0 + MINUTE + 1)
    assert note is not None and "rate-limit key pay-acme paused until" in note
    assert rate_waiting_note(state, {"pay-{schedule_id}": pause}, T0 + MINUTE + 1) is None
