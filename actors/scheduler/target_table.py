"""What a scheduler process knows of its namespace's Kafka target topics.

The shard core decides from a `topics.targets.TargetTopics` snapshot (an input,
like time); this is the runtime side that keeps it current:

- ``allowed``: the ``--target-topic`` patterns (``KAFKRON_TARGET_TOPICS``), a literal
  name or a ``PREFIX*``. Every scheduler of a namespace must be given the same ones,
  as it is given the same namespace. A process that allows less than another only
  ever fails occurrences visibly (a ``failed`` result and a dead letter saying the
  topic is not allowed), never drops one silently.
- ``known``: partitions and ``max.message.bytes`` of each allowed topic that exists,
  read with the admin client at start, every `REFRESH_S`, and at once after a
  refusal. A topic the broker will not describe to this principal counts as absent.
- queue topics (``{ns}.runs.Q``, docs/DESIGN.md §8.1) are read into ``known`` and
  marked ``refused`` the same way, whatever ``allowed`` says: a missing or refused
  queue topic fails its attempts visibly instead of failing the shard's turns.
  ``{ns}.runs`` is read into ``known`` too: a concurrency key's runs are written to
  the partition of their key, so the shard needs its partition count (§8.2).
  ``{ns}.ratelimits`` likewise (§8.5): a rate-limit pause or resume for a topic that
  is gone or refusing is rejected with the fix, instead of failing every transaction
  of its shard until an operator acts.
- ``refused``: a target topic whose batch the broker refused inside a transaction,
  or did not acknowledge by its deadline (`actors.scheduler.target_acks`); the
  transaction was aborted and the shard is rebuilt: nothing of it committed. For a
  while (`refused_for_s`) the shard fails that topic's occurrences with the
  broker's reason instead of writing them, so one bad topic costs its own
  occurrences and not every turn of the shard; then the topic is tried again. Each
  refusal in a row doubles the while, up to `REFUSED_MAX_S`, so a topic that keeps
  refusing costs its shards a rebuild every quarter of an hour, not every minute;
  a transaction that writes to the topic again ends the row (``strikes``).

Only an error that is the topic's own marks it (`_TOPICS_FAULTS`, an allow-list):
an error of the transaction, the producer or the broker as a whole (a fenced
zombie, ``InvalidTxnState``, a coordinator moving, a timeout) takes the ordinary
path of a failed transaction: aborted, the shard rebuilt, its occurrences fired
again, nothing lost.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    CorruptRecordException,
    InvalidTimestampError,
    InvalidTopicError,
    MessageSizeTooLargeError,
    PolicyViolationError,
    RecordListTooLargeError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
    UnknownError,
    UnknownTopicOrPartitionError,
    UnsupportedForMessageFormatError,
)

from actors.scheduler.limits import BROKER_DEFAULT_BYTES, MAX_MESSAGE_BYTES
from actors.scheduler.writer import BatchRefused, TargetUnacknowledged
from topics.admin import admin_client, describe_topics
from topics.names import Settings, TopicKind
from topics.queues import DEFAULT_QUEUE, placement_of_topic
from topics.target_patterns import allowed, check_pattern
from topics.targets import TargetTopic, TargetTopics

INF = float("inf")

log = logging.getLogger("kafkron.scheduler")

REFRESH_S = 30.0
# A first refusal lasts a minute; each one in a row doubles it, up to a quarter hour.
REFUSED_FIRST_S = 60.0
REFUSED_MAX_S = 900.0
ENV = "KAFKRON_TARGET_TOPICS"


def patterns_from_env(given: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``given`` (the ``--target-topic`` flags) plus ``KAFKRON_TARGET_TOPICS`` (comma
    separated), each checked; ValueError naming a bad one."""
    from_env = [p.strip() for p in os.environ.get(ENV, "").split(",") if p.strip()]
    return tuple(dict.fromkeys(check_pattern(p) for p in (*given, *from_env)))


