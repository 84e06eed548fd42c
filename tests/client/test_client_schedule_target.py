"""`kafkron.Schedule` of a target schedule: its target, and no job name of its own.

A target travels as a carrier job (`topics.targets`); a program listing schedules
should see where one goes (``Schedule.target``), as `kafkron ls` shows it, not the
carrier's reserved name.
"""

from __future__ import annotations

from actors.shard.state import decode_schedule
from kafkron.schedules import Schedule, schedule_of
from tests.kit.shard import Shard, command
from topics.targets import TargetTopic, TargetTopics


def _schedule(schedule_id: str, **fields: object) -> Schedule:
    shard = Shard()
    shard.core.set_target_topics(
        TargetTopics(allowed=("orders.*",), known={"orders.due": TargetTopic(3)})
    )
    shard.send(command("schedule.upsert", schedule_id, spec={"every": "1h"}, **fields))
    value = shard.changelog[schedule_id.encode()]
    assert value is not None
    return schedule_of(decode_schedule(value))


def test_a_kafka_target_schedule_has_its_target_and_no_job() -> None:
    schedule = _schedule("due", target={"kafka": {"topic": "orders.due", "value": {"a": 1}}})
    assert schedule.job is None
    assert schedule.target == {
        "kafka": {"topic": "orders.due", "key": None, "value": {"a": 1}, "headers": {}}
    }


def test_an_http_target_schedule_and_a_job_schedule() -> None:
    hook = _schedule("hook", target={"http": {"url": "https://e.example/h"}})
    assert hook.target is not None and hook.target["http"]["method"] == "POST"
    job = _schedule("fx", job={"name": "billing.fx", "args": {}})
    assert job.job == "billing.fx" and job.target is None
