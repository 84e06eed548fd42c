"""A Kafka target partition that loses its only replica fails its own occurrences.

On the three-node cluster, the target topic ``stuck`` has one partition with one
replica, on a node of its own; the plain target topic ``due`` has three. One shard
fires two every-second targets, ``stuck`` and ``ok``, so each of its transactions
writes to both. The node holding ``stuck`` is killed: its partition has no leader
(no other replica, no unclean election) until the node returns. What must hold:

- ``stuck``'s occurrences end ``failed`` with a dead letter naming the topic and why
  (the first transaction caught writing to it gives up at its acknowledgement
  deadline; later ones keep the partition out, the producer knowing it leaderless);
- ``ok``'s records arrive once each: none partial, none duplicated, none lost.

What Kafka does not allow: the transaction caught holding the partition cannot end
until the partition has a leader again (the broker ends a transaction only once its
markers are written to every partition in it, and an abort is no exception), so
this shard's transactional id, and with it the shard, waits for the node; ``ok``'s
occurrences of the outage are written late, once, when it is back. Transactions
that begin after the refusal keep the partition out (the occurrences of ``stuck``
fail at once), in every shard of the process.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from actors.views.tail import read_to_end
from tests.kit.cluster import Cluster
from tests.kit.scheduler import SchedulerProcesses, now_ms, produce
from tests.kit.targets import create_target_topic
from topics.admin import create_topics
from topics.messages import Result, parse_dlq, parse_result
from topics.names import Settings, TopicKind
from topics.targets import SCHEDULED_AT_HEADER

pytestmark = [pytest.mark.broker, pytest.mark.cluster, pytest.mark.slow]


def _upsert(schedule_id: str, topic: str) -> tuple[bytes, bytes]:
    command = {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": {"every": "1s"},
        "target": {"kafka": {"topic": topic, "key": "{schedule_id}", "value": {"n": 1}}},
    }
    return schedule_id.encode(), orjson.dumps(command)


async def _results(settings: Settings) -> list[Result]:
    topic = settings.topic(TopicKind.RESULTS)
    return [parse_result(r.value) for r in await read_to_end(settings, topic) if r.value]


@pytest.mark.timeout(600)
async def test_a_target_partition_without_a_leader_fails_its_own_occurrences(
    cluster: Cluster, tmp_path: Path
) -> None:
    settings = await cluster.healthy_namespace()
    ns = settings.namespace
    plain, stuck = f"{ns}-out.due", f"{ns}-out.stuck"
    await create_topics(settings, partitions=1)
    view = await cluster.view()
    own = view.leaders()  # the node leading fewest partitions holds the doomed replica
    node = min(view.brokers, key=lambda n: own.get(n, 0))
    # The plain topic's leader is another node: killing the doomed one must not move
    # its leader (a failover slower than the 3 s deadline would blame the plain topic).
    others = sorted(n for n in view.brokers if n != node)
    await create_target_topic(settings, plain, 1, replication_factor=3, replicas=[*others, node])
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(stuck, -1, -1, {0: [node]})])
    finally:
        await admin.close()
    procs = SchedulerProcesses(
        settings,
        tmp_path,
        extra_args=("--target-topic", f"{ns}-out.*", "--target-ack-timeout-s", "3"),
    )
    procs.start(1)
    try:
        await procs.wait_stable(1)
        await produce(settings, [_upsert("ok", plain), _upsert("stuck", stuck)])
        await asyncio.sleep(8)
        killed_ms = now_ms()
        await asyncio.to_thread(cluster.kill_node, node)
        await asyncio.sleep(40)
        back_ms = now_ms()
        await asyncio.to_thread(cluster.start_node, node)
        await asyncio.sleep(15)
    finally:
        codes = procs.stop_all()
        await cluster.wait_healthy()  # the next test finds every replica in sync
    results = await _results(settings)
    records = await read_to_end(settings, plain)
    instants = [dict(r.headers)[SCHEDULED_AT_HEADER].decode() for r in records]
    # What the scheduler did, for the record (the hold-back, the refusals, the rebuilds).
    print("\n".join(line for line in procs.logs().splitlines() if "DLQ: run" not in line))
    failed = [r for r in results if r.schedule_id == "stuck" and r.status == "failed"]
    assert failed, procs.logs()
    assert all(r.error and "TargetUnacknowledged" in r.error["message"] for r in failed)
    dead = [
        parse_dlq(r.value)
        for r in await read_to_end(settings, settings.topic(TopicKind.DLQ))
        if r.value is not None
    ]
    assert dead and {d.job.args["topic"] for d in dead} == {stuck}
    assert {d.run_id for d in dead} == {r.run_id for r in failed}
    # "ok": each occurrence once, none lost, through the whole outage.
    assert len(set(instants)) == len(instants)
    ok = [r for r in results if r.schedule_id == "ok"]
    assert {r.status for r in ok} == {"succeeded"} and len(ok) == len(records)
    first = min(r.run_id for r in ok)
    last = max(r.run_id for r in ok)
    expected = (_ms(last) - _ms(first)) // 1000 + 1
    assert len(ok) == expected, f"ok: {len(ok)} of {expected} occurrences between {first}, {last}"
    assert _ms(last) >= back_ms, "ok stopped firing"
    assert killed_ms < _ms(last)
    assert codes == [0]


def _ms(run_id: str) -> int:
    return int(
        datetime.fromisoformat(run_id.rsplit("@", 1)[1].replace("Z", "+00:00")).timestamp() * 1000
    )
