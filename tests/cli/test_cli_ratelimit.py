"""Rate limits on the command line, in `kafkron next`, the client's update and the
views (docs/DESIGN.md §8.5); the pause commands' flags."""

from __future__ import annotations

import json

import pytest

from actors.shard.state import ScheduleState
from actors.views.ratelimits import pause_text, rate_waiting_note
from actors.views.schedules import shown_job
from kafkron.schedules import Schedule
from kafkron.updates import updated
from tests.kit.cli import cli
from tests.kit.shard import MINUTE, T0, Shard, upsert
from topics.ratelimits import PauseState, RateLimit
from topics.targets import TargetTopic, TargetTopics
from topics.timefmt import format_ms

FROM = ("--from", "2026-12-01T00:00:00Z")
ADD = ("schedule", "add", "pay", "--every", "1h", "--job", "billing.charge", "--print")


def test_next_says_a_jobs_rate_limit(capsys: pytest.CaptureFixture[str]) -> None:
    command = {
        "spec": {"every": "1h"},
        "job": {"name": "j", "rate_limit": {"key": "payments", "per_s": 10, "burst": 5}},
    }
    code, out, _ = cli(capsys, "next", json.dumps(command), "-n", "1", *FROM)
    assert code == 0
    assert out.strip() == (
        "2026-12-01T01:00:00.000Z  → rate limit 'payments': at most 10 starts/s, bursts of 5"
        " (starts may come later than these instants)"
    )
    command["job"] = {"name": "j", "rate_limit": {"key": "payments", "per_s": -1}}
    code, _, err = cli(capsys, "next", json.dumps(command), *FROM)
    assert code == 2 and "job.rate_limit.per_s" in err


def test_schedule_add_rate_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, *ADD, "--rate-key", "payments", "--rate-per-s", "2.5")
    assert code == 0
    assert json.loads(out)["job"]["rate_limit"] == {"key": "payments", "per_s": 2.5, "burst": 1}
    code, _, err = cli(
        capsys, *ADD, "--rate-key", "payments", "--rate-per-s", "1", "--rate-burst", "0"
    )
    assert code != 0 and "--rate-burst: job.rate_limit.burst" in err
    code, _, err = cli(capsys, *ADD, "--rate-key", "payments")
    assert code != 0 and "--rate-per-s" in err
    code, _, err = cli(capsys, *ADD, "--rate-per-s", "2")
    assert code != 0 and "need --rate-key" in err
    code, _, err = cli(
        capsys, *ADD, "--rate-key", "a", "--rate-per-s", "1", "--concurrency-key", "b"
    )
    assert code != 0 and "--rate-key: job.rate_limit.key" in err


def test_ratelimit_pause_and_resume_print_their_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = cli(
        capsys, "ratelimit", "pause", "payments", "--until", "30m", "--note", "quota", "--print"
    )
    assert code == 0
    body = json.loads(out)
    assert (body["type"], body["id"], body["note"]) == ("ratelimit.pause", "payments", "quota")
    assert body["until"].endswith("Z")
    code, _, err = cli(
        capsys, "ratelimit", "pause", "payments", "--until", "2020-01-01T00:00:00Z", "--print"
    )
    assert code == 2 and err.count("--until: until") == 1
    code, out, _ = cli(capsys, "ratelimit", "resume", "payments", "--print")
    assert code == 0 and json.loads(out) == {"v": 1, "type": "ratelimit.resume", "id": "payments"}
    code, _, err = cli(capsys, "ratelimit", "resume", "a/b", "--print")
    assert code == 2 and "KEY: id" in err


def test_a_pause_of_a_keys_template_is_refused_saying_to_pause_the_rendered_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = cli(capsys, "ratelimit", "pause", "invoice-{args.customer}", "--print")
    assert code == 2 and "KEY: id" in err and "pause the rendered key" in err
    code, out, _ = cli(capsys, "ratelimit", "pause", "invoice-c-42", "--print")
    assert code == 0 and json.loads(out)["id"] == "invoice-c-42"


def test_an_update_of_a_templated_key_sends_no_changelog_field() -> None:
    rate = {"key": "inv-{args.c}", "per_s": 10, "burst": 5}
    job = {"name": "j", "args": {"c": "7"}, "rate_limit": rate}
    definition = {"spec": {"every": "1m"}, "job": job, "key_templates": True}
    current = Schedule("s", "schedule", definition, False, (), None, "", (), ())
    assert current.run_key == "inv-7"
    sent = json.loads(updated(current, timeout_s=60).value)
    assert "key_templates" not in sent and sent["job"]["rate_limit"] == rate
    older = Schedule(
        "s", "schedule", {**definition, "key_templates": None}, False, (), None, "", (), ()
    )
    assert older.run_key == "inv-{args.c}"  # written before keys had placeholders: literal


def test_an_update_keeps_the_rate_limit_unless_one_is_given() -> None:
    rate = {"key": "payments", "per_s": 10, "burst": 5}
    definition = {"spec": {"every": "1m"}, "job": {"name": "j", "args": {}, "rate_limit": rate}}
    current = Schedule("s", "schedule", definition, False, (), None, "", (), ())
    assert current.rate_limit == RateLimit("payments", 10, 5)
    assert json.loads(updated(current, timeout_s=60).value)["job"]["rate_limit"] == rate
    moved = json.loads(updated(current, rate_limit=RateLimit("sms", 0.5, 2)).value)
    assert moved["job"]["rate_limit"] == {"key": "sms", "per_s": 0.5, "burst": 2}


def test_ls_and_the_console_show_the_rate_and_a_paused_keys_waiting_run() -> None:
    rate = {"key": "payments", "per_s": 10, "burst": 5}
    assert shown_job({"job": {"name": "j", "args": {}, "rate_limit": rate}}) == (
        "j [rate payments 10/s burst 5]"
    )
    shard = Shard()
    shard.core.set_target_topics(
        TargetTopics(known={"kafkron.runs": TargetTopic(12, 1_000_000)}, own_prefix="kafkron.")
    )
    shard.send(upsert("pay", job={"name": "j", "args": {}, "rate_limit": rate}), at_ms=T0 + 5)
    shard.advance(T0 + MINUTE)
    state = shard.core.schedule("pay")
    assert isinstance(state, ScheduleState)
    pause = PauseState(T0 + 2 * MINUTE, "quota", T0, "ops")
    note = rate_waiting_note(state, {"payments": pause}, T0 + MINUTE + 1)
    assert note is not None and note.startswith("waiting (attempt 1 since ")
    until = format_ms(T0 + 2 * MINUTE)
    assert note.endswith(f"rate-limit key payments paused until {until} (quota, by ops)")
    assert rate_waiting_note(state, {"payments": pause}, T0 + 3 * MINUTE) is None  # it ended
    assert rate_waiting_note(state, {"sms": pause}, T0 + MINUTE + 1) is None
    assert "(ended)" in pause_text("payments", pause, T0 + 3 * MINUTE)
