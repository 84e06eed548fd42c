"""Fencing the other form of a partition's transactional id when adopting it.

A scheduler adopting shard p commits with one transactional id, and before it reads
anything it must bump the epoch of every id an earlier owner of p may still hold.
Since 0.2 a partition has two ids, ``{ns}.shard.{p}`` and the ``{ns}-shard-{p}`` of
earlier releases (`topics.names.Settings.fenced_ids`): during a rolling restart the
previous owner, or a paused zombie of it, may hold either. So every adoption starts a
throwaway transactional producer with the other id: its ``InitProducerId`` aborts that
id's open transaction and refuses the holder's next one, exactly as the adopting
producer's own start does for its id. The same holds for a worker's runs partition.

An authorization refusal of the other id is not a failure: the grants name the
transactional ids a role's principal may use, and every scheduler (worker) of a
namespace runs with its role's grants, so an id this principal may not use is one
no holder of the role can commit with either (the broker checks the id's Write on
every ``AddPartitionsToTxn``, ``TxnOffsetCommit`` and ``EndTxn``). That is the state
after the upgrade's last step removes the old prefix (`topics.acl_plan.migration`).
"""

from __future__ import annotations

import logging

from aiokafka import AIOKafkaProducer
from aiokafka.errors import TransactionalIdAuthorizationFailed

from topics.clients import transactional_producer_kwargs
from topics.closing import stop_producer
from topics.names import Settings

log = logging.getLogger("kafkron")


async def fence_id(settings: Settings, transactional_id: str, client_id: str) -> bool:
    """Bump `transactional_id`'s epoch, aborting its open transaction; False if this
    principal may not use it (then nobody of its role can, see the module docstring).

    Raises what the producer's start raises otherwise (the coordinator loading or
    moving, a broker down): the adoption fails and is tried again, as when the
    adopting producer's own start fails.
    """
    producer = AIOKafkaProducer(
        **transactional_producer_kwargs(settings, client_id, transactional_id)
    )
    try:
        await producer.start()
    except TransactionalIdAuthorizationFailed:
        log.info(
            "%s: not fenced, this principal may not use it (the upgrade's grants were"
            " removed, so no process of this role can commit with it either)",
            transactional_id,
        )
        return False
    finally:
        await stop_producer(producer, f"stopping the fencing producer of {transactional_id}")
    return True
