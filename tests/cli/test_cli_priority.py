"""Priorities on the command line, in the builders, the client's update, the views, the
topic and group names of a high lane and the ACL plan (docs/DESIGN.md §8.4)."""

from __future__ import annotations

import json

import pytest

from kafkron.schedules import Schedule
from kafkron.updates import updated
from tests.kit.cli import cli
from topics.acl_plan import Role, plan
from topics.command_builders import InvalidCommand, schedule_upsert
from topics.command_parts import Every, KafkaTarget, Task
from topics.names import Settings, TopicKind
from topics.queues import placed_topics_in, placement_of_topic, queue_of_topic, with_lanes

FROM = ("--from", "2026-12-01T00:00:00Z")
ADD = ("schedule", "add", "inv", "--every", "1h", "--job", "billing.invoice", "--print")


def test_next_says_a_jobs_priority_and_its_lane(capsys: pytest.CaptureFixture[str]) -> None:
    command = {"spec": {"every": "1h"}, "job": {"name": "j", "priority": 7}}
    code, out, _ = cli(capsys, "next", json.dumps(command), "-n", "1", *FROM)
    assert code == 0
    assert out.strip() == (
        "2026-12-01T01:00:00.000Z  → priority 7, high lane (workers started with --lanes)"
    )
    command["job"] = {"name": "j", "priority": 2}
    code, out, _ = cli(capsys, "next", json.dumps(command), "-n", "1", *FROM)
    assert out.strip() == "2026-12-01T01:00:00.000Z  → priority 2"
    command["job"] = {"name": "j", "priority": 12}
    code, _, err = cli(capsys, "next", json.dumps(command), *FROM)
    assert code == 2 and "job.priority" in err


def test_schedule_add_priority_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, *ADD, "--priority", "6")
    assert code == 0 and json.loads(out)["job"]["priority"] == 6
    code, out, _ = cli(capsys, *ADD, "--priority", "0")
    assert "priority" not in json.loads(out)["job"]  # 0: the bytes of before
    code, _, err = cli(capsys, *ADD, "--priority", "10")
    assert code != 0 and "--priority: job.priority: must be between 0 and 9" in err
    code, _, err = cli(capsys, *ADD, "--priority", "3", "--concurrency-key", "k")
    assert code != 0 and "--priority: job.priority: a job with a concurrency key" in err


def test_the_builders_carry_a_priority_and_refuse_one_on_a_target() -> None:
    record = schedule_upsert("s", Every("1m"), "j", priority=5)
    assert json.loads(record.value)["job"]["priority"] == 5
    assert Task(job="j", priority=8).json()["job"]["priority"] == 8
    assert "priority" not in Task(job="j").json()["job"]
    with pytest.raises(InvalidCommand, match=r"^priority: a priority is a job.s"):
        schedule_upsert("s", Every("1m"), target=KafkaTarget("orders.due", {}), priority=5)


def _schedule(job: dict[str, object]) -> Schedule:
    definition = {"spec": {"every": "1m"}, "job": job, "spread_window_s": 0}
    return Schedule("s", "schedule", definition, False, (), None, "", (), ())


def test_an_update_keeps_the_priority_unless_one_is_given() -> None:
    current = _schedule({"name": "j", "args": {}, "priority": 7})
    assert current.priority == 7
    assert json.loads(updated(current, timeout_s=60).value)["job"]["priority"] == 7
    assert json.loads(updated(current, priority=2).value)["job"]["priority"] == 2
    assert "priority" not in json.loads(updated(current, priority=0).value)["job"]
    assert _schedule({"name": "j", "args": {}}).priority == 0


def test_ls_and_the_console_show_the_priority_beside_the_job() -> None:
    from actors.views.schedules import shown_job

    assert shown_job({"job": {"name": "j", "args": {}, "priority": 7}}) == "j !7"
    assert shown_job({"job": {"name": "j", "args": {}, "queue": "gpu", "priority": 2}}) == (
        "j (queue gpu) !2"
    )
    assert shown_job({"job": {"name": "j", "args": {}}}) == "j"


def test_a_high_lanes_topic_group_and_transactional_ids() -> None:
    base = Settings(namespace="ns")
    lane = base.for_lane()
    assert lane.topic(TopicKind.RUNS) == "ns.runs.default.hi"
    assert lane.worker_group == "ns-workers.default.hi"
    assert lane.fenced_ids("worker", 3) == ("ns.worker.default.hi.3",)
    gpu = base.for_queue("gpu").for_lane()
    assert gpu.topic(TopicKind.RUNS) == "ns.runs.gpu.hi"
    assert gpu.worker_group == "ns-workers.gpu.hi"
    assert gpu.fenced_ids("worker", 0) == ("ns.worker.gpu.hi.0",)
    assert base.for_placement("gpu.hi") == gpu
    assert base.for_placement("gpu") == base.for_queue("gpu")
    # A queue named "hi" keeps its own topic: the default queue's lane is not ns.runs.hi.
    assert base.for_queue("hi").topic(TopicKind.RUNS) == "ns.runs.hi"
    assert lane.topic(TopicKind.RESULTS) == "ns.results"


