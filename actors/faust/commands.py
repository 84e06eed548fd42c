"""Commands from a Faust agent, validated exactly as ``kafkron submit`` validates them.

`send_command` runs the shard's own decoder on the command first
(`actors.sending.encode`, the function behind ``kafkron schedule``,
``submit`` and ``dlq replay``), so a mistake raises ``ValueError`` with the
shard's reason in the agent, at once, instead of landing in ``{ns}.rejected``.
The record is keyed by the schedule id, so the owning shard reads it.

Sending is at least once, like everything a Faust agent produces: a crash after
the send and before the commit of the agent's offset sends it again. Each command
here is safe to repeat: a second ``dlq.replay`` of a run that is running again is
rejected ("only a dead-lettered run can be replayed"), a second ``schedule.trigger``
fires once more (so trigger from an agent only where that is acceptable).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import faust

from actors.sending import encode
from topics.messages import parse_run_id


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def dlq_replay(run_id: str) -> dict[str, Any]:
    """The ``dlq.replay`` command of a dead run (``ValueError`` if it is not a run id)."""
    schedule_id, _, _ = parse_run_id(run_id)
    return {"v": 1, "type": "dlq.replay", "id": schedule_id, "run_id": run_id}


def schedule_trigger(schedule_id: str) -> dict[str, Any]:
    """Fire ``schedule_id`` once, now."""
    return {"v": 1, "type": "schedule.trigger", "id": schedule_id}


def schedule_pause(schedule_id: str) -> dict[str, Any]:
    return {"v": 1, "type": "schedule.pause", "id": schedule_id}


def schedule_resume(schedule_id: str) -> dict[str, Any]:
    return {"v": 1, "type": "schedule.resume", "id": schedule_id}


def validated(command: Mapping[str, Any], now: int | None = None) -> tuple[bytes, bytes]:
    """(key, value) of ``command``; ``ValueError`` with the shard's reason if it is invalid."""
    return encode(command, now_ms() if now is None else now)


async def send_command(commands: faust.TopicT, command: Mapping[str, Any]) -> None:
    """Validate ``command`` and produce it to ``commands`` (`NamespaceTopics.commands`).

    Returns once the broker acknowledged it.
    """
    key, value = validated(command)
    pending = await commands.send(key=key, value=value)
    await pending  # the broker's acknowledgement, not just the producer's buffer
