"""Create and check the eight topics of the contract (docs/DESIGN.md §2).

The shard count is fixed when the topics are created, like Temporal's history
shards: ``commands``, ``schedules`` and ``results`` share it so that a schedule
id hashes to the same partition ``p`` of each, and shard ``p`` owns its commands,
its changelog and its results. Kafka can add partitions to a topic later, but that
would move keys between shards, so a mismatch is an error to fix by hand, never
something to repair silently: the scheduler refuses to start on it (`shard_count`).

Guarantees:

- `create_topics` is idempotent: existing topics are left as they are (and
  reported by `check_topics` if they differ from the contract).
- `create_topics` returns once every topic has a leader for every partition, so a
  producer started right after it does not race the metadata.
- `check_topics` never raises for a mismatch; it returns one line per problem,
  the contract's (existence, cleanup policies, shard count, dead-letter retention)
  and the cluster guarantees' of `topics.guarantees` (replication factor, ISR
  minimum, unclean election, LogAppendTime on runs, ``max.message.bytes``).
- `guard_topics` is what the scheduler and worker run before they start: it raises
  on a difference that breaks a guarantee and returns those that only weaken one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaConnectionError, KafkaError
from aiokafka.protocol.metadata import MetadataRequest

from topics import guarantees
from topics.clients import admin_kwargs
from topics.closing import bounded
from topics.names import (
    SHARDED_KINDS,
    Settings,
    TopicKind,
    calendars_count_problems,
    partition_count,
)
from topics.queues import placed_topics_in
from topics.segments import SCHEDULES_SEGMENT_BYTES, slow_restore

DEFAULT_PARTITIONS = 6
DAY_MS = 24 * 3600 * 1000
# Dead letters wait for a person; give them a quarter of a year.
DLQ_RETENTION_MS = 90 * DAY_MS
# Tombstones stay readable this long, so a shard restoring its changelog sees deletes.
SCHEDULES_DELETE_RETENTION_MS = DAY_MS

_TOPIC_ALREADY_EXISTS = 36
_UNKNOWN_TOPIC = 3


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """The contract of one topic: its cleanup policy and any other configs we set."""

    kind: TopicKind
    cleanup_policy: str
    configs: Mapping[str, str] = field(default_factory=dict)
    # A config checked as "at least": users may keep dead letters longer, never shorter.
    min_retention_ms: int | None = None


TOPIC_SPECS: dict[TopicKind, TopicSpec] = {
    TopicKind.COMMANDS: TopicSpec(TopicKind.COMMANDS, "delete"),
    TopicKind.SCHEDULES: TopicSpec(
        TopicKind.SCHEDULES,
        "compact",
        {
            # Roll and clean often: a new owner restores by reading the whole partition,
            # and only closed segments are ever compacted (`topics.segments`).
            "segment.ms": str(3600 * 1000),
            "segment.bytes": str(SCHEDULES_SEGMENT_BYTES),
            "min.cleanable.dirty.ratio": "0.1",
            "delete.retention.ms": str(SCHEDULES_DELETE_RETENTION_MS),
        },
    ),
    # The broker stamps runs on append, so a shard can compare its clock with the broker's.
    TopicKind.RUNS: TopicSpec(
        TopicKind.RUNS, "delete", {"message.timestamp.type": "LogAppendTime"}
    ),
    TopicKind.RESULTS: TopicSpec(TopicKind.RESULTS, "delete"),
    TopicKind.DLQ: TopicSpec(
        TopicKind.DLQ,
        "delete",
        {"retention.ms": str(DLQ_RETENTION_MS)},
        min_retention_ms=DLQ_RETENTION_MS,
    ),
    TopicKind.REJECTED: TopicSpec(TopicKind.REJECTED, "delete"),
    # Named calendars (§5.7): compacted, one partition (read whole, in one order).
    TopicKind.CALENDARS: TopicSpec(
        TopicKind.CALENDARS, "compact", {"delete.retention.ms": str(SCHEDULES_DELETE_RETENTION_MS)}
    ),
    TopicKind.ALERTS: TopicSpec(TopicKind.ALERTS, "delete"),  # deadline alerts (§2.9)
    # Rate-limit pauses (§8.5): compacted, one partition (every worker reads it whole).
    TopicKind.RATELIMITS: TopicSpec(
        TopicKind.RATELIMITS,
        "compact",
        {"delete.retention.ms": str(SCHEDULES_DELETE_RETENTION_MS)},
    ),
}


class TopicsError(Exception):
    """The broker is unreachable or the topics break the contract; the text says what to do."""


@contextlib.asynccontextmanager
async def admin_client(settings: Settings) -> AsyncIterator[AIOKafkaAdminClient]:
    """A started admin client, closed on exit; `TopicsError` if no broker answers."""
    client = AIOKafkaAdminClient(**admin_kwargs(settings, "kafkron-admin"))
    aiokafka_log = logging.getLogger("aiokafka")
    level = aiokafka_log.level
    # A refused connection becomes our one-line TopicsError; aiokafka's own error
    # line about it would only repeat it less helpfully.
    aiokafka_log.setLevel(logging.CRITICAL)
    try:
        await client.start()
    except (KafkaConnectionError, KafkaError, OSError) as exc:
        await bounded(client.close(), "closing the admin client")
        raise TopicsError(
            f"no Kafka broker answers on {settings.bootstrap}: start one with"
            " `kafkron broker start`, or set KAFKRON_BOOTSTRAP to your cluster"
        ) from exc
    finally:
        aiokafka_log.setLevel(level)
    try:
        yield client
    finally:
        await bounded(client.close(), "closing the admin client")


def _validate_counts(partitions: int, runs_partitions: int | None) -> int:
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    runs = partitions if runs_partitions is None else runs_partitions
    if runs < 1:
        raise ValueError(f"runs_partitions must be at least 1, got {runs}")
    return runs


async def create_topics(
    settings: Settings,
    partitions: int = DEFAULT_PARTITIONS,
    runs_partitions: int | None = None,
    replication_factor: int | None = None,
) -> list[str]:
    """Create the topics of `settings.namespace` that do not exist yet (the worker
    queues' topics: `topics.queue_topics.create_queue_topics`).

    `partitions` is the shard count (commands, schedules, results, and by default
    every other topic); `runs_partitions` lets the work topic have its own count,
    since workers scale independently of shards. `replication_factor` defaults to
    min(3, brokers in the cluster); every topic also gets ``min.insync.replicas``
    (2 from three replicas up), ``unclean.leader.election.enable=false`` and
    ``max.message.bytes`` explicitly. Returns the names created now.
    """
    runs_count = _validate_counts(partitions, runs_partitions)
    if replication_factor is not None and replication_factor < 1:
        raise ValueError(f"replication factor must be at least 1, got {replication_factor}")
    created: list[str] = []
    async with admin_client(settings) as admin:
        brokers = await broker_count(admin)
        rf = replication_factor or guarantees.replication_factor_for(brokers)
        if rf > brokers:
            raise TopicsError(
                f"replication factor {rf} needs {rf} brokers; the cluster at"
                f" {settings.bootstrap} has {brokers}"
            )
        durability = guarantees.topic_configs_for(rf)
        new_topics = [
            NewTopic(
                settings.topic(kind),
                partition_count(kind, partitions, runs_count),
                rf,
                topic_configs={"cleanup.policy": spec.cleanup_policy, **durability, **spec.configs},
            )
            for kind, spec in TOPIC_SPECS.items()
        ]
        response = await admin.create_topics(new_topics)
        for name, error_code, error_message in response.topic_errors:
            if error_code == 0:
                created.append(name)
            elif error_code != _TOPIC_ALREADY_EXISTS:
                raise TopicsError(
                    f"could not create topic {name}: {error_message} (Kafka error {error_code})"
                )
        await wait_for_leaders(admin, [t.name for t in new_topics])
    return sorted(created)


async def broker_count(admin: AIOKafkaAdminClient) -> int:
    """Brokers the cluster lists in its metadata (registered and not fenced)."""
    described = await admin.describe_cluster()
    return max(1, len(described["brokers"]))


async def wait_for_leaders(
    admin: AIOKafkaAdminClient, names: list[str], timeout_s: float = 30.0
) -> None:
    """Return once every broker knows every partition of `names` with a leader.

    Creation is asynchronous, and on a cluster each broker learns of new topics from
    the controller in its own time: a broker that lags (just resumed, loaded) still
    answers metadata requests, with no such topic. Asked through one broker only, a
    `topics check` or a scheduler started right after creation could hear "missing"
    from another; so every broker of the cluster is asked.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if await _every_broker_knows(admin, names):
            return
        if time.monotonic() > deadline:
            raise TopicsError(
                f"topics {names} have no leader on every broker after {timeout_s:.0f} s"
            )
        await asyncio.sleep(0.1)


async def _every_broker_knows(admin: AIOKafkaAdminClient, names: list[str]) -> bool:
    brokers = [b["node_id"] for b in (await admin.describe_cluster())["brokers"]]
    for node_id in brokers:
        try:
            described = await describe_topics(admin, names, node_id)
        except KafkaError:
            return False  # a broker not answering yet: ask again
        if not all(_has_leaders(topic) for topic in described):
            return False
    return bool(brokers)


def metadata_request(names: list[str]) -> MetadataRequest:
    """A metadata request for `names` that never creates one.

    aiokafka's ``describe_topics`` asks with ``allow_auto_topic_creation`` true: on a
    cluster with ``auto.create.topics.enable`` (Kafka's default), looking at a missing
    topic would create it, with the broker's default partitions and policies.
    """
    return MetadataRequest(names, allow_auto_topic_creation=False)


async def describe_topics(
    admin: AIOKafkaAdminClient, names: list[str], node_id: int | None = None
) -> list[Any]:
    """``admin.describe_topics(names)`` without creating a missing one; asked of
    ``node_id`` if given (aiokafka's admin asks a broker at random)."""
    # Through the admin's client, which aiokafka keeps private: the only way to both
    # set the flag and choose the broker.
    client = admin._client
    node = client.get_random_node() if node_id is None else node_id
    answer = await client.send(node, metadata_request(names))
    topics: list[Any] = answer.to_object()["topics"]
    return topics


def _has_leaders(topic: Mapping[str, Any]) -> bool:
    partitions = topic["partitions"]
    return (
        topic["error_code"] == 0
        and bool(partitions)
        and all(p["error_code"] == 0 and p["leader"] >= 0 for p in partitions)
    )


async def delete_topics(settings: Settings) -> None:
    """Delete the namespace's topics, queues' too (tests and demos clean up with this)."""
    names = [settings.topic(kind) for kind in TopicKind]
    async with admin_client(settings) as admin:
        names += placed_topics_in(settings.namespace, await admin.list_topics())
        await admin.delete_topics(names)


@dataclass(frozen=True, slots=True)
class Described:
    """What the cluster says of the namespace's topics that exist."""

    counts: dict[str, int]  # partitions per topic
    replicas: dict[str, int]  # smallest replication factor among a topic's partitions
    configs: dict[str, dict[str, str]]
    brokers: int


async def _describe_all(admin: AIOKafkaAdminClient, names: list[str]) -> Described:
    counts: dict[str, int] = {}
    replicas: dict[str, int] = {}
    for topic in await describe_topics(admin, names):
        if topic["error_code"] == 0 and topic["partitions"]:
            counts[topic["topic"]] = len(topic["partitions"])
            replicas[topic["topic"]] = min(len(p["replicas"]) for p in topic["partitions"])
    _, configs = await _describe(admin, list(counts))
    return Described(counts, replicas, configs, await broker_count(admin))


async def _describe(
    admin: AIOKafkaAdminClient, names: list[str]
) -> tuple[dict[str, int], dict[str, dict[str, str]]]:
    """Partition counts and configs of the topics among `names` that exist."""
    counts: dict[str, int] = {}
    for topic in await describe_topics(admin, names):
        if topic["error_code"] == 0:
            counts[topic["topic"]] = len(topic["partitions"])
    configs: dict[str, dict[str, str]] = {}
    if counts:
        resources = [
            ConfigResource(ConfigResourceType.TOPIC, name, {key: None for key in _CHECKED_KEYS})
            for name in counts
        ]
        for response in await admin.describe_configs(resources):
            for error_code, _message, _type, name, entries in response.resources:
                if error_code == 0:
                    configs[name] = {entry[0]: entry[1] for entry in entries}
    return counts, configs


_CHECKED_KEYS = ("cleanup.policy", "retention.ms", "segment.bytes", *guarantees.GUARANTEE_KEYS)


def _problems(
    settings: Settings,
    counts: Mapping[str, int],
    configs: Mapping[str, Mapping[str, str]],
    partitions: int | None,
) -> list[str]:
    problems: list[str] = []
    for kind, spec in TOPIC_SPECS.items():
        name = settings.topic(kind)
        if name not in counts:
            problems.append(f"{name}: missing (run `kafkron topics create`)")
            continue
        if name not in configs:
            continue  # configs not readable (no DescribeConfigs ACL): `audit_topics` says so
        topic_configs = configs[name]
        policy = topic_configs.get("cleanup.policy")
        if policy != spec.cleanup_policy:
            problems.append(
                f"{name}: cleanup.policy is {policy}, expected {spec.cleanup_policy}"
                f" (kafka-configs --alter --add-config cleanup.policy={spec.cleanup_policy})"
            )
        if spec.min_retention_ms is not None:
            retention_ms = int(topic_configs.get("retention.ms", "-1"))
            if 0 <= retention_ms < spec.min_retention_ms:
                problems.append(
                    f"{name}: retention.ms is {retention_ms}, expected at least"
                    f" {spec.min_retention_ms} ({spec.min_retention_ms // DAY_MS} days)"
                )
    problems += calendars_count_problems(settings.topic(TopicKind.CALENDARS), counts)
    problems += calendars_count_problems(
        settings.topic(TopicKind.RATELIMITS), counts, "every worker reads the rate-limit pauses"
    )
    sharded = {
        settings.topic(k): counts[settings.topic(k)]
        for k in SHARDED_KINDS
        if settings.topic(k) in counts
    }
    expected = partitions if partitions is not None else _majority(list(sharded.values()))
    for name, count in sharded.items():
        if expected is not None and count != expected:
            listing = ", ".join(f"{n}={c}" for n, c in sharded.items())
            problems.append(
                f"{name}: {count} partitions, expected {expected} (commands, schedules and"
                f" results must share the shard count; found {listing}). Partitions cannot be"
                " removed: recreate the namespace's topics, or use a new KAFKRON_NAMESPACE"
            )
    return problems


def _majority(values: list[int]) -> int | None:
    """The most common count (ties: the smallest), the reference for naming outliers."""
    if not values:
        return None
    return min(set(values), key=lambda v: (-values.count(v), v))


@dataclass(frozen=True, slots=True)
class Audit:
    """The namespace's topics against the contract and the cluster guarantees."""

    broken: list[str]  # a guarantee does not hold: actors refuse to start
    weakened: list[str]  # a guarantee holds with less margin: actors warn
    advice: list[str] = field(default_factory=list)  # guarantees hold; slower: a note

    @property
    def all(self) -> list[str]:
        return [*self.broken, *self.weakened]


async def audit_topics(
    settings: Settings,
    partitions: int | None = None,
    kinds: tuple[TopicKind, ...] = tuple(TopicKind),
) -> Audit:
    """Every difference, sorted into what breaks a guarantee and what only weakens one.

    `kinds` narrows the audit to the topics a process uses (a worker's principal may
    describe only its own topics).
    """
    names = [settings.topic(kind) for kind in TopicKind]
    async with admin_client(settings) as admin:
        found = await _describe_all(admin, names)
    mine = tuple(f"{settings.topic(kind)}:" for kind in kinds)
    problems = _problems(settings, found.counts, found.configs, partitions)
    broken = [p for p in problems if p.startswith(mine)]
    weakened = [
        f"{name}: its configs are not readable (no DescribeConfigs ACL), so"
        " min.insync.replicas, cleanup policy and the like were not checked"
        for name in sorted(found.counts)
        if name not in found.configs and name.startswith(tuple(m[:-1] for m in mine))
    ]
    advice = []
    if f"{settings.topic(TopicKind.SCHEDULES)}:".startswith(mine):
        advice = slow_restore(settings, found.configs)
    for finding in guarantees.findings(settings, found.replicas, found.configs, found.brokers):
        if f"{finding.topic}:".startswith(mine):
            (broken if finding.breaks else weakened).append(str(finding))
    return Audit(broken, weakened, advice)


async def check_topics(settings: Settings, partitions: int | None = None) -> list[str]:
    """Every way the namespace's topics differ from the contract; empty means fine.

    Checks existence, cleanup policy, the dead-letter retention, that the sharded
    topics share one partition count (`partitions`, if given, or else their most
    common count, so the odd one out is the one named), and the cluster guarantees
    of `topics.guarantees` (what breaks them first, then what only weakens them).
    The queue topics: `topics.queue_topics.check_with_queues`.
    """
    return (await audit_topics(settings, partitions)).all


async def guard_topics(
    settings: Settings, kinds: tuple[TopicKind, ...] = tuple(TopicKind)
) -> list[str]:
    """Raise `TopicsError` naming every difference that breaks a guarantee on the topics
    of `kinds`; return the differences that only weaken one, and the advice (the caller
    logs them as warnings and starts)."""
    audit = await audit_topics(settings, kinds=kinds)
    if audit.broken:
        raise TopicsError(
            f"the topics of namespace {settings.namespace!r} break kafkron's guarantees: "
            + "; ".join(audit.broken)
        )
    return [*audit.weakened, *audit.advice]


async def shard_count(settings: Settings) -> int:
    """The shard count of the namespace; `TopicsError` unless the topics match the contract.

    The scheduler calls this before it joins its group and refuses to start on an
    error: shards on mismatched topics would silently lose commands or results.
    """
    names = [settings.topic(kind) for kind in TopicKind]
    async with admin_client(settings) as admin:
        counts, configs = await _describe(admin, names)
    problems = _problems(settings, counts, configs, None)
    if problems:
        raise TopicsError(
            f"the topics of namespace {settings.namespace!r} do not match the contract; "
            + "; ".join(problems)
        )
    return counts[settings.topic(TopicKind.COMMANDS)]
