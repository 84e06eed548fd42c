"""`actors.closing.bounded`: a close that never ends is abandoned, never awaited forever."""

from __future__ import annotations

import asyncio

from actors.closing import bounded


async def test_a_close_that_swallows_its_cancellation_is_abandoned_not_awaited() -> None:
    release = asyncio.Event()

    async def stubborn_stop() -> None:
        # What aiokafka's stop does when its fetcher waits on an unanswered request:
        # a cancellation is caught and the wait goes on.
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    # asyncio.wait_for would hang here: it waits for the cancelled task to end.
    finished = await asyncio.wait_for(bounded(stubborn_stop(), "stubborn", 0.05), 5.0)
    assert finished is False
    release.set()
    await asyncio.sleep(0)


async def test_a_close_that_finishes_or_fails_reports_finished() -> None:
    async def ok() -> None:
        await asyncio.sleep(0)

    async def fails() -> None:
        raise RuntimeError("broker gone")

    assert await bounded(ok(), "ok", 1.0) is True
    assert await bounded(fails(), "fails", 1.0) is True


async def test_an_abandoned_producer_stop_ends_its_sender_and_connections() -> None:
    from actors.closing import stop_producer

    class Client:
        closed = False

        async def close(self) -> None:
            Client.closed = True

    class Sender:
        def __init__(self) -> None:
            self.sender_task = asyncio.ensure_future(asyncio.Event().wait())

    class Producer:
        def __init__(self) -> None:
            self._sender = Sender()
            self.client = Client()

        async def stop(self) -> None:  # waits for an accumulator that never drains
            await asyncio.Event().wait()

    producer = Producer()
    assert await stop_producer(producer, "a stuck producer", 0.05) is False
    await asyncio.sleep(0)
    assert producer._sender.sender_task.cancelled() and Client.closed
