"""The topics contract on the real broker: creation is idempotent and `check` names every
mismatch (the rules alone, on described state: tests/topics/test_topics_check.py)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable

import pytest
from aiokafka.admin import NewPartitions
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from topics.admin import (
    TopicsError,
    admin_client,
    audit_topics,
    check_topics,
    create_topics,
    shard_count,
)
from topics.names import Settings, TopicKind

MakeKafkaSettings = Callable[..., Awaitable[Settings]]


async def _describe_counts(settings: Settings) -> dict[str, int]:
    async with admin_client(settings) as admin:
        described = await admin.describe_topics([settings.topic(k) for k in TopicKind])
    return {t["topic"]: len(t["partitions"]) for t in described}


async def _eventual_problems(settings: Settings, want: int, timeout_s: float = 30.0) -> list[str]:
    """`check_topics` once it reports `want` problems: admin changes reach metadata later."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        problems = await check_topics(settings)
        if len(problems) >= want or asyncio.get_running_loop().time() > deadline:
            return problems
        await asyncio.sleep(0.1)


async def test_created_topics_match_the_contract_and_creation_is_idempotent(
    kafka_settings: Settings,
) -> None:
    assert await check_topics(kafka_settings) == []
    assert await check_topics(kafka_settings, partitions=3) == []
    assert (await audit_topics(kafka_settings)).advice == []  # segments capped at 16 MiB
    assert await create_topics(kafka_settings, partitions=3) == []
    assert await shard_count(kafka_settings) == 3


async def test_runs_partitions_are_independent_of_the_shard_count(
    make_kafka_settings: MakeKafkaSettings,
) -> None:
    settings = await make_kafka_settings(partitions=2, runs_partitions=5)
    counts = await _describe_counts(settings)
    assert counts[settings.topic(TopicKind.RUNS)] == 5
    for kind in (TopicKind.COMMANDS, TopicKind.SCHEDULES, TopicKind.RESULTS):
        assert counts[settings.topic(kind)] == 2
    assert await check_topics(settings) == []


async def test_check_catches_a_wrong_partition_count(kafka_settings: Settings) -> None:
    results = kafka_settings.topic(TopicKind.RESULTS)
    async with admin_client(kafka_settings) as admin:
        response = await admin.create_partitions({results: NewPartitions(total_count=4)})
    assert all(error_code == 0 for _, error_code, _ in response.topic_errors), response
    problems = await _eventual_problems(kafka_settings, want=1)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{results}: 4 partitions, expected 3")
    with pytest.raises(TopicsError, match="do not match the contract"):
        await shard_count(kafka_settings)


async def test_check_catches_a_wrong_cleanup_policy_and_a_missing_topic(
    kafka_settings: Settings,
) -> None:
    schedules = kafka_settings.topic(TopicKind.SCHEDULES)
    dlq = kafka_settings.topic(TopicKind.DLQ)
    async with admin_client(kafka_settings) as admin:
        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, schedules, {"cleanup.policy": "delete"})]
        )
        await admin.delete_topics([dlq])
    problems = await _eventual_problems(kafka_settings, want=2)
    assert sorted(p.split(":")[0] for p in problems) == sorted([schedules, dlq])
    assert any("cleanup.policy is delete, expected compact" in p for p in problems)
    # AlterConfigs replaces the topic's whole config: its segment.bytes is the broker's
    # default again, which the audit advises about (a slower restore, not a failure).
    [advice] = (await audit_topics(kafka_settings)).advice
    assert advice.startswith(f"{schedules}: segment.bytes is ")
    assert any(p.startswith(f"{dlq}: missing") for p in problems)


async def _cli(settings: Settings, *args: str) -> tuple[int, str]:
    env = {**os.environ, "KAFKRON_NAMESPACE": settings.namespace}
    env["KAFKRON_BOOTSTRAP"] = settings.bootstrap
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "actors.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_cli_check_exits_nonzero_naming_the_mismatch(kafka_settings: Settings) -> None:
    code, out = await _cli(kafka_settings, "topics", "check")
    assert code == 0, out
    assert "match the contract" in out
    commands = kafka_settings.topic(TopicKind.COMMANDS)
    async with admin_client(kafka_settings) as admin:
        await admin.create_partitions({commands: NewPartitions(total_count=5)})
    await _eventual_problems(kafka_settings, want=1)
    code, out = await _cli(kafka_settings, "topics", "check")
    assert code == 1
    assert f"{commands}: 5 partitions, expected 3" in out


async def test_cli_create_is_idempotent(kafka_settings: Settings) -> None:
    code, out = await _cli(kafka_settings, "topics", "create", "--partitions", "3")
    assert code == 0, out
    assert "already exist" in out
