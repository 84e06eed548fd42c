"""`kafkron topics check` on the three-node cluster: a topic made by hand with one replica.

The scheduler and the worker start on such a topic with a warning (it weakens the
guarantees: one lost disk loses what only it holds), but `topics check`, the command
a deployment pipeline runs, must exit 1 and name it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from aiokafka.admin import NewTopic

from tests.kit.cluster import SHARDS, Cluster
from tests.kit.scheduler import REPO
from topics.admin import admin_client, create_topics, delete_topics
from topics.names import TopicKind

pytestmark = [pytest.mark.broker, pytest.mark.cluster]


async def test_topics_check_fails_on_a_hand_made_topic_with_one_replica(
    cluster: Cluster,
) -> None:
    settings = await cluster.healthy_namespace()
    results = settings.topic(TopicKind.RESULTS)
    try:
        async with admin_client(settings) as admin:
            # Right in every other way: the contract's partition count and cleanup policy, and
            # the min.insync.replicas one replica can meet (the cluster's default is 2).
            configs = {"cleanup.policy": "delete", "min.insync.replicas": "1"}
            await admin.create_topics([NewTopic(results, SHARDS, 1, topic_configs=configs)])
        await create_topics(settings, partitions=SHARDS)  # the other five, as kafkron makes them
        env = {
            **os.environ,
            "KAFKRON_BOOTSTRAP": settings.bootstrap,
            "KAFKRON_NAMESPACE": settings.namespace,
        }
        done = subprocess.run(
            [sys.executable, "-m", "actors.cli", "topics", "check"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        await delete_topics(settings)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    named = [line for line in out.splitlines() if line.startswith(f"{results}:")]
    assert len(named) == 1, out
    assert "replication factor 1 on a cluster of 3 brokers (expected 3)" in named[0], out
    # Only the hand-made topic falls short: the five kafkron made are right.
    assert len([line for line in out.splitlines() if line.strip()]) == 1, out
