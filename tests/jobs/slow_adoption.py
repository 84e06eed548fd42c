"""Test jobs for a worker whose partition adoptions are slow, on purpose.

Imported by ``kafkron worker --jobs tests.jobs.worker,tests.jobs.slow_adoption``: besides a
short async job, it wraps the admin client's committed-offset read (the step of an
adoption that follows the fence) so that it answers ``KAFKRON_TEST_ADOPT_DELAY_MS``
times ``1 + partition % 3`` later. Adoptions of one rebalance then end at different
instants while the consumer already fetches the new assignment: exactly the window
in which records of a partition still being adopted arrive.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.commit import OffsetFetchRequest

from actors import RunContext, job

_DELAY_MS = int(os.environ.get("KAFKRON_TEST_ADOPT_DELAY_MS", "0"))
_send = AIOKafkaAdminClient._send_request


async def _slow_send(self: AIOKafkaAdminClient, request: Any, *args: Any, **kwargs: Any) -> Any:
    # The committed-offset read (`topics.committed.fetch_committed`) is an
    # OffsetFetch request naming the partition being adopted.
    partitions = (
        getattr(request, "_partitions", None) if isinstance(request, OffsetFetchRequest) else None
    )
    if _DELAY_MS and partitions:
        first = partitions[0][1][0]
        await asyncio.sleep(_DELAY_MS * (1 + first % 3) / 1000)
    return await _send(self, request, *args, **kwargs)


AIOKafkaAdminClient._send_request = _slow_send  # type: ignore[method-assign]


@job("test.brief")
async def brief(ctx: RunContext, seconds: float = 0.3) -> None:
    await asyncio.sleep(seconds)
