"""Fencing the other form of a partition's transactional id when adopting it.

A scheduler adopting shard p commits with one transactional id, and before it reads
anything it must bump the epoch of every id an earlier owner of p may still hold.
During an upgrade from 0.1 a partition has two (`topics.names.TxnIds`): the
``{ns}-shard-{p}`` of 0.1 and ``{ns}.shard.{p}``, and the previous owner, or a paused
zombie of it, may hold either. So in the upgrade modes every adoption first starts a
throwaway transactional producer with the other id: its ``InitProducerId`` aborts
that id's open transaction and refuses the holder's next one (the coordinator
answers only once the abort is complete), exactly as the adopting producer's own
start does for its id. The same holds for a worker's runs partition.

A refusal of the other id is a failed adoption, never a skipped fence: ACLs are per
principal, so that this principal may not use the id says nothing of what another
principal of the fleet (a 0.1 host's user) can still commit with it. The adoption
is retried as any other; the error says which grant is missing.
"""

from __future__ import annotations

from aiokafka import AIOKafkaProducer
from aiokafka.errors import TransactionalIdAuthorizationFailed

from topics.clients import transactional_producer_kwargs
from topics.closing import stop_producer
from topics.names import Settings


class FenceRefused(Exception):
    """This principal may not use the other form of an id, so it cannot fence it."""


async def fence_id(settings: Settings, transactional_id: str, client_id: str) -> None:
    """Bump `transactional_id`'s epoch, aborting its open transaction.

    Raises `FenceRefused` if this principal may not use the id, else what the
    producer's start raises (the coordinator loading or moving, a broker down): the
    adoption fails and is tried again, as when the adopting producer's start fails.
    """
    producer = AIOKafkaProducer(
        **transactional_producer_kwargs(settings, client_id, transactional_id)
    )
    try:
        await producer.start()
    except TransactionalIdAuthorizationFailed:
        raise FenceRefused(
            f"{transactional_id}: KAFKRON_TRANSACTIONAL_IDS={settings.txn_ids.value} fences"
            " this form too, and this principal may not use it; grant it (kafkron acl plan"
            " --migrate --role ROLE --principal USER prints the grants) or, once no process"
            " commits with it any more, finish the upgrade with KAFKRON_TRANSACTIONAL_IDS=tenant"
        ) from None
    finally:
        await stop_producer(producer, f"stopping the fencing producer of {transactional_id}")


async def fence_others(settings: Settings, role: str, partition: int) -> None:
    """Fence every id of `role`'s `partition` but the one it commits with (none in the
    default mode)."""
    for other in settings.fenced_ids(role, partition)[1:]:
        await fence_id(settings, other, f"{other}-fence")