def test_lane_topics_are_told_from_queue_topics() -> None:
    assert placement_of_topic("ns", "ns.runs.default.hi") == "default.hi"
    assert placement_of_topic("ns", "ns.runs.gpu.hi") == "gpu.hi"
    assert placement_of_topic("ns", "ns.runs.gpu") == "gpu"
    assert placement_of_topic("ns", "ns.runs") == "default"
    assert placement_of_topic("ns", "ns.runs.a.b.hi") is None
    assert placement_of_topic("ns", "other.runs.gpu.hi") is None
    assert queue_of_topic("ns", "ns.runs.gpu.hi") is None  # no queue of that name
    topics = ["ns.runs", "ns.runs.gpu", "ns.runs.gpu.hi", "ns.results", "ns.runs.default.hi"]
    assert placed_topics_in("ns", topics) == ["ns.runs.gpu", "ns.runs.gpu.hi", "ns.runs.default.hi"]


def test_lanes_flag_adds_each_queues_lane() -> None:
    assert with_lanes([], False) == []
    assert with_lanes([], True) == ["default", "default.hi"]
    assert with_lanes(["gpu"], True) == ["gpu", "gpu.hi"]


def test_the_acl_plan_grants_a_lane_as_a_queue() -> None:
    names = {
        (a.name, a.operation.value) for a in plan(Role.WORKER, "ns", (), ["default", "default.hi"])
    }
    assert ("ns.runs", "Read") in names and ("ns.runs.default.hi", "Read") in names
    assert ("ns-workers.default.hi", "Read") in names
    writes = {(a.name, a.operation.value) for a in plan(Role.SCHEDULER, "ns", (), ["default.hi"])}
    assert ("ns.runs.default.hi", "Write") in writes
    reads = {a.name for a in plan(Role.RECORDER, "ns", (), ["gpu.hi"])}
    assert "ns.runs.gpu.hi" in reads


def test_worker_refuses_a_bad_reserve(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "worker", "--http-only", "--concurrency", "4", "--reserve", "4")
    assert code == 2 and "--reserve 4: N must be below --concurrency" in err
    code, _, err = cli(capsys, "worker", "--http-only", "--reserve", "1:0")
    assert code == 2 and "P must be between 1 and 9" in err


def test_worker_refuses_a_reserve_for_the_high_lane_without_lanes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Runs of priority 5+ go to the lane topic only: without --lanes the reserved
    # slots would never be used, and the worker would run N fewer jobs for ever.
    code, _, err = cli(capsys, "worker", "--http-only", "--concurrency", "4", "--reserve", "2")
    assert code == 2 and "add --lanes" in err
    code, _, err = cli(capsys, "worker", "--http-only", "--concurrency", "4", "--reserve", "2:7")
    assert code == 2 and "add --lanes" in err


def test_ls_json_gives_a_priority_only_when_the_job_names_one() -> None:
    # As the other optional job fields (concurrency, rate_limit): null when unset, so
    # a reader tells "no priority" from a value (0 is never stored: `Job.wire`).
    from actors.views.schedules import schedule_json
    from tests.kit.shard import T0, Shard, upsert
    from tests.kit.views import state_of

    shard = Shard()
    shard.send(upsert("plain"), at_ms=T0)
    shard.send(upsert("urgent", job={"name": "j", "args": {}, "priority": 3}), at_ms=T0)
    plain = schedule_json(state_of(shard, "plain"))
    assert (plain["priority"], plain["concurrency"], plain["rate_limit"]) == (None, None, None)
    assert schedule_json(state_of(shard, "urgent"))["priority"] == 3


def test_a_priority_with_a_rate_limit_is_refused_with_a_reason_everywhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A rate-limited run is placed by its key on one partition of the queue's topic; a
    # priority would put some runs of the key on the high lane, splitting its bucket
    # between two owners (docs/DESIGN.md §8.4, §8.5).
    from tests.kit.shard import T0, Shard, upsert
    from topics.ratelimits import RateLimit

    rate = {"key": "payments", "per_s": 10, "burst": 5}
    for rank in (2, 7):  # the queue's topic or the high lane: refused alike
        job = {"name": "j", "args": {}, "priority": rank, "rate_limit": rate}
        [rejected] = Shard().send(upsert("pay", job=job), at_ms=T0).rejected
        assert rejected.reason.startswith("job.priority: a rate-limited job's runs")
        assert "leave priority out" in rejected.reason
    with pytest.raises(InvalidCommand, match="rate_limit"):
        schedule_upsert(
            "pay", Every("1h"), "j", priority=3, rate_limit=RateLimit("payments", 10, 5)
        )
    rated = ("--rate-key", "payments", "--rate-per-s", "10")
    code, _, err = cli(capsys, *ADD, "--priority", "3", *rated)
    assert code == 2 and "rate" in err and "priority" in err
    assert (
        not Shard().send(upsert("pay", job={"name": "j", "args": {}, "rate_limit": rate})).rejected
    )
