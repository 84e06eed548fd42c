"""The worker queues' topics on the cluster: created, checked, listed (`topics.queues`).

Queue Q's topic ``{ns}.runs.Q`` has the runs topic's configs (`topics.admin.TOPIC_SPECS`)
and the durability `topics.admin.create_topics` gives every topic; `kafkron topics
create --queue Q` makes it, `kafkron topics check` checks every one that exists like
the runs topic (and each one named must exist). Built on `topics.admin`.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka.admin import NewTopic

from topics import guarantees
from topics.admin import (
    DEFAULT_PARTITIONS,
    TOPIC_SPECS,
    TopicsError,
    admin_client,
    audit_topics,
    broker_count,
    check_topics,
    wait_for_leaders,
)
from topics.names import Settings, TopicKind
from topics.queues import DEFAULT_QUEUE, placement_of_topic, queue_topic

_TOPIC_ALREADY_EXISTS = 36


async def create_queue_topics(
    settings: Settings,
    queues: Sequence[str],
    partitions: int = DEFAULT_PARTITIONS,
    replication_factor: int | None = None,
) -> list[str]:
    """Create the topics of ``queues`` that do not exist yet, with ``partitions`` each
    (the runs topic's count is the natural choice); the names created now. A high
    lane's placement (``Q.hi``, `topics.priority`) names its lane topic."""
    names = [queue_topic(settings.namespace, q) for q in dict.fromkeys(queues)]
    names = [n for n, q in zip(names, dict.fromkeys(queues), strict=True) if q != DEFAULT_QUEUE]
    if not names:
        return []
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    spec = TOPIC_SPECS[TopicKind.RUNS]
    created: list[str] = []
    async with admin_client(settings) as admin:
        brokers = await broker_count(admin)
        rf = replication_factor or guarantees.replication_factor_for(brokers)
        if rf > brokers:
            raise TopicsError(
                f"replication factor {rf} needs {rf} brokers; the cluster has {brokers}"
            )
        configs = {
            "cleanup.policy": spec.cleanup_policy,
            **guarantees.topic_configs_for(rf),
            **spec.configs,
        }
        response = await admin.create_topics(
            [NewTopic(name, partitions, rf, topic_configs=configs) for name in names]
        )
        for name, error_code, error_message in response.topic_errors:
            if error_code == 0:
                created.append(name)
            elif error_code != _TOPIC_ALREADY_EXISTS:
                raise TopicsError(
                    f"could not create topic {name}: {error_message} (Kafka error {error_code})"
                )
        await wait_for_leaders(admin, names)
    return sorted(created)


async def queues_of(settings: Settings, named: Sequence[str] = ()) -> list[str]:
    """The (non-default) queues and high lanes named, and those whose topic exists,
    sorted."""
    async with admin_client(settings) as admin:
        listed = await admin.list_topics()
    found = {placement_of_topic(settings.namespace, t) for t in listed}
    return sorted({q for q in (*found, *named) if q is not None and q != DEFAULT_QUEUE})


async def check_with_queues(
    settings: Settings, partitions: int | None = None, queues: Sequence[str] = ()
) -> list[str]:
    """`topics.admin.check_topics`, then every queue and high lane topic that exists
    (and each of ``queues``, which must) checked as the runs topic is."""
    problems = await check_topics(settings, partitions)
    for queue in await queues_of(settings, queues):
        audit = await audit_topics(settings.for_placement(queue), partitions, (TopicKind.RUNS,))
        problems += [p for p in audit.all if p not in problems]
    return problems
