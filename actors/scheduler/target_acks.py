"""When a turn's transaction gives up on a Kafka target's batch: the decision, pure.

A shard's transaction waits for every batch's acknowledgement before it commits
(`actors.scheduler.writer`). A batch to a target partition that has no leader, or
whose produce the broker keeps answering with a retriable error (fewer in-sync
replicas than the topic's ``min.insync.replicas``), is never acknowledged: aiokafka
retries a transactional producer's batches without end. Waited for like kafkron's
own batches, it would hold the whole shard until the commit timeout, then again on
every rebuild, since a timeout says nothing about the target topic.

So a target's batch has its own deadline, below the commit timeout. The executor
(`writer.acknowledged`) reports the state of each batch of the transaction and how
long it has waited; `verdict` answers what to do:

- a batch failed: `Failed` (the transaction is lost; the refusal names why);
- all landed: `Landed` (commit);
- a target batch pending, before its deadline: `Wait` until the deadline (or until
  everything landed);
- a target batch pending past its deadline while every one of kafkron's own batches
  has landed: `GiveUp` on it. kafkron's batches landing proves the broker is
  answering this transaction; only that target partition is not;
- a target batch pending past its deadline while one of kafkron's own is pending
  too: `Wait` for kafkron's. The broker as a whole is away (a restart, a network
  cut), which is the commit timeout's to judge: blaming the target topic would
  dead-letter its occurrences for an outage that the rebuild heals.

The deadline must outlast every ordinary leader failover (a killed broker's
partitions get new leaders once its session ends: 9 s by default in KRaft, more on
a busy machine), or a broker restart dead-letters occurrences that the new leader
would have taken. It is off unless set (``kafkron scheduler --target-ack-timeout-s``):
with 10 s, the three-node chaos test's SIGKILL of the target topic's leader
dead-lettered 42 occurrences of one partition whose failover took longer. And it
frees less than it seems: Kafka ends a transaction, even an abort, only once its
markers are written to every partition in it, so a partition without a leader holds
the shard's transactional id until it has one again; what the deadline buys is the
occurrences of that topic failing visibly, and the topic kept out of every other
shard's transactions of the process.

"Target" here means every topic that is not one of kafkron's own: a worker queue's
topic (``{ns}.runs.Q``, docs/DESIGN.md §8.1) is one too, so a queue partition that
stops acknowledging fails its attempts as ``QueueRefused`` under the same deadline,
and the retry policy decides as for any failed attempt.

A partition the producer's cached metadata says has no leader is kept out of the
transaction (`actors.scheduler.writer.leaderless`), after one metadata refresh: the
cache is not refreshed by anything else while no batch goes to the partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PENDING = 0
LANDED = 1
FAILED = 2


@dataclass(frozen=True, slots=True)
class Wait:
    timeout_s: float | None
    """Wake up after this (None: only when what is waited for completes)."""
    own_only: bool
    """Wait for kafkron's own batches only (a target's is past its deadline)."""


@dataclass(frozen=True, slots=True)
class Landed:
    pass


@dataclass(frozen=True, slots=True)
class Failed:
    index: int


@dataclass(frozen=True, slots=True)
class GiveUp:
    index: int
    """The first target batch still unacknowledged past its deadline."""


Verdict = Wait | Landed | Failed | GiveUp


def verdict(states: Sequence[tuple[bool, int]], waited_s: float, deadline_s: float) -> Verdict:
    """What to do with a transaction's batches: ``states`` holds (is a target's batch,
    PENDING | LANDED | FAILED) per batch, in the order sent; ``waited_s`` is the time
    since they were sent; ``deadline_s`` the targets' acknowledgement deadline."""
    target_pending: int | None = None
    own_pending = False
    for i, (is_target, state) in enumerate(states):
        if state == FAILED:
            return Failed(i)
        if state == PENDING:
            if not is_target:
                own_pending = True
            elif target_pending is None:
                target_pending = i
    if target_pending is None:
        return Wait(None, own_only=True) if own_pending else Landed()
    if waited_s < deadline_s:
        return Wait(deadline_s - waited_s, own_only=False)
    if own_pending:
        return Wait(None, own_only=True)
    return GiveUp(target_pending)


def check_deadline(target_ack_timeout_s: float, commit_timeout_s: float) -> None:
    """ValueError unless the targets' deadline ends before the commit timeout: past it,
    the transaction has failed as a whole and the target would never be named."""
    if not 0 < target_ack_timeout_s < commit_timeout_s:
        raise ValueError(
            f"the target acknowledgement timeout ({target_ack_timeout_s:g} s) must be"
            f" positive and below the commit timeout ({commit_timeout_s:g} s)"
        )
