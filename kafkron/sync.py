"""`SyncClient`: the `Client` for code that does not run an event loop.

Scripts, Django and Flask views, notebooks. Every method blocks until done and
returns what the `Client` method of the same name returns.

How: the client starts its own event loop in a daemon thread and runs one `Client`
there for its whole life; each call is handed to that loop
(``asyncio.run_coroutine_threadsafe``) and waited for. Not ``asyncio.run`` per
call, because

- a Kafka client belongs to the loop it was started on: a loop per call would make
  and connect a producer and a consumer per call (hundreds of milliseconds each),
  where one client keeps one of each;
- ``asyncio.run`` refuses to run where a loop is already running in the calling
  thread (an async view, a Jupyter cell); a loop of its own in another thread runs
  anywhere;
- results followed with `results` keep their reader between two iterations.

One `SyncClient` may be shared by the threads of a web server: the calls go to one
loop, which runs them concurrently.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from concurrent.futures import Future
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar, Unpack

from kafkron.backfills import BackfillSent
from kafkron.client import Client
from kafkron.outcomes import RunOutcome
from kafkron.schedules import DEFAULT_FIRES, Schedule, next_fires
from topics.alerts import Deadline
from topics.command_builders import CommandRecord
from topics.command_parts import (
    Dst,
    Instant,
    Misfire,
    Retry,
    Spec,
    Task,
)
from topics.messages import Result
from topics.names import Settings
from topics.schedule_fields import ScheduleFields

T = TypeVar("T")


class SyncClient:
    """The `Client`, blocking: for scripts and WSGI views. Close it (or use ``with``).

    Example::

        with SyncClient() as client:
            client.create_schedule("remind-42", At("2026-12-04T14:05:00Z"), "crm.remind")
            outcome = client.wait_for("remind-42@2026-12-04T14:05:00.000Z", timeout=600)
    """

    def __init__(self, settings: Settings | None = None, *, client_id: str | None = None) -> None:
        self._client = Client(settings, client_id=client_id)
        self.settings = self._client.settings
        """The namespace and brokers this client talks to."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="kafkron-client", daemon=True
        )
        self._thread.start()
        try:
            self._call(self._client.start())
        except BaseException:
            self._stop_loop()
            raise

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self._loop.close()

    def close(self) -> None:
        """Close the producer and the consumer, then the client's loop and thread.

        Example: ``client.close()`` (``with SyncClient() as client:`` does it).
        """
        if self._loop.is_closed() or not self._thread.is_alive():
            return
        try:
            self._call(self._client.close())
        finally:
            self._stop_loop()

    def send(self, *commands: CommandRecord) -> None:
        """`Client.send`. Example: ``client.send(schedule_pause("a"))``."""
        self._call(self._client.send(*commands))

    def create_schedule(
        self,
        schedule_id: str,
        spec: Spec,
        job: str | None = None,
        **fields: Unpack[ScheduleFields],
    ) -> str:
        """`Client.create_schedule`.

        Example: ``client.create_schedule("fx-rates", Every("5m"), "billing.fx_rates")``, or
        ``client.create_schedule("orders-due", Every("1h"), target=KafkaTarget("orders.due"))``.
        """
        return self._call(
            self._client.create_schedule(
                schedule_id,
                spec,
                job,
                **fields,
            )
        )

    def update(
        self,
        schedule_id: str,
        *,
        spec: Spec | None = None,
        job: str | None = None,
        **fields: Unpack[ScheduleFields],
    ) -> None:
        """`Client.update`. Example: ``client.update("fx-rates", timeout_s=120)``."""
        self._call(
            self._client.update(
                schedule_id,
                spec=spec,
                job=job,
                **fields,
            )
        )

    def pause(
        self,
        schedule_id: str,
        *,
        note: str | None = None,
        until: datetime | str | timedelta | None = None,
        after_current: bool | None = None,
        by: str | None = None,
    ) -> None:
        """`Client.pause`.

        Example: ``client.pause("invoice-nightly", note="db migration", until=timedelta(hours=2))``.
        """
        pausing = self._client.pause(
            schedule_id, note=note, until=until, after_current=after_current, by=by
        )
        self._call(pausing)

    def resume(self, schedule_id: str) -> None:
        """`Client.resume`. Example: ``client.resume("invoice-nightly")``."""
        self._call(self._client.resume(schedule_id))

    def trigger(self, schedule_id: str) -> None:
        """`Client.trigger`. Example: ``client.trigger("invoice-nightly")``."""
        self._call(self._client.trigger(schedule_id))

    def delete(self, schedule_id: str) -> None:
        """`Client.delete`. Example: ``client.delete("invoice-nightly")``."""
        self._call(self._client.delete(schedule_id))

    def set_calendar(self, name: str, calendar: Mapping[str, Any]) -> None:
        """`Client.set_calendar`."""
        self._call(self._client.set_calendar(name, calendar))

    def delete_calendar(self, name: str) -> None:
        """`Client.delete_calendar`."""
        self._call(self._client.delete_calendar(name))

    def pause_rate_limit(
        self,
        key: str,
        *,
        until: Instant | timedelta | None = None,
        note: str | None = None,
        by: str | None = None,
    ) -> None:
        """`Client.pause_rate_limit`."""
        self._call(self._client.pause_rate_limit(key, until=until, note=note, by=by))

    def resume_rate_limit(self, key: str) -> None:
        """`Client.resume_rate_limit`."""
        self._call(self._client.resume_rate_limit(key))

    def rate_limit_pauses(self) -> dict[str, dict[str, Any]]:
        """`Client.rate_limit_pauses`."""
        return self._call(self._client.rate_limit_pauses())

    def calendars(self) -> dict[str, dict[str, Any]]:
        """`Client.calendars`."""
        return self._call(self._client.calendars())

    def cancel(self, run_id: str, reason: str | None = None) -> None:
        """`Client.cancel`. Example: ``client.cancel(run_id, "bad input file")``."""
        self._call(self._client.cancel(run_id, reason))

    def backfill(
        self,
        schedule_id: str,
        start: Instant,
        end: Instant,
        *,
        reprocess: str = "missing",
        max_parallel: int | None = None,
        backfill_id: str | None = None,
        history_db: str | None = None,
    ) -> BackfillSent:
        """`Client.backfill`. Example: ``client.backfill("nightly", t1, t2, max_parallel=4)``."""
        return self._call(
            self._client.backfill(
                schedule_id,
                start,
                end,
                reprocess=reprocess,
                max_parallel=max_parallel,
                backfill_id=backfill_id,
                history_db=history_db,
            )
        )

    def cancel_backfill(
        self,
        schedule_id: str,
        backfill_id: str,
        *,
        running: bool = False,
        reason: str | None = None,
    ) -> None:
        """`Client.cancel_backfill`. Example: ``client.cancel_backfill("nightly", "fix-oct")``."""
        self._call(
            self._client.cancel_backfill(schedule_id, backfill_id, running=running, reason=reason)
        )

    def backfill_status(self, schedule_id: str) -> dict[str, Any] | None:
        """`Client.backfill_status`. Example: ``client.backfill_status("nightly")``."""
        return self._call(self._client.backfill_status(schedule_id))

    def replay(self, run_id: str) -> None:
        """`Client.replay`. Example: ``client.replay(outcome.run_id)``."""
        self._call(self._client.replay(run_id))

    def upsert_dag(
        self,
        dag_id: str,
        spec: Spec,
        tasks: Mapping[str, Task],
        *,
        max_active_runs: int | None = None,
        misfire: Misfire | None = None,
        dst: Dst | None = None,
        spread_s: int | None = None,
        retry: Retry | None = None,
        timeout_s: int | None = None,
        start: Instant | None = None,
        end: Instant | None = None,
        deadline: Deadline | None = None,
    ) -> str:
        """`Client.upsert_dag`.

        Example: ``client.upsert_dag("etl", Cron("0 2 * * *"), {"extract": Task("etl.extract")})``.
        """
        return self._call(
            self._client.upsert_dag(
                dag_id,
                spec,
                tasks,
                max_active_runs=max_active_runs,
                misfire=misfire,
                dst=dst,
                spread_s=spread_s,
                retry=retry,
                timeout_s=timeout_s,
                start=start,
                end=end,
                deadline=deadline,
            )
        )

    def clear_dag(self, run_id: str, task: str) -> None:
        """`Client.clear_dag`. Example: ``client.clear_dag(dag_run_id, "load")``."""
        self._call(self._client.clear_dag(run_id, task))

    def list_schedules(self, fires: int = DEFAULT_FIRES) -> list[Schedule]:
        """`Client.list_schedules`. Example: ``ids = [s.id for s in client.list_schedules()]``."""
        return self._call(self._client.list_schedules(fires))

    def get_schedule(self, schedule_id: str, fires: int = DEFAULT_FIRES) -> Schedule | None:
        """`Client.get_schedule`. Example: ``client.get_schedule("fx-rates")``."""
        return self._call(self._client.get_schedule(schedule_id, fires))

    @staticmethod
    def next_fires(
        spec: Spec,
        n: int = DEFAULT_FIRES,
        *,
        after: Instant | None = None,
        schedule_id: str = "next-fires",
        dst: Dst | None = None,
        spread_s: int | None = None,
    ) -> list[datetime]:
        """`Client.next_fires` (needs no connection).

        Example: ``SyncClient.next_fires(Every("90s"), 3)``.
        """
        return next_fires(spec, n, after=after, schedule_id=schedule_id, dst=dst, spread_s=spread_s)

    def wait_for(
        self, run_id: str, timeout: float | None = None, *, since: Instant | None = None
    ) -> RunOutcome:
        """`Client.wait_for`. Example: ``outcome = client.wait_for(run_id, timeout=60)``."""
        return self._call(self._client.wait_for(run_id, timeout, since=since))

    def results(
        self, schedule: str | None = None, since: Instant | None = None, *, progress: bool = False
    ) -> Iterator[Result]:
        """`Client.results`, as a blocking iterator; closing it (or breaking out of a
        ``for``) stops following.

        Example::

            for result in client.results(schedule="fx-rates"):
                print(result.status)
        """
        stream = self._client.results(schedule, since, progress=progress)
        try:
            while True:
                try:
                    yield self._call(_next(stream))
                except StopAsyncIteration:
                    return
        finally:
            if not self._loop.is_closed() and self._thread.is_alive():
                self._call(stream.aclose())


async def _next(stream: AsyncIterator[Result]) -> Result:
    return await anext(stream)
