"""The topics contract: creation is idempotent and `check` names every mismatch."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable

import pytest
from aiokafka.admin import NewPartitions
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from topics.admin import (
    DLQ_RETENTION_MS,
    TOPIC_SPECS,
    TopicsError,
    _majority,
    _problems,
    admin_client,
    check_topics,
    create_topics,
    shard_count,
)
from topics.names import Settings, TopicKind

MakeKafkaSettings = Callable[..., Awaitable[Settings]]

# ---- pure: the rules of `check`, on described state -------------------------------------


def _contract_state(
    settings: Settings, partitions: int = 3
) -> tuple[dict[str, int], dict[str, dict[str, str]]]:
    counts = {settings.topic(kind): partitions for kind in TopicKind}
    configs = {
        settings.topic(kind): {
            "cleanup.policy": spec.cleanup_policy,
            "retention.ms": spec.configs.get("retention.ms", "604800000"),
        }
        for kind, spec in TOPIC_SPECS.items()
    }
    return counts, configs


def test_contract_state_has_no_problems() -> None:
    settings = Settings(namespace="ns")
    counts, configs = _contract_state(settings)
    assert _problems(settings, counts, configs, None) == []
    assert _problems(settings, counts, configs, 3) == []


def test_every_kind_has_a_spec_and_schedules_is_the_only_compacted_topic() -> None:
    assert set(TOPIC_SPECS) == set(TopicKind)
    compacted = [k for k, spec in TOPIC_SPECS.items() if spec.cleanup_policy == "compact"]
    assert compacted == [TopicKind.SCHEDULES]


@pytest.mark.parametrize(
    ("mutate", "expected_fragment"),
    [
        (lambda c, f: c.pop("ns.runs"), "ns.runs: missing"),
        (lambda c, f: c.__setitem__("ns.results", 4), "ns.results: 4 partitions, expected 3"),
        (lambda c, f: c.__setitem__("ns.commands", 1), "ns.commands: 1 partitions, expected 3"),
        (
            lambda c, f: f["ns.schedules"].__setitem__("cleanup.policy", "delete"),
            "ns.schedules: cleanup.policy is delete, expected compact",
        ),
        (
            lambda c, f: f["ns.commands"].__setitem__("cleanup.policy", "compact"),
            "ns.commands: cleanup.policy is compact, expected delete",
        ),
        (
            lambda c, f: f["ns.dlq"].__setitem__("retention.ms", "3600000"),
            "ns.dlq: retention.ms is 3600000, expected at least",
        ),
    ],
)
def test_each_mismatch_is_named(mutate: object, expected_fragment: str) -> None:
    settings = Settings(namespace="ns")
    counts, configs = _contract_state(settings)
    mutate(counts, configs)  # type: ignore[operator]
    problems = _problems(settings, counts, configs, None)
    assert len(problems) == 1, problems
    assert expected_fragment in problems[0]


def test_infinite_or_longer_dlq_retention_is_fine() -> None:
    settings = Settings(namespace="ns")
    for retention in ("-1", str(DLQ_RETENTION_MS * 2)):
        counts, configs = _contract_state(settings)
        configs["ns.dlq"]["retention.ms"] = retention
        assert _problems(settings, counts, configs, None) == []


def test_explicit_expected_count_flags_all_sharded_topics() -> None:
    settings = Settings(namespace="ns")
    counts, configs = _contract_state(settings, partitions=3)
    problems = _problems(settings, counts, configs, 6)
    assert [p.split(":")[0] for p in problems] == ["ns.commands", "ns.schedules", "ns.results"]


def test_majority_names_the_odd_one_out() -> None:
    assert _majority([3, 3, 4]) == 3
    assert _majority([4, 3, 3]) == 3
    assert _majority([2, 5]) == 2  # a tie picks the smallest, deterministically
    assert _majority([]) is None


def test_partition_counts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        asyncio.run(create_topics(Settings(namespace="ns"), partitions=0))


# ---- against the real broker --------------------------------------------------------------


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
