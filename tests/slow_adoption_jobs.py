"""Test jobs for a worker whose partition adoptions are slow, on purpose.

Imported by ``kafkron worker --jobs worker_jobs,slow_adoption_jobs``: besides a
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

from actors import RunContext, job

_DELAY_MS = int(os.environ.get("KAFKRON_TEST_ADOPT_DELAY_MS", "0"))
_read = AIOKafkaAdminClient.list_consumer_group_offsets


async def _slow_read(self: AIOKafkaAdminClient, group_id: str, *args: Any, **kwargs: Any) -> Any:
    partitions = kwargs.get("partitions") or []
    if _DELAY_MS and partitions:
        await asyncio.sleep(_DELAY_MS * (1 + partitions[0].partition % 3) / 1000)
    return await _read(self, group_id, *args, **kwargs)


AIOKafkaAdminClient.list_consumer_group_offsets = _slow_read  # type: ignore[method-assign]


@job("test.brief")
async def brief(ctx: RunContext, seconds: float = 0.3) -> None:
    await asyncio.sleep(seconds)
