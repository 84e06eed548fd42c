"""Following the outcome topics: a run's end, and results as they come.

What `Client.wait_for` and `Client.results` do, on the client's one consumer
(`kafkron.reading.Reader`). Both read ``read_committed`` from an instant on, only the
partitions that can hold what they look for (a schedule's results and dead letters
are keyed by its id), and unsubscribe when they return or their loop breaks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from kafkron.outcomes import OutcomeTracker, RunOutcome
from kafkron.reading import Failed, Reader, ReadError
from topics.command_builders import InvalidCommand
from topics.command_fields import FieldError, instant
from topics.command_parts import Instant, instant_text
from topics.messages import PROGRESS_STATUS, Result, parse_dlq, parse_result, parse_run_id
from topics.names import TopicKind
from topics.partitioner import murmur2_partition

LOOK_BACK_MS = 10 * 60_000
"""`Client.wait_for` reads results stamped from this long before the run's instant:
a worker's clock may be behind the shard's by that much."""


def instant_ms(value: Instant, path: str) -> int:
    """``value`` in epoch milliseconds; `InvalidCommand` naming ``path`` if it is none.

    Example: ``instant_ms("2026-10-10T00:00:00Z", "since")`` is ``1791590400000``.
    """
    try:
        return instant(instant_text(value, path), path)
    except FieldError as error:
        raise InvalidCommand(str(error)) from None


def partition_of(reader: Reader, kind: TopicKind, schedule_id: str) -> int:
    """The partition of ``kind`` that holds ``schedule_id``'s records (keyed by the id).

    Example: ``partition_of(reader, TopicKind.RESULTS, "fx-rates")``.
    """
    return murmur2_partition(schedule_id.encode("utf-8"), reader.partition_count(kind))


async def wait_for(
    reader: Reader, run_id: str, timeout: float | None, since: Instant | None
) -> RunOutcome:
    """The final outcome of the run ``run_id``, from its results and dead letters
    written from ``since`` on (default `LOOK_BACK_MS` before the run's instant);
    `TimeoutError` after ``timeout`` seconds. `Client.wait_for` says more.

    Example: ``outcome = await wait_for(reader, "fx-rates@2026-10-10T00:05:00.000Z", 60, None)``.
    """
    try:
        schedule_id, scheduled_ms, _ = parse_run_id(run_id)
    except ValueError as error:
        raise InvalidCommand(f"run_id: {error}") from None
    since_ms = scheduled_ms - LOOK_BACK_MS if since is None else instant_ms(since, "since")
    tracker = OutcomeTracker(run_id)
    done: asyncio.Future[RunOutcome] = asyncio.get_running_loop().create_future()

    def deliver(kind: TopicKind, value: bytes) -> None:
        if done.done():
            return
        try:
            if kind is TopicKind.RESULTS:
                outcome = tracker.on_result(parse_result(value))
            else:
                outcome = tracker.on_dead_letter(parse_dlq(value))
        except ValueError:
            return  # not a record of ours to judge; the history shows it raw
        if outcome is not None:
            done.set_result(outcome)

    tps = [
        reader.topic_partition(kind, partition_of(reader, kind, schedule_id))
        for kind in (TopicKind.RESULTS, TopicKind.DLQ)
    ]
    starts = await reader.offsets_at(tps, since_ms)
    subscription = await reader.subscribe(starts, deliver, on_failure=_fail(done))
    try:
        async with asyncio.timeout(timeout):
            return await done
    finally:
        reader.unsubscribe(subscription)


async def results(
    reader: Reader, schedule: str | None, since: Instant | None, progress: bool
) -> AsyncGenerator[Result, None]:
    """Every result of ``schedule`` (None: of every schedule) written from ``since`` on
    (None: from now), as it comes; progress reports only if ``progress``.
    `Client.results` says more.

    Example: ``async for result in results(reader, "fx-rates", None, False): ...``.
    """
    kind = TopicKind.RESULTS
    partitions = (
        range(reader.partition_count(kind))
        if schedule is None
        else [partition_of(reader, kind, schedule)]
    )
    tps = [reader.topic_partition(kind, p) for p in partitions]
    since_ms = None if since is None else instant_ms(since, "since")
    queue: asyncio.Queue[Result | BaseException] = asyncio.Queue()

    def deliver(_: TopicKind, value: bytes) -> None:
        try:
            result = parse_result(value)
        except ValueError:
            return
        if schedule is not None and result.schedule_id != schedule:
            return
        if (result.status == PROGRESS_STATUS) == progress:
            queue.put_nowait(result)

    starts = await reader.offsets_at(tps, since_ms)
    subscription = await reader.subscribe(starts, deliver, on_failure=queue.put_nowait)
    try:
        while True:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise ReadError(f"the client's reader stopped: {item}")
            yield item
    finally:
        reader.unsubscribe(subscription)


def _fail(done: asyncio.Future[RunOutcome]) -> Failed:
    def fail(error: BaseException) -> None:
        if not done.done():
            done.set_exception(ReadError(f"the client's reader stopped: {error}"))

    return fail
