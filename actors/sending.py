"""Producing commands to ``{ns}.commands``, validated first by the shard's own decoder.

Every command is checked here with `topics.commands.decode_command` before it is
sent, so a person sees a mistake at once instead of finding it later in
``{ns}.rejected``. The shard still validates everything it reads; this is a
courtesy, not the guard. Used by `kafkron schedule`/`submit`/`dlq`/`dag`, the web
console's actions, the demo and the Python client (`kafkron.Client`, which keeps one
producer from `started_producer` for its life).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from topics.acl_plan import Operation
from topics.clients import producer_kwargs
from topics.closing import stop_producer
from topics.command_builders import validated
from topics.names import Settings, TopicKind
from topics.refusals import from_error


class SendError(Exception):
    """Kafka did not take the commands; the message says what to do."""


def encode(command: Mapping[str, Any], now_ms: int) -> tuple[bytes, bytes]:
    """(key, value) of a command object; `InvalidCommand` (a ``ValueError``) with the
    shard's reason if invalid. The check is `topics.command_builders.validated`."""
    record = validated(command, now_ms=now_ms)
    return record.key, record.value


async def started_producer(settings: Settings, client_id: str) -> AIOKafkaProducer:
    """A started producer of commands (as every client makes one), or `SendError`."""
    producer = AIOKafkaProducer(**producer_kwargs(settings, client_id))
    try:
        await producer.start()
    except KafkaError as exc:
        await stop_producer(producer, "stopping the commands producer")
        raise SendError(
            f"cannot reach Kafka at {settings.bootstrap} ({exc}); start it with "
            "`kafkron broker start` or set KAFKRON_BOOTSTRAP"
        ) from None
    return producer


async def produce_commands(
    producer: AIOKafkaProducer, settings: Settings, records: Sequence[tuple[bytes, bytes]]
) -> None:
    """Produce ``records`` (key, value) to ``{ns}.commands`` with ``producer`` and wait
    for every ack; `SendError` saying what to do if Kafka did not take them."""
    topic = settings.topic(TopicKind.COMMANDS)
    try:
        pending = [await producer.send(topic, key=key, value=value) for key, value in records]
        for future in pending:
            await future
    except KafkaError as exc:
        denied = from_error(exc, settings.namespace, Operation.WRITE)
        if denied is not None:
            raise SendError(str(denied)) from None
        raise SendError(
            f"sending to {topic} failed ({exc}); check that the topic exists "
            f"(`kafkron topics check`) and retry"
        ) from None


async def send_commands(settings: Settings, records: Sequence[tuple[bytes, bytes]]) -> None:
    """Produce ``records`` (key, value) to ``{ns}.commands`` and wait for every ack."""
    producer = await started_producer(settings, f"{settings.namespace}-cli")
    try:
        await produce_commands(producer, settings, records)
    finally:
        await stop_producer(producer, "stopping the commands producer")
