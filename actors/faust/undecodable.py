"""Records that do not decode: logged once, counted and skipped, never thrown at an agent.

Faust's default (``faust.Channel.on_value_decode_error`` and its key twin) throws the
decode error into every agent on the topic: the agent crashes, its supervisor
restarts it about 5 s later with its in-memory state gone, and every later record
of its partitions waits meanwhile. A record kafkron's parser refuses (not JSON, not
an object, a field missing, a ``"v"`` this version does not read) holds nothing an
agent could act on, so `SkippingTopic`, the class of every topic `declare_topics`
returns, reports it and lets the stream go on.

The offset is safe without the throw: Faust's conductor (faust/transport/conductor.py
and its Cython twin) acknowledges the message for every channel still waiting for it
before it calls these hooks, so the group commits past the record either way.

A record reaches the hooks once per channel on its topic (two agents on
``{ns}.results``: twice); it is reported once. A record read again after a restart
or a rebalance is a new delivery and is reported again.
"""

from __future__ import annotations

import logging
import weakref
from collections import Counter

import faust
from faust.types import Message

from actors.observe import metrics

log = logging.getLogger("kafkron.faust")


class UndecodableRecords:
    """The records this process skipped because they did not decode, per topic."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        # The delivery itself, not its offset: each channel on the topic hands over
        # the same message object, and a redelivery is a new one.
        self._reported: weakref.WeakSet[Message] = weakref.WeakSet()

    def count(self, topic: str | None = None) -> int:
        """Records skipped on ``topic`` (its full name), or on every topic."""
        return self._counts.total() if topic is None else self._counts[topic]

    def by_topic(self) -> dict[str, int]:
        return dict(self._counts)

    def report(self, part: str, error: Exception, message: Message) -> None:
        """Log and count ``message``, whose ``part`` (key or value) failed with ``error``."""
        if message in self._reported:
            return
        self._reported.add(message)
        self._counts[message.topic] += 1
        metrics.faust_record_undecodable(message.topic)
        log.warning(
            "skipping undecodable record %s[%d]@%d (%s): %s",
            message.topic,
            message.partition,
            message.offset,
            part,
            error,
        )


undecodable_records = UndecodableRecords()
"""The process's tally; also ``kafkron_faust_records_undecodable_total{topic}``."""


class SkippingTopic(faust.Topic):
    """A Faust topic whose records that fail to decode are reported, not thrown.

    Faust clones a topic with its own class for every agent and stream on it, so
    the override holds for all of them.
    """

    async def on_key_decode_error(self, exc: Exception, message: Message) -> None:
        undecodable_records.report("key", exc, message)
        await self.on_decode_error(exc, message)  # Faust's extension point, kept

    async def on_value_decode_error(self, exc: Exception, message: Message) -> None:
        undecodable_records.report("value", exc, message)
        await self.on_decode_error(exc, message)
