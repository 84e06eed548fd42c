"""Worker queues on the command line, in the builders and the client's update."""

from __future__ import annotations

import json

import pytest

from kafkron.schedules import Schedule
from kafkron.updates import updated
from tests.kit.cli import cli
from topics.acl_plan import Acl, Operation, PatternType, ResourceType, Role, plan
from topics.command_builders import InvalidCommand, schedule_upsert
from topics.command_parts import Every, KafkaTarget, Task
from topics.names import Settings, TopicKind

FROM = ("--from", "2026-12-01T00:00:00Z")


def test_next_says_which_queue_a_job_goes_to(capsys: pytest.CaptureFixture[str]) -> None:
    command = {"spec": {"every": "1h"}, "job": {"name": "j", "queue": "gpu"}}
    code, out, _ = cli(capsys, "next", json.dumps(command), "-n", "1", *FROM)
    assert code == 0
    assert out.strip() == (
        "2026-12-01T01:00:00.000Z  → queue gpu (workers started with --queue gpu)"
    )
    command["job"] = {"name": "j", "queue": "default"}
    code, out, _ = cli(capsys, "next", json.dumps(command), "-n", "1", *FROM)
    assert out.strip() == "2026-12-01T01:00:00.000Z"
    command["job"] = {"name": "j", "queue": "a.b"}
    code, _, err = cli(capsys, "next", json.dumps(command), *FROM)
    assert code == 2 and "job.queue: 'a.b'" in err


def test_schedule_add_queue_is_the_jobs_and_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("schedule", "add", "r", "--every", "1h", "--job", "media.render", "--print")
    code, out, _ = cli(capsys, *argv, "--queue", "gpu")
    assert code == 0
    assert json.loads(out)["job"] == {"name": "media.render", "args": {}, "queue": "gpu"}
    code, out, _ = cli(capsys, *argv)
    assert "queue" not in json.loads(out)["job"]  # the default queue: the bytes of before
    code, _, err = cli(capsys, *argv, "--queue", "no.dots")
    assert code != 0 and "--queue: job.queue: 'no.dots'" in err


def test_the_builders_put_the_queue_in_the_job_and_refuse_it_on_a_target() -> None:
    record = schedule_upsert("s", Every("1m"), "j", queue="gpu")
    assert json.loads(record.value)["job"]["queue"] == "gpu"
    with pytest.raises(InvalidCommand, match=r"^queue: a queue is a job.s"):
        schedule_upsert("s", Every("1m"), target=KafkaTarget("orders.due", {}), queue="gpu")
    assert Task("etl.load", queue="big").json()["job"]["queue"] == "big"


def _schedule(job: dict[str, object]) -> Schedule:
    definition = {"spec": {"every": "1m"}, "job": job, "spread_window_s": 0}
    return Schedule("s", "schedule", definition, False, (), None, "", (), ())


def test_an_update_keeps_the_queue_unless_it_is_given() -> None:
    current = _schedule({"name": "j", "args": {}, "queue": "gpu"})
    assert current.queue == "gpu" and _schedule({"name": "j", "args": {}}).queue == "default"
    assert json.loads(updated(current, timeout_s=5).value)["job"]["queue"] == "gpu"
    moved = json.loads(updated(current, queue="cpu").value)["job"]
    assert moved == {"name": "j", "args": {}, "queue": "cpu"}


def test_acl_plan_grants_each_queue_by_name() -> None:
    s = Settings(namespace="ns")
    gpu = s.for_queue("gpu")
    assert gpu.topic(TopicKind.RUNS) == "ns.runs.gpu"
    assert gpu.worker_group == "ns-workers.gpu"
    assert gpu.worker_transactional_id(3) == "ns.worker.gpu.3"
    assert s.worker_transactional_id(3) == "ns.worker.3"
    worker = plan(Role.WORKER, "ns", queues=["gpu"])
    read_gpu = Acl(ResourceType.TOPIC, PatternType.LITERAL, "ns.runs.gpu", Operation.READ)
    read_default = Acl(ResourceType.TOPIC, PatternType.LITERAL, "ns.runs", Operation.READ)
    assert read_gpu in worker and read_default not in worker
    group = Acl(ResourceType.GROUP, PatternType.LITERAL, "ns-workers.gpu", Operation.READ)
    assert group in worker
    scheduler = plan(Role.SCHEDULER, "ns", queues=["gpu"])
    write = Acl(ResourceType.TOPIC, PatternType.LITERAL, "ns.runs.gpu", Operation.WRITE)
    assert write in scheduler
    assert read_default in plan(Role.WORKER, "ns")  # no queue named: as before


def test_worker_refuses_a_bad_queue_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "worker", "--http-only", "--queue", "a.b")
    assert code == 2 and "--queue: 'a.b'" in err
