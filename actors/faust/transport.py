"""A Faust transport whose consumers read ``isolation_level=read_committed``.

kafkron's results are committed transactionally (workers commit a batch of results
with the offsets it consumed; a fenced zombie's results are aborted), and the
scheduler writes clock probes to ``{ns}.runs`` in transactions it aborts. A reader
that sees uncommitted records sees results that never happened.

Faust's aiokafka driver picks the isolation level from its processing guarantee:
``read_committed`` only with ``processing_guarantee="exactly_once"``, which also
turns on Faust's own transactional producers, the part of Faust kafkron's firing
path deliberately avoids. Isolation and Faust's guarantee are separate matters,
so this transport keeps Faust's default guarantee (at least once) and only makes
its consumer read committed records.

Faust finds transports by URL scheme; the ``faust.transports`` entry point in
pyproject names this one ``kafkron``, so ``broker="kafkron://host:9092"`` selects it
(`actors.faust.kafkron_app` does that for you).
"""

from __future__ import annotations

from typing import Any

import aiokafka
from faust.transport.drivers import aiokafka as faust_aiokafka

SCHEME = "kafkron"
ISOLATION_LEVEL = "read_committed"


class ReadCommittedConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's consumer thread, whose group consumer reads committed records only."""

    def _create_worker_consumer(self, transport: Any) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # The constructor took the level Faust chose; the fetcher that applies it is
        # built in start(), so setting it here, before start, is what the consumer uses.
        # aiokafka is pinned below 0.15, where this attribute has this name; fail loudly
        # rather than read uncommitted records if a future version renames it.
        if getattr(consumer, "_isolation_level", None) not in ("read_uncommitted", ISOLATION_LEVEL):
            raise RuntimeError(
                "this aiokafka version keeps its isolation level elsewhere; kafkron's Faust "
                "transport supports the aiokafka versions kafkron pins (>=0.14,<0.15)"
            )
        consumer._isolation_level = ISOLATION_LEVEL
        return consumer


class ReadCommittedConsumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> ReadCommittedConsumerThread:
        return ReadCommittedConsumerThread(self, loop=self.loop, beacon=self.beacon)


class Transport(faust_aiokafka.Transport):
    """``kafkron://`` brokers: Faust's aiokafka transport, read_committed consumers."""

    Consumer = ReadCommittedConsumer
