"""Topic names and connection settings, from the environment.

`KAFKRON_NAMESPACE` (default ``kafkron``) prefixes every topic; `KAFKRON_BOOTSTRAP`
(default ``127.0.0.1:9092``) names the brokers. Tests give each case its own
namespace so they never see each other's records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum

DEFAULT_NAMESPACE = "kafkron"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class TopicKind(StrEnum):
    """The six topics of the public contract (docs/DESIGN.md §2.1)."""

    COMMANDS = "commands"
    SCHEDULES = "schedules"
    RUNS = "runs"
    RESULTS = "results"
    DLQ = "dlq"
    REJECTED = "rejected"


# Topics that must share the shard count: a schedule id hashes to the same partition
# p in each, so shard p sees its commands and its results and owns its changelog.
SHARDED_KINDS: tuple[TopicKind, ...] = (TopicKind.COMMANDS, TopicKind.SCHEDULES, TopicKind.RESULTS)


@dataclass(frozen=True, slots=True)
class Settings:
    namespace: str = DEFAULT_NAMESPACE
    bootstrap: str = DEFAULT_BOOTSTRAP

    def topic(self, kind: TopicKind) -> str:
        return f"{self.namespace}.{kind.value}"

    @property
    def scheduler_group(self) -> str:
        return f"{self.namespace}-schedulers"

    @property
    def worker_group(self) -> str:
        return f"{self.namespace}-workers"

    @property
    def recorder_group(self) -> str:
        return f"{self.namespace}-recorder"

    def shard_transactional_id(self, partition: int) -> str:
        return f"{self.namespace}-shard-{partition}"

    def worker_transactional_id(self, partition: int) -> str:
        return f"{self.namespace}-worker-{partition}"

    @classmethod
    def from_env(cls, namespace: str | None = None, bootstrap: str | None = None) -> Settings:
        return cls(
            namespace=namespace or os.environ.get("KAFKRON_NAMESPACE") or DEFAULT_NAMESPACE,
            bootstrap=bootstrap or os.environ.get("KAFKRON_BOOTSTRAP") or DEFAULT_BOOTSTRAP,
        )
