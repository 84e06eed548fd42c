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
- ``refused``: a target topic whose batch the broker refused inside a transaction
  (the transaction was aborted and the shard is rebuilt: nothing of it committed).
  For `REFUSED_FOR_S` the shard fails that topic's occurrences with the broker's
  reason instead of writing them, so one bad topic costs its own occurrences and
  not every turn of the shard; then the topic is tried again.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    InvalidProducerEpoch,
    KafkaTimeoutError,
    ProducerFenced,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)

from actors.scheduler.limits import BROKER_DEFAULT_BYTES, MAX_MESSAGE_BYTES
from actors.scheduler.writer import BatchRefused
from topics.admin import admin_client, describe_topics
from topics.names import Settings, TopicKind
from topics.targets import TargetTopic, TargetTopics, allowed, check_pattern

log = logging.getLogger("kafkron.scheduler")

REFRESH_S = 30.0
REFUSED_FOR_S = 60.0
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

    def snapshot(self, mono_s: float) -> TargetTopics:
        live = {t: why for t, (why, until) in self.refused.items() if until > mono_s}
        return TargetTopics(
            allowed=self.allowed,
            known=dict(self.known),
            refused=live,
            own_prefix=f"{self.namespace}.",
        )

    def refuse(self, topic: str, why: str, mono_s: float) -> None:
        log.warning(
            "target topic %s refused a record: %s; its occurrences fail for %.0f s",
            topic,
            why,
            REFUSED_FOR_S,
        )
        self.refused[topic] = (why, mono_s + REFUSED_FOR_S)

    async def refresh(self, settings: Settings) -> None:
        """Read the allowed topics' partitions and limits (keeps what it knew on error)."""
        if not self.allowed:
            self.known = {}
            return
        own = f"{self.namespace}."
        async with admin_client(settings) as admin:
            names = [t for t in await admin.list_topics() if allowed(t, self.allowed, own)]
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
    """(target topic, the broker's reason) if ``exc`` is a refusal naming a target topic:
    a batch to it refused, or the transaction refused Write on it (aiokafka fails the
    whole transaction with the unauthorized topics when it adds their partitions)."""
    own = f"{namespace}."
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BatchRefused):
            topic = seen.batch.topic
            if isinstance(topic, TopicKind) or not _topics_fault(seen.error):
                return None
            return topic, f"{type(seen.error).__name__}: {seen.error}"
        if isinstance(seen, TopicAuthorizationFailedError):
            named = [a for arg in seen.args for a in _names(arg) if not a.startswith(own)]
            if named:
                return named[0], "not authorized: the scheduler's principal may not Write it"
        seen = seen.__cause__ or seen.__context__
    return None


def _topics_fault(error: BaseException) -> bool:
    """Whether a batch's error is the target topic's own refusal. A fenced producer (a
    zombie: the new owner fires the occurrence) or a broker briefly away (a timeout, a
    leader moving: the rebuilt shard fires it again) says nothing of the topic, and
    taking it for a refusal would dead-letter every occurrence of the topic for
    `REFUSED_FOR_S`. A topic gone is its own (the refresh that follows finds it absent)."""
    if isinstance(error, ProducerFenced | InvalidProducerEpoch | KafkaTimeoutError):
        return False
    if isinstance(error, UnknownTopicOrPartitionError):
        return True
    return not getattr(error, "retriable", False)


def _names(arg: object) -> list[str]:
    if isinstance(arg, str):
        return [arg]
    if isinstance(arg, set | frozenset | list | tuple):
        return sorted(a for a in arg if isinstance(a, str))
    return []
