"""A rolling restart between the two forms of transactional id never leaves two owners.

0.1 committed with ``{ns}-shard-{p}`` and ``{ns}-worker-{p}``; 0.2 commits with
``{ns}.shard.{p}`` and ``{ns}.worker.{p}``. In the upgrade's two middle steps
(`topics.names.TxnIds`: ``legacy`` beside 0.1 processes, ``migrate`` beside
``legacy`` ones) a process of the other form may still hold a partition's producer
with an open transaction when a new owner adopts it: the adoption must fence that
id too, or both would commit. Each case plants such a zombie on every shard and
every runs partition, lets a scheduler and a worker of the given mode adopt them all
(a fired and succeeded run on each partition proves it), and then finds the zombies'
commits fenced and their records never visible. The zombies' transactions time out
only after 15 minutes, so nothing but the fence can abort them within the test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import ProducerFenced

from actors.views.tail import read_to_end
from tests.kit.scheduler import produce, upsert
from tests.kit.worker import (
    ChildProcess,
    WorkerProcess,
    key_for_partition,
    wait_for_results,
)
from topics.names import Settings, TopicKind, TxnIds
from topics.vocabulary import RunStatus

PARTITIONS = 3  # the fixture's shard and runs partition counts
ZOMBIE_VALUE = b"zombie: committed by a fenced owner"
ZOMBIE_TIMEOUT_MS = 900_000  # the broker's transaction.max.timeout.ms


async def _zombie(settings: Settings, transactional_id: str, partition: int) -> AIOKafkaProducer:
    """A producer holding `transactional_id` with an open transaction: one record on
    the rejected topic (which no actor of the test reads) awaiting its commit."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap,
        transactional_id=transactional_id,
        transaction_timeout_ms=ZOMBIE_TIMEOUT_MS,
    )
    await producer.start()
    await producer.begin_transaction()
    await producer.send_and_wait(
        settings.topic(TopicKind.REJECTED), ZOMBIE_VALUE, key=b"z", partition=partition
    )
    return producer


@pytest.mark.parametrize("mode", [TxnIds.LEGACY, TxnIds.MIGRATE])
async def test_an_adoption_fences_the_other_form_of_the_id(
    kafka_settings: Settings, tmp_path: Path, mode: TxnIds
) -> None:
    settings = Settings(kafka_settings.namespace, kafka_settings.bootstrap, mode)
    other_ids = [
        (settings.fenced_ids(role, p)[1], p) for role in ("shard", "worker") for p in range(3)
    ]
    zombies = [await _zombie(settings, tx_id, p) for tx_id, p in other_ids]
    env = {"KAFKRON_TRANSACTIONAL_IDS": mode.value}
    argv = ["scheduler", "--session-timeout-ms", "6000", "--heartbeat-ms", "1000"]
    scheduler = ChildProcess(settings, tmp_path, "scheduler", argv, env=env)
    worker = WorkerProcess(settings, tmp_path, "worker", env=env)
    try:
        ids = [key_for_partition("up", p, PARTITIONS) for p in range(PARTITIONS)]
        await produce(settings, [(i.encode(), upsert(i)) for i in ids])

        def each_succeeded(found: list) -> bool:  # type: ignore[type-arg]
            ok = {r.schedule_id for r in found if r.status == RunStatus.SUCCEEDED}
            return ok >= set(ids)

        # A succeeded run of a schedule of shard p (runs partition p: the same key and
        # partition count) means the scheduler adopted shard p and the worker runs
        # partition p, so both fenced p's ids, the zombies' among them.
        await wait_for_results(settings, each_succeeded, workers=[scheduler, worker])
        fenced = 0
        for producer, (tx_id, _) in zip(zombies, other_ids, strict=True):
            try:
                await asyncio.wait_for(producer.commit_transaction(), 30)
            except ProducerFenced:
                fenced += 1
            else:
                raise AssertionError(f"{tx_id}: the zombie's commit went through")
        assert fenced == len(zombies)
        seen = await read_to_end(settings, settings.topic(TopicKind.REJECTED))
        assert not [r for r in seen if r.value == ZOMBIE_VALUE]
    finally:
        for producer in zombies:
            await producer.stop()
        worker.stop()
        scheduler.stop()
