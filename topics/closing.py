"""Closing a Kafka client without ever hanging the caller.

aiokafka's ``stop()`` awaits its background tasks; a fetch or a produce request the
broker never answers (a broker that died mid-request, a half-open connection) keeps
one of those tasks waiting, and a cancelled ``stop()`` may then never finish:
``asyncio.wait_for`` waits for the cancelled awaitable to end, so it hangs too.
`bounded` gives a close a deadline and, past it, *abandons* the close: the task is
cancelled and left to finish (or not) on its own, and the caller goes on. What an
abandoned client still holds (a socket, a task) is released when the process ends;
nothing kafkron guarantees depends on a clean close (fencing and the broker's
session and transaction timeouts settle whatever a dead client left open).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

log = logging.getLogger("kafkron")

CLOSE_TIMEOUT_S = 10.0

T = TypeVar("T")


async def bounded(awaitable: Awaitable[Any], what: str, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
    """Await ``awaitable`` for at most ``timeout_s``; True if it finished (even with an error).

    Its exception, if any, is logged at debug level and swallowed: a close that fails
    has nothing useful to say. Past the deadline the task is cancelled and abandoned.
    """
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if task in done:
        if not task.cancelled() and task.exception() is not None:
            log.debug("%s: %s", what, task.exception())
        return True
    task.cancel()
    task.add_done_callback(_retrieve)
    log.warning("%s did not finish within %.0f s; abandoned it", what, timeout_s)
    return False


async def within(step: Awaitable[T], timeout_s: float) -> T:
    """``await step`` for at most ``timeout_s``, else ``TimeoutError``.

    Unlike ``asyncio.wait_for``, never waits for the cancelled step to end: past the
    deadline the step is cancelled and abandoned, as `bounded` abandons a close. For
    the steps a decision waits on (a transaction, a restore): the caller learns of
    the timeout and moves on even if the step swallows its cancellation.
    """
    task = asyncio.ensure_future(step)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:  # the caller is cancelled: so is its step
        _abandon(task)
        raise
    if task not in done:
        _abandon(task)
        raise TimeoutError(f"no answer within {timeout_s:.0f} s")
    return task.result()


def _abandon(task: asyncio.Future[Any]) -> None:
    task.cancel()
    task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def stop_producer(producer: Any, what: str, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
    """``producer.stop()``, bounded; if abandoned, end its sender and connections too.

    aiokafka's producer stop waits for its accumulator to drain before it cancels the
    sender task and closes the client; abandoned there, both would live on (one
    producer per re-adoption during a long outage). aiokafka keeps them private
    (``_sender.sender_task``, ``client``), hence the getattr.
    """
    if await bounded(producer.stop(), what, timeout_s):
        return True
    sender = getattr(producer, "_sender", None)
    task = getattr(sender, "sender_task", None)
    if isinstance(task, asyncio.Task):
        task.cancel()
    client = getattr(producer, "client", None)
    if client is not None:
        await bounded(client.close(), f"{what}: closing its connections", timeout_s)
    return False