@dataclass(slots=True)
class TargetTable:
    """The runtime's view; `snapshot` is what the cores are handed."""

    namespace: str
    allowed: tuple[str, ...]
    known: dict[str, TargetTopic] = field(default_factory=dict)
    refused: dict[str, tuple[str, float]] = field(default_factory=dict)  # -> (why, until)
    strikes: dict[str, int] = field(default_factory=dict)  # -> refusals in a row

    def snapshot(self, mono_s: float, wall_ms: int | None = None) -> TargetTopics:
        """The view at monotonic ``mono_s``; with ``wall_ms`` (the wall clock then) it
        states when each refusal mark ends, on the cores' clock, so a queue's attempt
        refused now waits for that end before its next (docs/DESIGN.md §8.1)."""
        live = {t: why for t, (why, until) in self.refused.items() if until > mono_s}
        until_ms = (
            {}
            if wall_ms is None
            else {
                t: wall_ms + int((until - mono_s) * 1000)
                for t, (_, until) in self.refused.items()
                if t in live
            }
        )
        return TargetTopics(
            allowed=self.allowed,
            known=dict(self.known),
            refused=live,
            own_prefix=f"{self.namespace}.",
            refused_until_ms=until_ms,
            refresh_ms=int(REFRESH_S * 1000),
        )

    def next_end_s(self, mono_s: float) -> float:
        """When the next refusal mark still live at monotonic ``mono_s`` ends (inf if
        none): the runtime hands the cores a new view then, since a snapshot is a copy
        and an attempt retried at a mark's end must not meet the mark again."""
        return min((until for _, until in self.refused.values() if until > mono_s), default=INF)

    def refuse(self, topic: str, why: str, mono_s: float) -> None:
        strikes = self.strikes[topic] = self.strikes.get(topic, 0) + 1
        for_s = refused_for_s(strikes)
        pauses = topic == f"{self.namespace}.{TopicKind.RATELIMITS.value}"
        log.warning(
            "target topic %s refused a record: %s; its %s for %.0f s (refusal %d in a"
            " row); fix the topic, then %s",
            topic,
            why,
            "rate-limit pauses and resumes are rejected" if pauses else "occurrences fail",
            for_s,
            strikes,
            "send them again" if pauses else "`kafkron dlq replay` them",
        )
        self.refused[topic] = (why, mono_s + for_s)

    def delivered(self, topics: frozenset[str]) -> None:
        """A transaction that wrote to ``topics`` committed: their rows of refusals end."""
        for topic in topics:
            self.strikes.pop(topic, None)

    async def refresh(self, settings: Settings) -> None:
        """Read the allowed topics' and the queue topics' partitions and limits (keeps
        what it knew on error)."""
        own = f"{self.namespace}."
        async with admin_client(settings) as admin:
            names = [
                t
                for t in await admin.list_topics()
                if allowed(t, self.allowed, own)
                or is_queue_topic(self.namespace, t)
                or t == settings.topic(TopicKind.RUNS)  # a concurrency key's runs (§8.2)
                or t == settings.topic(TopicKind.RATELIMITS)  # pauses (§8.5)
            ]
            described = await describe_topics(admin, names) if names else []
            counts = {
                topic["topic"]: len(topic["partitions"])
                for topic in described
                if topic["error_code"] == 0 and topic["partitions"]
            }
            limits = dict.fromkeys(counts, BROKER_DEFAULT_BYTES)
            if counts:
                resources = [
                    ConfigResource(ConfigResourceType.TOPIC, name, {MAX_MESSAGE_BYTES: None})
                    for name in counts
                ]
                for response in await admin.describe_configs(resources):
                    for error_code, _message, _type, name, entries in response.resources:
                        if error_code != 0 or name not in limits:
                            continue
                        for entry in entries:
                            if entry[0] == MAX_MESSAGE_BYTES and entry[1]:
                                limits[name] = int(entry[1])
        self.known = {name: TargetTopic(n, limits[name]) for name, n in counts.items()}


def refused_target(exc: BaseException, namespace: str) -> tuple[str, str] | None:
    """(target or queue topic, the broker's reason) if ``exc`` is a refusal naming a
    target topic, a queue's topic (``{ns}.runs.Q``, `topics.queues`) or the rate-limit
    pauses topic (``{ns}.ratelimits``): a batch to it refused, or the transaction
    refused Write on it (aiokafka fails the whole transaction with the unauthorized
    topics when it adds their partitions)."""
    own = f"{namespace}."
    ratelimits = f"{own}{TopicKind.RATELIMITS.value}"
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BatchRefused):
            topic = seen.batch.topic
            if topic is TopicKind.RATELIMITS:
                topic = ratelimits
            if isinstance(topic, TopicKind) or not _topics_fault(seen.error):
                return None
            return topic, f"{type(seen.error).__name__}: {seen.error}"
        if isinstance(seen, TargetUnacknowledged):  # kept out of the transaction
            return seen.topic, f"{type(seen).__name__}: {seen}"
        if isinstance(seen, TopicAuthorizationFailedError):
            named = [
                a
                for arg in seen.args
                for a in _names(arg)
                if not a.startswith(own) or is_queue_topic(namespace, a) or a == ratelimits
            ]
            if named:
                return named[0], "not authorized: the scheduler's principal may not Write it"
        seen = seen.__cause__ or seen.__context__
    return None


def refused_for_s(strikes: int) -> float:
    """How long a target topic refused ``strikes`` times in a row (1: the first) stays
    refused: `REFUSED_FIRST_S`, doubled at each further refusal, at most `REFUSED_MAX_S`."""
    if strikes < 1:
        raise ValueError(f"strikes must be at least 1, not {strikes}")
    return min(REFUSED_MAX_S, REFUSED_FIRST_S * 2.0 ** min(strikes - 1, 32))


# The errors a produce answer gives about the topic itself (or its record): the topic
# gone, not writable by this principal, a record it does not accept (too large, a
# timestamp out of its range, a record its cleanup policy or format refuses, a policy),
# or not acknowledged at all (`TargetUnacknowledged`). ``UnknownError`` is an answer
# code aiokafka does not know: at the produce version it speaks (v8) the one such
# partition-level code is INVALID_RECORD (87), e.g. a keyless record to a compacted
# topic. Everything else (a fenced zombie, ``InvalidTxnState``, ``InvalidProducerEpoch``,
# ``UnknownProducerId``, a timeout, a leader moving, a coordinator away) is the
# transaction's or the broker's: taken for the topic's, it would dead-letter the
# topic's occurrences for a problem the rebuild heals.
_TOPICS_FAULTS: tuple[type[BaseException], ...] = (
    UnknownTopicOrPartitionError,
    TopicAuthorizationFailedError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    InvalidTimestampError,
    CorruptRecordException,
    InvalidTopicError,
    PolicyViolationError,
    UnsupportedForMessageFormatError,
    UnknownError,
    TargetUnacknowledged,
)


def is_queue_topic(namespace: str, topic: str) -> bool:
    """A (non-default) queue's runs topic or a high lane's (`topics.priority`): the shard
    learns of those as of targets."""
    return placement_of_topic(namespace, topic) not in (None, DEFAULT_QUEUE)


def _topics_fault(error: BaseException) -> bool:
    """Whether a batch's error is the target topic's own refusal (an allow-list)."""
    return type(error) in _TOPICS_FAULTS


def _names(arg: object) -> list[str]:
    if isinstance(arg, str):
        return [arg]
    if isinstance(arg, set | frozenset | list | tuple):
        return sorted(a for a in arg if isinstance(a, str))
    return []
