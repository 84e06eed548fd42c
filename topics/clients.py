"""The keyword arguments of every Kafka client kafkron makes, stated in one place.

Every aiokafka producer, consumer and admin client of the product is built from
one of the functions below, with the `Settings` of its process (connection
settings such as TLS and SASL belong here too, next to ``bootstrap_servers``).
A call site adds only its own tuning (batch sizes, linger, fetch waits, group
timeouts); it cannot override what a replicated cluster needs, since passing one
of those keys again is a `TypeError`.

Why each value holds on a replicated cluster (RF 3, ``min.insync.replicas=2``,
brokers that crash, restart and lose leadership):

- ``acks="all"`` and ``enable_idempotence=True`` on every producer: a write is
  acknowledged once every in-sync replica has it (two at least, with the topics
  `topics.admin` makes), so the loss of its leader does not lose it; a retry after
  a lost acknowledgement is deduplicated by the broker (producer id + sequence),
  so a command or result sent twice is stored once. Transactional producers have
  both anyway; stating them keeps the non-transactional ones (the CLI's commands)
  as safe.
- ``request_timeout_ms`` 20 s (producers, admin): a crashed broker is fenced by the
  controller after ``broker.session.timeout.ms`` (9 s by default) and its partitions
  get new leaders at once, so a request outlives one leader change with margin.
  In aiokafka it is also the delivery timeout: a batch whose partition has no
  leader waits in the accumulator that long, then fails. It stays below the
  transaction timeout, so a send abandoned by its timeout fails its transaction
  before the coordinator aborts that transaction under it.
- ``transaction_timeout_ms`` 30 s: the coordinator aborts an open transaction of a
  producer that went silent after this long, which is how long a crashed owner
  that nobody replaces can hold back read_committed readers (workers and the
  history recorder wait at its first open record). A new owner does not wait for
  it: its ``init_transactions`` fences and aborts at once.
- ``metadata_max_age_ms`` 30 s: aiokafka refreshes metadata at once on
  NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION and connection errors (every
  error Kafka marks "invalid metadata"); the periodic refresh catches the rest, such
  as a preferred leader moving back after a restarted broker rejoins, within 30 s
  instead of 5 minutes.
- ``retry_backoff_ms`` 100 ms (aiokafka's default, stated): the pause between
  retries of a failed request and between metadata refreshes while a partition has
  no leader, short next to an election and long enough not to flood a recovering
  controller. The worker lowers it for its own reason (see its call site).
- Consumers read ``read_committed`` and never auto-commit: aborted runs (a shard
  whose transaction failed) are never seen, and offsets move only inside the
  transactions that write results and changelogs. Their ``request_timeout_ms``
  stays aiokafka's 40 s, above the group rebalance timeouts a JoinGroup may be
  held for.

While a partition has no leader, a process waits: its produce batches sit in the
accumulator (up to the request timeout, refreshing metadata every retry backoff)
and go to the new leader as soon as one is elected; a request to a broker that hangs
(SIGSTOP, a long GC pause) is abandoned after the request timeout and retried on
fresh metadata. A scheduler shard whose transaction has not committed within its
commit timeout (15 s) counts it failed: the transaction aborts, so none of its runs
or changelog states becomes visible, the shard logs it once, drops its state and
rebuilds it from the changelog, then fires what came due meanwhile: late, never
early (the due check reads the clock at fire time) and never twice (the aborted
transaction held both the runs and the states that record them as fired). A worker
that cannot reach its group coordinator for a few heartbeats cancels its runs and
adopts its partitions again from their committed offsets once it is heard.
"""

from __future__ import annotations

from typing import Any

import topics.no_auto_create  # noqa: F401  (aiokafka's metadata requests never create topics)
from topics.names import Settings
from topics.security import security_kwargs

ACKS = "all"
REQUEST_TIMEOUT_MS = 20_000
TRANSACTION_TIMEOUT_MS = 30_000
METADATA_MAX_AGE_MS = 30_000
RETRY_BACKOFF_MS = 100


def _merge(fixed: dict[str, Any], tuning: dict[str, Any]) -> dict[str, Any]:
    clash = sorted(set(fixed) & set(tuning))
    if clash:
        raise TypeError(f"{', '.join(clash)} are set by topics.clients for every client")
    return {**fixed, **tuning}


def _connection(settings: Settings, client_id: str) -> dict[str, Any]:
    """Where and as whom to connect: the one place connection settings go (TLS and SASL
    come from `topics.security`)."""
    return {**security_kwargs(), "bootstrap_servers": settings.bootstrap, "client_id": client_id}


def producer_kwargs(settings: Settings, client_id: str, **tuning: Any) -> dict[str, Any]:
    """A non-transactional producer (commands from the CLI, the demo's feed)."""
    fixed = {
        **_connection(settings, client_id),
        "acks": ACKS,
        "enable_idempotence": True,
        "request_timeout_ms": REQUEST_TIMEOUT_MS,
        "metadata_max_age_ms": METADATA_MAX_AGE_MS,
    }
    tuning.setdefault("retry_backoff_ms", RETRY_BACKOFF_MS)
    return _merge(fixed, tuning)


def transactional_producer_kwargs(
    settings: Settings,
    client_id: str,
    transactional_id: str,
    *,
    transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS,
    **tuning: Any,
) -> dict[str, Any]:
    """A transactional producer: a scheduler shard's or a worker partition's.

    ``transaction_timeout_ms``: how long the broker keeps a dead producer's open
    transaction (and so blocks read_committed readers of its partitions); a worker's
    transactions are short, so it asks for less (`actors.worker.runtime`).
    """
    fixed = {
        **producer_kwargs(settings, client_id),
        "transactional_id": transactional_id,
        "transaction_timeout_ms": transaction_timeout_ms,
    }
    del fixed["retry_backoff_ms"]
    tuning.setdefault("retry_backoff_ms", RETRY_BACKOFF_MS)
    return _merge(fixed, tuning)


def consumer_kwargs(
    settings: Settings, client_id: str, group_id: str | None = None, **tuning: Any
) -> dict[str, Any]:
    """A consumer, in a group (`group_id`) or assigning partitions itself (None)."""
    fixed = {
        **_connection(settings, client_id),
        "group_id": group_id,
        "isolation_level": "read_committed",
        "enable_auto_commit": False,
        "metadata_max_age_ms": METADATA_MAX_AGE_MS,
    }
    tuning.setdefault("auto_offset_reset", "earliest")
    return _merge(fixed, tuning)


def admin_kwargs(settings: Settings, client_id: str) -> dict[str, Any]:
    """An admin client (topic creation and checks, the worker's offset lookups)."""
    return {
        **_connection(settings, client_id),
        "request_timeout_ms": REQUEST_TIMEOUT_MS,
        "metadata_max_age_ms": METADATA_MAX_AGE_MS,
    }
