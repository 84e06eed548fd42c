"""What a simulated node may use of the world it lives in."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Protocol

from simulation.clock import WorldTime
from simulation.group import Group
from simulation.kafka import SimKafka
from simulation.ownership import Ownership
from simulation.timeline import Timeline
from topics.names import Settings, TopicKind


def exact_bytes(value: bytes) -> bytes:
    """A copy of ``value`` that owns no spare capacity.

    orjson 3.13 returns ``dumps`` output in a buffer of at least
    4 KiB however short the JSON is, and keeps it: a record of 300 bytes held in a
    simulated log costs 4 KiB of memory. The simulated broker keeps every record
    of the run, so what it stores is copied to its exact size first (a real
    broker keeps bytes on disk, not a producer's buffers).
    """
    return memoryview(value).tobytes()


# Broken variants (test-only switches): the checkers must catch each of them.
BROKEN_VARIANTS = (
    "no-fencing",  # the simulated broker lets a fenced producer commit
    "changelog-outside-txn",  # the shard writes its changelog outside its transaction
    "dag-early-release",  # the node takes a DAG task as succeeded the moment it fires it
    "commit-refused-batch",  # the shard commits a transaction one of whose batches was refused
    "target-outside-txn",  # the node writes Kafka targets' records outside the fire's transaction
    "no-clock-step-check",  # the scheduler does not notice its wall clock stepping while idle
    "restore-forgets-fired-count",  # a restore drops a schedule's count against max_runs
    "drop-reported-results",  # the node never writes the missed/skipped results the shard reports
    "restore-drops-exclusions",  # a restore drops the exclude of an any spec
    "restore-forgets-backfill",  # a restore drops a backfill's runs in flight, rewinds it
    "restore-drops-calendar-names",  # a restore drops the calendar names of an exclude
    "restore-rearms-calendars-from-now",  # a restore re-arms calendar users from its now
    "restore-forgets-alerts",  # a restore drops which deadline alerts a run's shard wrote
    # The worker's fixes undone in its executor (simulation/worker_node.py):
    "adopt-no-seek",  # the Seek after adoption is ignored (finding 2)
    "adoption-failure-lost",  # a failed adoption is never retried (finding 4)
    "rebalance-not-held",  # a rejoin does not hold the lease (finding 6)
    "worker-commit-refused-batch",  # a worker commits although a result was refused (1)
    "unbounded-commit-retry",  # failed commits' results are written however late (finding 8)
    "run-key-no-lease",  # jobs known by (partition, offset) alone: a re-delivery collides (3)
    "worker-wall-clock",  # the worker decides by its wall clock alone, even when behind
    "worker-txn-timeout-default",  # worker producers keep the client's transaction timeout (10)
    "unbounded-close",  # a stopping process waits for its clients' stop() however long (11)
    # An adopted partition's keyed runs start at once, not after the lease bound (§8.2)
    "key-no-adoption-wait",
    # A new owner's rate-limit buckets start full, not empty (§8.5)
    "rate-adoption-full",
    # A move of the worker's wall clock off its monotonic clock leaves its waits (§8.5)
    "worker-time-moves-ignored",
    # A loading group coordinator's answer taken for "nothing committed" (topics.committed)
    "committed-silence-trusted",
    # An assignment holds the lease from its SyncGroup's send by the heartbeat rule
    # alone, not the session it restarted (LeaseRules.sync_hold_ms 0, docs/DESIGN.md §8)
    "no-sync-hold",
    # The tick leaves partitions being adopted, read or backed off alone when the
    # lease ends: a worker cut from the group coordinator keeps retrying (§8)
    "adoption-outlives-lease",
)


class Host(Protocol):
    time: WorldTime
    kafka: SimKafka
    timeline: Timeline
    rng: random.Random
    settings: Settings
    scheduler_group: Group
    worker_group: Group
    broken: frozenset[str]
    ownership: Ownership

    def at(self, true_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` when true time reaches ``true_ms``."""
        ...

    def arrived(self, parts: Iterable[tuple[TopicKind, int]], true_ms: int) -> None:
        """Records became visible in these partitions: wake their consumers."""
        ...

    def latency_ms(self) -> int:
        """A drawn broker round trip (produce, commit or fetch)."""
        ...

    def join_ms(self) -> int:
        """A drawn duration of a worker's rejoin (JoinGroup + SyncGroup)."""
        ...

    def sync_wait_ms(self) -> int:
        """A drawn wait of a follower's SyncGroup for the leader's (0: answered at once)."""
        ...

    def adopt_delay_ms(self) -> int:
        """A drawn extra delay of a worker's InitProducerId or committed-offset read."""
        ...

    def max_fetch_records(self) -> int | None:
        """Records one fetch of a runs partition returns at most (None: the default)."""
        ...

    def scenario_flag(self, name: str) -> bool:
        """A boolean knob of the scenario's ``[worker_client]``."""
        ...
