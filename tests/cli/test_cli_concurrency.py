"""Concurrency keys on the command line, in the builders and the client's update."""

from __future__ import annotations

import json

import pytest

from kafkron.schedules import Schedule
from kafkron.updates import updated
from tests.kit.cli import cli
from topics.command_builders import InvalidCommand, schedule_upsert
from topics.command_parts import Every, KafkaTarget
from topics.concurrency import Concurrency
from topics.vocabulary import ConcurrencyStrategy

FROM = ("--from", "2026-12-01T00:00:00Z")
ADD = ("schedule", "add", "inv", "--every", "1h", "--job", "billing.invoice", "--print")


def test_next_says_a_jobs_concurrency_key(capsys: pytest.CaptureFixture[str]) -> None:
    command = {
        "spec": {"every": "1h"},
        "job": {"name": "j", "concurrency": {"key": "c-42", "limit": 1}},
    }
    code, out, _ = cli(capsys, "next", json.dumps(command), "-n", "1", *FROM)
    assert code == 0
    assert (
        out.strip()
        == "2026-12-01T01:00:00.000Z  → concurrency key 'c-42': at most 1 at once (queue)"
    )
    command["job"] = {"name": "j", "concurrency": {"key": "c-42", "limit": 0}}
    code, _, err = cli(capsys, "next", json.dumps(command), *FROM)
    assert code == 2 and "job.concurrency.limit" in err


def test_schedule_add_concurrency_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, *ADD, "--concurrency-key", "c-42", "--concurrency-limit", "2")
    assert code == 0
    assert json.loads(out)["job"]["concurrency"] == {"key": "c-42", "limit": 2, "strategy": "queue"}
    code, out, _ = cli(capsys, *ADD)
    assert "concurrency" not in json.loads(out)["job"]  # no key: the bytes of before
    code, _, err = cli(capsys, *ADD, "--concurrency-key", "k", "--concurrency-limit", "0")
    assert code != 0 and "--concurrency-limit: job.concurrency.limit" in err
    code, _, err = cli(capsys, *ADD, "--concurrency-limit", "2")
    assert code != 0 and "need --concurrency-key" in err


def test_the_builders_refuse_a_key_on_a_target() -> None:
    with pytest.raises(InvalidCommand, match=r"^concurrency: a concurrency key is a job.s"):
        schedule_upsert(
            "s", Every("1m"), target=KafkaTarget("orders.due", {}), concurrency=Concurrency("k", 1)
        )


def _schedule(job: dict[str, object]) -> Schedule:
    definition = {"spec": {"every": "1m"}, "job": job, "spread_window_s": 0}
    return Schedule("s", "schedule", definition, False, (), None, "", (), ())


def test_an_update_keeps_the_key_unless_one_is_given() -> None:
    key = {"key": "c-42", "limit": 1, "strategy": "queue"}
    current = _schedule({"name": "j", "args": {}, "concurrency": key})
    assert current.concurrency == Concurrency("c-42", 1, ConcurrencyStrategy.QUEUE)
    kept = json.loads(updated(current, timeout_s=60).value)
    assert kept["job"]["concurrency"] == key
    given = Concurrency("c-7", 3, ConcurrencyStrategy.CANCEL_IN_PROGRESS)
    moved = json.loads(updated(current, concurrency=given).value)
    assert moved["job"]["concurrency"] == {
        "key": "c-7",
        "limit": 3,
        "strategy": "cancel_in_progress",
    }


def test_ls_and_the_console_show_the_key_beside_the_job() -> None:
    from actors.views.schedules import shown_job

    job = {"name": "j", "args": {}, "queue": "gpu"}
    key = {"key": "c-42", "limit": 2, "strategy": "cancel_newest"}
    assert shown_job({"job": {**job, "concurrency": key}}) == (
        "j (queue gpu) [key c-42 ≤ 2, cancel_newest]"
    )
    assert shown_job({"job": job}) == "j (queue gpu)"
