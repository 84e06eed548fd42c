"""Commands from a Faust agent, built by the one builder of commands.

`dlq_replay`, `schedule_trigger`, `schedule_pause` and `schedule_resume` are the
builders of `topics.command_builders` (the ones ``kafkron.Client``, the command line
and the web console use), so each command is checked by the shard's own decoder when
it is made: a mistake raises ``InvalidCommand`` (a ``ValueError``) with the shard's
reason in the agent, at once, instead of landing in ``{ns}.rejected``. They return
the command object as a dict, so an agent may log or extend it; `send_command` checks
a dict again before producing it (``kafkron submit``'s check), and takes a built
``CommandRecord`` (``kafkron.schedule_upsert(...)`` and the others) as it is. The
record is keyed by the schedule id, so the owning shard reads it.

Sending is at least once, like everything a Faust agent produces: a crash after
the send and before the commit of the agent's offset sends it again. Each command
here is safe to repeat: a second ``dlq.replay`` of a run that is running again is
rejected ("only a dead-lettered run can be replayed"), a second ``schedule.trigger``
fires once more (so trigger from an agent only where that is acceptable).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import faust

from topics import calendar_builders, ratelimit_builders
from topics import command_builders as build
from topics.command_builders import CommandRecord
from topics.command_parts import Instant


def dlq_replay(run_id: str) -> dict[str, Any]:
    """The ``dlq.replay`` command of a dead run (``ValueError`` if it is not a run id)."""
    return dict(build.dlq_replay(run_id).body)


def schedule_trigger(schedule_id: str) -> dict[str, Any]:
    """Fire ``schedule_id`` once, now: ``schedule.trigger``."""
    return dict(build.schedule_trigger(schedule_id).body)


def schedule_pause(
    schedule_id: str,
    *,
    note: str | None = None,
    until: Instant | timedelta | None = None,
    after_current: bool | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    """Stop ``schedule_id`` firing: ``schedule.pause``. ``note`` says why and ``by`` who
    (``kafkron ls`` shows both); with ``until`` (an instant, or a `timedelta` from now
    by this process's clock: the command carries the instant) it resumes by itself
    then, once, its misfire policy deciding about what came due meanwhile; otherwise
    until ``schedule_resume``. ``after_current``: once the run in flight has ended.

    Example: ``schedule_pause("pay", note="ledger freeze", until=timedelta(hours=2))``.
    A pause is safe to repeat: the same pause again changes nothing (a ``timedelta``
    sent again counts from the second send, though).
    """
    command = build.schedule_pause(
        schedule_id, note=note, until=until, after_current=after_current, by=by
    )
    return dict(command.body)


def schedule_resume(schedule_id: str) -> dict[str, Any]:
    """Fire ``schedule_id`` again from its next occurrence: ``schedule.resume``."""
    return dict(build.schedule_resume(schedule_id).body)


def calendar_upsert(name: str, calendar: Mapping[str, Any]) -> dict[str, Any]:
    """Create or replace a named calendar: ``calendar.upsert`` (safe to repeat)."""
    return dict(calendar_builders.calendar_upsert(name, calendar).body)


def calendar_delete(name: str) -> dict[str, Any]:
    """Forget a named calendar: ``calendar.delete`` (refused while schedules name it)."""
    return dict(calendar_builders.calendar_delete(name).body)


def ratelimit_pause(
    key: str,
    *,
    until: Instant | timedelta | None = None,
    note: str | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    """Hold the runs of rate-limit key ``key`` on every worker: ``ratelimit.pause``
    (``until`` an instant or a `timedelta` from now; None: until resumed)."""
    return dict(ratelimit_builders.ratelimit_pause(key, until=until, note=note, by=by).body)


def ratelimit_resume(key: str) -> dict[str, Any]:
    """Let the runs of ``key`` start again: ``ratelimit.resume``."""
    return dict(ratelimit_builders.ratelimit_resume(key).body)


def validated(command: Mapping[str, Any], now: int | None = None) -> tuple[bytes, bytes]:
    """(key, value) of ``command``, checked at ``now`` (epoch ms, default now) by
    `topics.command_builders.validated`; ``ValueError`` with the shard's reason if it
    is invalid."""
    record = build.validated(command, now_ms=now)
    return record.key, record.value


async def send_command(commands: faust.TopicT, command: CommandRecord | Mapping[str, Any]) -> None:
    """Validate ``command`` and produce it to ``commands`` (`NamespaceTopics.commands`).

    Returns once the broker acknowledged it.
    """
    key, value = (
        (command.key, command.value) if isinstance(command, CommandRecord) else validated(command)
    )
    pending = await commands.send(key=key, value=value)
    await pending  # the broker's acknowledgement, not just the producer's buffer
