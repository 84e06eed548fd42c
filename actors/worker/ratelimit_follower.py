"""Following ``{ns}.ratelimits`` for one worker process (docs/DESIGN.md §8.5).

The topic has one partition and is compacted: the latest record of each rate-limit
key is its pause, a tombstone resumes it. One consumer (no group, read_committed: a
record of a shard's aborted transaction is never seen) reads it from the beginning for
the life of the process and hands each record, in order, to the core's `RateGate`
(`learn`). Once it has read up to the end it found when it started, the gate is told
the pauses are known (`pauses_known`): until then no rate-limited run starts, so a
pause written before the worker started is never missed.

A read that fails (the topic missing, a refused Read) is logged and tried again; the
rate-limited runs wait meanwhile (their deadlines still end them), the other runs do
not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, TopicPartition

from actors.worker.ratelimit import RateGate
from topics.acl_plan import Operation
from topics.refusals import from_error

log = logging.getLogger("kafkron.worker.ratelimits")

POLL_MS = 500


class RateLimitFollower:
    """Reads ``{ns}.ratelimits`` into a `RateGate`; see the module docstring."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        topic: str,
        gate: RateGate,
        changed: Callable[[], None],
        namespace: str,
    ) -> None:
        self._consumer = consumer
        self._tp = TopicPartition(topic, 0)
        self._gate = gate
        self._changed = changed  # the runtime ticks: held runs are judged again
        self._namespace = namespace
        self._known_at: int | None = None  # the end to reach before the pauses are known
        self._started = False

    async def run_once(self, timeout_ms: int = POLL_MS) -> int:
        """Read what is there (waiting up to ``timeout_ms``); records learnt."""
        consumer, tp = self._consumer, self._tp
        if not self._started:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            self._known_at = int((await consumer.end_offsets([tp]))[tp])
            self._started = True
        batches = await consumer.getmany(tp, timeout_ms=timeout_ms, max_records=1000)
        learnt = 0
        for record in batches.get(tp, ()):
            if record.key is None:
                continue  # not a pause (every record is keyed by its rate-limit key)
            try:
                key = record.key.decode("utf-8")
            except UnicodeDecodeError:
                continue
            self._gate.learn(key, record.value)
            learnt += 1
        waiting = not self._gate.known and self._known_at is not None
        if waiting and await consumer.position(tp) >= (self._known_at or 0):
            self._gate.pauses_known()
            learnt += 1
        if learnt:
            self._changed()
        return learnt

    async def follow(self, stop: asyncio.Event) -> None:
        """Keep reading until ``stop`` (errors only delay it)."""
        while not stop.is_set():
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                denied = from_error(exc, self._namespace, Operation.READ)
                why = f"denied: {denied}" if denied is not None else f"{type(exc).__name__}: {exc}"
                log.warning(
                    "reading the rate-limit pauses failed (%s); rate-limited runs wait for"
                    " a read; trying again",
                    why,
                )
                await asyncio.sleep(POLL_MS / 1000)
            await asyncio.sleep(0)
