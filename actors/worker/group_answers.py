"""When the group last heard this worker: the send time of each answered group request.

A Heartbeat or SyncGroup answered without error proves the group had this member
when the broker handled the request: after the request was sent, and possibly long
before the answer is read. A process frozen in between (SIGSTOP, a VM pause) reads
the answer when the group may have ended its session and given its partitions away:
stamped with the time it was read, the answer renewed a lease the group had ended,
so the thawed worker started keyed and rate-limited runs beside the partition's new
owner, or re-adopted (fenced) a partition the group gave away. So each answer is
stamped with its request's send time (docs/DESIGN.md §8, the lease rule;
``WorkerMachine.heartbeat``, ``assigned``).

Only a ``NoError`` answer counts. aiokafka's ``_do_heartbeat`` also returns True for
``REBALANCE_IN_PROGRESS`` (it keeps heartbeating through a rebalance), but that answer
says a rebalance began before the broker handled it, and the group gives our
partitions away when that rebalance ends without us, however recently we were heard:
it is no renewal. The lease then holds by the rebalance's hold from the last
``NoError`` heartbeat (``WorkerMachine.rebalance_started``).

aiokafka 0.14 has no hook for either answer, so the coordinator's ``_send_req``
(every group request goes through it: ``_do_heartbeat``,
``CoordinatorGroupRebalance._send_sync_group_request``) is wrapped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka.protocol.group import HeartbeatRequest, SyncGroupRequest

HEARTBEAT = "heartbeat"
SYNC_GROUP = "sync_group"

Heard = Callable[[str, int], None]
"""Told ``(HEARTBEAT or SYNC_GROUP, sent_ms)`` once the request's answer is read."""


def watch_group_answers(coordinator: Any, now_ms: Callable[[], int], heard: Heard) -> None:
    """Wrap ``coordinator._send_req`` to report each successful Heartbeat and
    SyncGroup answer with the instant its request was sent."""
    original: Callable[[Any], Awaitable[Any]] = coordinator._send_req

    async def watched(request: Any) -> Any:
        sent_ms = now_ms()  # before the await: a freeze may come between the two
        response = await original(request)
        kind = answered(request, response)
        if kind is not None:
            heard(kind, sent_ms)
        return response

    coordinator._send_req = watched


def answered(request: Any, response: Any) -> str | None:
    """Which proof of membership an answer is, if any."""
    if getattr(response, "error_code", None) != 0:
        return None
    if isinstance(request, HeartbeatRequest):
        return HEARTBEAT
    if isinstance(request, SyncGroupRequest):
        return SYNC_GROUP
    return None
