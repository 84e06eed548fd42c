"""Topic names and connection settings, from the environment.

`KAFKRON_NAMESPACE` (default ``kafkron``) prefixes every topic; `KAFKRON_BOOTSTRAP`
(default ``127.0.0.1:9092``) names the brokers. Tests give each case its own
namespace so they never see each other's records.

Transactional ids are ``{ns}.shard.{p}`` and ``{ns}.worker.{p}`` (``{ns}.worker.Q.{p}``
for worker queue Q, `topics.queues`): the ``.`` after the
namespace is a character no namespace may contain, so the prefix ACL
``{ns}.worker.`` names one tenant's ids and nobody else's (topics/acl_plan.py says
why the ``-`` of 0.1 did not). `KAFKRON_TRANSACTIONAL_IDS` (`TxnIds`) carries a
fleet from 0.1's ``{ns}-shard-{p}`` to these in rolling restarts that never have two
live owners of a partition (README, "Upgrading the transactional ids").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from topics.priority import is_lane, lane_placement, queue_of_lane
from topics.queues import DEFAULT_QUEUE, queue_topic

DEFAULT_NAMESPACE = "kafkron"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class TxnIds(StrEnum):
    """Which form of transactional id a process commits with, and which it also fences.

    ===========  ======================  =================================================
    mode         commits with            fences on adoption
    ===========  ======================  =================================================
    ``tenant``   ``{ns}.shard.{p}``      that id (the default, and the end of an upgrade)
    ``legacy``   ``{ns}-shard-{p}``      both forms (step 1: beside 0.1 processes)
    ``migrate``  ``{ns}.shard.{p}``      both forms (step 2: beside ``legacy`` ones)
    ===========  ======================  =================================================

    In the two upgrade modes a fence of the other form that the broker refuses fails
    the adoption (`topics.fencing`): ACLs are per principal, so one principal's
    refusal says nothing of what another may still commit with.
    """

    TENANT = "tenant"
    LEGACY = "legacy"
    MIGRATE = "migrate"


class TopicKind(StrEnum):
    """The nine topics of the public contract (docs/DESIGN.md §2.1)."""

    COMMANDS = "commands"
    SCHEDULES = "schedules"
    RUNS = "runs"
    RESULTS = "results"
    DLQ = "dlq"
    REJECTED = "rejected"
    CALENDARS = "calendars"
    ALERTS = "alerts"
    RATELIMITS = "ratelimits"


# Every scheduler reads {ns}.calendars whole, in one order (docs/DESIGN.md §5.7); every
# worker reads {ns}.ratelimits whole (§8.5).
CALENDARS_PARTITIONS = 1
SINGLE_PARTITION_KINDS = (TopicKind.CALENDARS, TopicKind.RATELIMITS)


def partition_count(kind: TopicKind, shards: int, runs: int) -> int:
    """How many partitions `kafkron topics create` gives a topic of ``kind``."""
    if kind in SINGLE_PARTITION_KINDS:
        return CALENDARS_PARTITIONS
    return runs if kind is TopicKind.RUNS else shards


def calendars_count_problems(
    name: str, counts: Mapping[str, int], readers: str = "every scheduler reads the calendars"
) -> list[str]:
    """What `kafkron topics check` says of a calendars (or rate limits) topic of several
    partitions."""
    count = counts.get(name, CALENDARS_PARTITIONS)
    if count == CALENDARS_PARTITIONS:
        return []
    return [
        f"{name}: {count} partitions, expected {CALENDARS_PARTITIONS} ({readers}"
        " in one order); recreate it"
    ]


# Topics that must share the shard count: a schedule id hashes to the same partition
# p in each, so shard p sees its commands and its results and owns its changelog.
SHARDED_KINDS: tuple[TopicKind, ...] = (TopicKind.COMMANDS, TopicKind.SCHEDULES, TopicKind.RESULTS)


@dataclass(frozen=True, slots=True)
class Settings:
    namespace: str = DEFAULT_NAMESPACE
    bootstrap: str = DEFAULT_BOOTSTRAP
    txn_ids: TxnIds = TxnIds.TENANT
    queue: str = DEFAULT_QUEUE
    """The worker queue a worker's settings serve (`for_queue`); every other process
    keeps the default. It names the runs topic, the worker group and the worker
    transactional ids (`topics.queues`); the other topics are the namespace's."""

    lane: bool = False
    """A worker's settings for its queue's high lane (`for_lane`, `topics.priority`):
    the lane's topic ``{ns}.runs.Q.hi``, group ``{ns}-workers.Q.hi`` and transactional
    ids ``{ns}.worker.Q.hi.{p}`` (three parts after ``worker.``: never a queue's two nor
    the default queue's one)."""

    def topic(self, kind: TopicKind) -> str:
        if kind is TopicKind.RUNS and self.lane:
            return queue_topic(self.namespace, lane_placement(self.queue))
        if kind is TopicKind.RUNS and self.queue != DEFAULT_QUEUE:
            return queue_topic(self.namespace, self.queue)
        return f"{self.namespace}.{kind.value}"

    def for_lane(self) -> Settings:
        """These settings as a worker of its queue's high lane uses them."""
        return replace(self, lane=True)

    def for_placement(self, placement: str) -> Settings:
        """The worker settings of a queue or of a high lane (``Q.hi``)."""
        if is_lane(placement):
            return replace(self, queue=queue_of_lane(placement), lane=True)
        return replace(self, queue=placement, lane=False)

    def for_queue(self, queue: str) -> Settings:
        """These settings as a worker of ``queue`` uses them."""
        return replace(self, queue=queue)

    @property
    def scheduler_group(self) -> str:
        return f"{self.namespace}-schedulers"

    @property
    def worker_group(self) -> str:
        """``{ns}-workers``; ``{ns}-workers.Q`` for queue Q: one group per queue, so a
        rebalance of one queue's workers never stops another queue's."""
        if self.lane:
            return f"{self.namespace}-workers.{lane_placement(self.queue)}"
        if self.queue != DEFAULT_QUEUE:
            return f"{self.namespace}-workers.{self.queue}"
        return f"{self.namespace}-workers"

    @property
    def recorder_group(self) -> str:
        return f"{self.namespace}-recorder"

    def shard_transactional_id(self, partition: int) -> str:
        """The id shard `partition`'s transactions commit with."""
        return self.fenced_ids("shard", partition)[0]

    def worker_transactional_id(self, partition: int) -> str:
        """The id the worker transactions of runs partition `partition` commit with."""
        return self.fenced_ids("worker", partition)[0]

    def fenced_ids(self, role: str, partition: int) -> tuple[str, ...]:
        """(the id to commit with, *the other ids a new owner fences first).

        `role` is ``"shard"`` or ``"worker"``. In the upgrade modes the other form is
        fenced too, so whichever form the previous owner (or a paused zombie of it)
        holds, the new owner's adoption bumps its epoch before anything is read.
        """
        if role == "worker" and self.lane:  # newer than 0.1's ids too: one form
            return (f"{self.namespace}.worker.{lane_placement(self.queue)}.{partition}",)
        if role == "worker" and self.queue != DEFAULT_QUEUE:
            # A queue is newer than 0.1's ids: it has the tenant form only. No '.' in a
            # queue name, so ``{ns}.worker.Q.{p}`` is never another queue's nor ``{ns}.worker.{p}``.
            return (f"{self.namespace}.worker.{self.queue}.{partition}",)
        tenant = f"{self.namespace}.{role}.{partition}"
        legacy = f"{self.namespace}-{role}-{partition}"
        if self.txn_ids is TxnIds.LEGACY:
            return legacy, tenant
        if self.txn_ids is TxnIds.MIGRATE:
            return tenant, legacy
        return (tenant,)

    @classmethod
    def from_env(cls, namespace: str | None = None, bootstrap: str | None = None) -> Settings:
        return cls(
            namespace=namespace or os.environ.get("KAFKRON_NAMESPACE") or DEFAULT_NAMESPACE,
            bootstrap=bootstrap or os.environ.get("KAFKRON_BOOTSTRAP") or DEFAULT_BOOTSTRAP,
            txn_ids=txn_ids_from_env(),
        )


def txn_ids_from_env() -> TxnIds:
    """`KAFKRON_TRANSACTIONAL_IDS`: ``tenant`` (the default), ``legacy`` or ``migrate``."""
    word = os.environ.get("KAFKRON_TRANSACTIONAL_IDS") or TxnIds.TENANT.value
    try:
        return TxnIds(word)
    except ValueError:
        raise ValueError(
            f"KAFKRON_TRANSACTIONAL_IDS={word!r}: expected 'tenant' (the default), 'legacy'"
            " or 'migrate' (the steps of an upgrade from 0.1)"
        ) from None
