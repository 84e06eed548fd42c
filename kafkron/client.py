"""`Client`: everything the CLI does, from an asyncio program.

One client holds one Kafka producer (commands) and one consumer (results, dead
letters and the changelog, `kafkron.reading`) for its life, both made from the
same `Settings` and security settings as every kafkron client
(`topics.clients`). Commands are built and validated by the one builder of
commands (`topics.command_builders`): a mistake raises `InvalidCommand` naming the
field before anything is sent. What an update sends is `kafkron.updates`; how the
outcome topics are followed, `kafkron.following`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Mapping
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Unpack

import orjson
from aiokafka import AIOKafkaProducer

from actors.sending import produce_commands, started_producer
from actors.shard.state import ScheduleState, decode_schedule
from actors.views.backfill_status import backfill_json
from actors.views.schedules import latest_states
from actors.views.tail import Record
from kafkron import backfills, following
from kafkron.backfills import BackfillSent
from kafkron.outcomes import RunOutcome
from kafkron.reading import Reader
from kafkron.schedules import DEFAULT_FIRES, Schedule, next_fires, schedules_of
from kafkron.updates import updated
from topics import calendar_builders, ratelimit_builders
from topics import command_builders as build
from topics.alerts import Deadline
from topics.calendar_days import calendar_names
from topics.closing import stop_producer
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
from topics.names import Settings, TopicKind
from topics.schedule_fields import ScheduleFields


class Client:
    """kafkron from asyncio: schedules, DAGs, runs, results and dead letters.

    Made from ``Settings.from_env()`` unless given settings (``KAFKRON_NAMESPACE``,
    ``KAFKRON_BOOTSTRAP``, and the ``KAFKRON_SECURITY_PROTOCOL``/``SASL``/``SSL``
    settings every kafkron client reads). Use it as an async context manager: it
    connects on entry and closes its producer and consumer on exit.

    Example::

        async with Client() as client:
            await client.create_schedule("fx-rates", Every("5m"), "billing.fx_rates")
            await client.trigger("fx-rates")
    """

    def __init__(self, settings: Settings | None = None, *, client_id: str | None = None) -> None:
        self.settings = settings or Settings.from_env()
        """The namespace and brokers this client talks to."""
        self._client_id = client_id or f"{self.settings.namespace}-client"
        self._producer: AIOKafkaProducer | None = None
        self._reader = Reader(self.settings, self._client_id)

    async def __aenter__(self) -> Client:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect (done by ``async with``); `SendError` or `ReadError` if Kafka cannot be
        reached or the namespace's topics are missing.

        Example: ``client = Client(); await client.start()`` (then ``await client.close()``).
        """
        if self._producer is None:
            self._producer = await started_producer(self.settings, self._client_id)
        try:
            await self._reader.start()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Close the producer and the consumer (bounded; done by ``async with``).

        Example: ``await client.close()``.
        """
        await self._reader.close()
        if self._producer is not None:
            await stop_producer(self._producer, "stopping the client's producer")
            self._producer = None

    # --- commands -------------------------------------------------------------------

    async def send(self, *commands: CommandRecord) -> None:
        """Produce built commands (`topics.command_builders`) and wait for Kafka's acks.

        Example::

            await client.send(schedule_pause("a"), schedule_pause("b"))
        """
        if self._producer is None:
            raise RuntimeError("the client is not started; use `async with Client() as client`")
        records = [(command.key, command.value) for command in commands]
        await produce_commands(self._producer, self.settings, records)

    async def create_schedule(
        self,
        schedule_id: str,
        spec: Spec,
        job: str | None = None,
        **fields: Unpack[ScheduleFields],
    ) -> str:
        """Create (or replace) a schedule: ``schedule.upsert``. Returns its id.

        What runs is ``job`` (a registered job name) with ``args``, or ``target`` (a
        `KafkaTarget` record the shard writes, or an `HttpTarget` call). The other
        keyword arguments are the command's fields (`ScheduleFields` says each); None
        leaves a field to its default.

        Example::

            await client.create_schedule(
                "invoice-nightly", Cron("0 0 * * *", tz="Europe/London"),
                "billing.invoice_nightly", args={"region": "eu"},
                retry=Retry(max_attempts=3), timeout_s=1800)
            await client.create_schedule(
                "orders-due", Every("1h"),
                target=KafkaTarget("orders.due", value={"due": "{scheduled_at}"}))
        """
        await self.send(
            build.schedule_upsert(
                schedule_id,
                spec,
                job,
                **fields,
            )
        )
        return schedule_id

    async def update(
        self,
        schedule_id: str,
        *,
        spec: Spec | None = None,
        job: str | None = None,
        **fields: Unpack[ScheduleFields],
    ) -> None:
        """Change some fields of an existing schedule; the others keep their values.

        Reads the definition its shard keeps in the changelog, replaces the fields
        given (a part such as ``retry`` replaces the whole part; ``job`` or
        ``target`` replaces what runs) and sends the result as a ``schedule.upsert``
        (`kafkron.updates`). `LookupError` if there is no such schedule. Two updates
        racing each other: the later upsert wins whole.

        Example: ``await client.update("fx-rates", spec=Every("10m"), timeout_s=120)``.
        """
        current = await self.get_schedule(schedule_id)
        if current is None:
            raise LookupError(f"no schedule {schedule_id!r} in {self._changelog}")
        await self.send(
            updated(
                current,
                spec=spec,
                job=job,
                **fields,
            )
        )

    async def pause(
        self,
        schedule_id: str,
        *,
        note: str | None = None,
        until: datetime | str | timedelta | None = None,
        after_current: bool | None = None,
        by: str | None = None,
    ) -> None:
        """Stop a schedule (or DAG) firing: ``schedule.pause``.

        ``note`` says why (shown by ``kafkron ls`` and the console, with ``by``).
        With ``until`` (an instant, or a `timedelta` from now) it resumes by itself
        then, exactly once, and its misfire policy decides about what came due
        meanwhile; without, it lasts until `resume`. ``after_current``: pause once
        the run in flight has ended.

        Example: ``await client.pause("invoice-nightly", note="db migration",
        until=timedelta(hours=2))``.
        """
        command = build.schedule_pause(
            schedule_id, note=note, until=until, after_current=after_current, by=by
        )
        await self.send(command)

    async def resume(self, schedule_id: str) -> None:
        """Fire again from the next occurrence after now: ``schedule.resume``.

        Example: ``await client.resume("invoice-nightly")``.
        """
        await self.send(build.schedule_resume(schedule_id))

    async def trigger(self, schedule_id: str) -> None:
        """Fire once now, besides the spec: ``schedule.trigger``.

        Example: ``await client.trigger("invoice-nightly")``.
        """
        await self.send(build.schedule_trigger(schedule_id))

    async def delete(self, schedule_id: str) -> None:
        """Forget a schedule (or DAG); its pending retries stop: ``schedule.delete``.

        Example: ``await client.delete("invoice-nightly")``.
        """
        await self.send(build.schedule_delete(schedule_id))

    async def set_calendar(self, name: str, calendar: Mapping[str, Any]) -> None:
        """Create or replace a named calendar (``calendar.upsert``): its days (``tz``,
        ``dates``, ``ranges``, ``weekdays``); every schedule whose spec excludes it by
        name (``AnyOf(..., exclude=["uk-holidays"])``) is re-armed on every shard.

        Example: ``await client.set_calendar("uk-holidays", {"tz": "Europe/London",
        "dates": ["2026-12-25", "2026-12-28"]})``.
        """
        await self.send(calendar_builders.calendar_upsert(name, calendar))

    async def delete_calendar(self, name: str) -> None:
        """Forget a named calendar (``calendar.delete``); a shard whose schedules name
        it refuses (``{ns}.rejected`` names them). Schedules naming a missing calendar
        wait for it.

        Example: ``await client.delete_calendar("uk-holidays")``.
        """
        await self.send(calendar_builders.calendar_delete(name))

    async def pause_rate_limit(
        self,
        key: str,
        *,
        until: Instant | timedelta | None = None,
        note: str | None = None,
        by: str | None = None,
    ) -> None:
        """Hold every run of the rate-limit key ``key`` on its worker (``ratelimit.pause``)
        until ``until`` (an instant, or a `timedelta` from now) or `resume_rate_limit`;
        their deadlines still apply (docs/DESIGN.md §8.5).

        Example: ``await client.pause_rate_limit("payments", until=timedelta(minutes=30),
        note="provider maintenance")``.
        """
        await self.send(ratelimit_builders.ratelimit_pause(key, until=until, note=note, by=by))

    async def resume_rate_limit(self, key: str) -> None:
        """Let the runs of ``key`` start again, at its rate (``ratelimit.resume``).

        Example: ``await client.resume_rate_limit("payments")``.
        """
        await self.send(ratelimit_builders.ratelimit_resume(key))

    async def rate_limit_pauses(self) -> dict[str, dict[str, Any]]:
        """The paused rate-limit keys, key -> ``{until, note, at, by}``, as
        ``{ns}.ratelimits`` holds them (a pause past its ``until`` is listed until
        resumed, and no longer holds).

        Example: ``await client.rate_limit_pauses()``.
        """
        from actors.views.ratelimits import read_pauses

        return {key: pause.json() for key, pause in (await read_pauses(self.settings)).items()}

    async def calendars(self) -> dict[str, dict[str, Any]]:
        """The namespace's named calendars, name -> days, as ``{ns}.calendars`` holds them.

        Example: ``await client.calendars()``.
        """
        from actors.views.calendars import read_calendars

        return await read_calendars(self.settings)

    async def cancel(self, run_id: str, reason: str | None = None) -> None:
        """Stop a run in flight: ``run.cancel``. Its attempt ends ``cancelled`` with
        ``reason`` as the error message and is never retried.

        Example: ``await client.cancel("invoice-nightly@2026-10-10T00:00:00.000Z", "bad file")``.
        """
        await self.send(build.run_cancel(run_id, reason))

    async def backfill(
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
        """Fill or re-run ``[start, end)`` of a schedule, as ``kafkron backfill`` does:
        planned from the recorder's database (``history_db``, default as ``kafkron
        history``), sent as ``schedule.backfill`` (docs/DESIGN.md §6.9).

        Example::

            sent = await client.backfill("invoice-nightly", "2026-09-01T00:00:00Z",
                                         "2026-10-01T00:00:00Z", max_parallel=4)
            print(sent.backfill_id, sent.to_fire)
        """
        state = await self._schedule_state(schedule_id)
        # A spec naming calendars is planned by their days as the shards know them.
        names = calendar_names(orjson.loads(state.def_bytes).get("spec") or {})
        calendars = await self.calendars() if names else None
        commands, sent = await asyncio.to_thread(
            backfills.planned,
            state,
            start,
            end,
            reprocess=reprocess,
            max_parallel=max_parallel,
            backfill_id=backfill_id,
            history_db=history_db,
            calendars=calendars,
        )
        if commands:
            await self.send(*commands)
        return sent

    async def cancel_backfill(
        self,
        schedule_id: str,
        backfill_id: str,
        *,
        running: bool = False,
        reason: str | None = None,
    ) -> None:
        """Fire nothing more of a backfill (``schedule.backfill_cancel``); with
        ``running``, cancel its runs in flight too.

        Example: ``await client.cancel_backfill("invoice-nightly", sent.backfill_id)``.
        """
        await self.send(
            build.backfill_cancel(schedule_id, backfill_id, running=running, reason=reason)
        )

    async def backfill_status(self, schedule_id: str) -> dict[str, Any] | None:
        """The schedule's backfill as ``kafkron backfill status`` shows it (done, running,
        left, an ETA; ``failed`` is None: that is the history's), None if it never had one.

        Example: ``status = await client.backfill_status("invoice-nightly")``.
        """
        state = await self._schedule_state(schedule_id)
        if state.backfill is None:
            return None
        return backfill_json(state, int(time.time() * 1000))

    async def _schedule_state(self, schedule_id: str) -> ScheduleState:
        partition = following.partition_of(self._reader, TopicKind.SCHEDULES, schedule_id)
        read = await self._reader.read_changelog(partition)
        value = latest_states([Record(p, o, 0, k, v) for p, o, k, v in read]).get(schedule_id)
        if value is None:
            raise LookupError(f"no schedule {schedule_id!r} in {self._changelog}")
        return decode_schedule(value)

    async def replay(self, run_id: str) -> None:
        """Run a dead-lettered run again, attempts afresh: ``dlq.replay``.

        Example: ``await client.replay(outcome.run_id)`` after fixing what failed.
        """
        await self.send(build.dlq_replay(run_id))

    async def upsert_dag(
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
        """Create or replace a DAG: ``dag.upsert``. Returns its id.

        Example::

            await client.upsert_dag("nightly-etl", Cron("0 2 * * *"), {
                "extract": Task("etl.extract"),
                "load": Task("etl.load", after=["extract"]),
            })
        """
        await self.send(
            build.dag_upsert(
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
        return dag_id

    async def clear_dag(self, run_id: str, task: str) -> None:
        """Run ``task`` of a DAG run again, and what runs after it: ``dag.clear``.

        Example: ``await client.clear_dag("nightly-etl@2026-10-10T02:00:00.000Z", "load")``.
        """
        await self.send(build.dag_clear(run_id, task))

    # --- reading --------------------------------------------------------------------

    @property
    def _changelog(self) -> str:
        return self.settings.topic(TopicKind.SCHEDULES)

    async def list_schedules(self, fires: int = DEFAULT_FIRES) -> list[Schedule]:
        """Every schedule and DAG as the changelog holds it, by id, each with its next
        ``fires`` fires (what ``kafkron ls`` shows).

        Example::

            for schedule in await client.list_schedules():
                print(schedule.id, schedule.next_fire, schedule.last_outcome)
        """
        return list((await self._schedules(None, fires)).values())

    async def get_schedule(self, schedule_id: str, fires: int = DEFAULT_FIRES) -> Schedule | None:
        """One schedule or DAG from the changelog (only its partition is read), None if
        there is none.

        Example: ``schedule = await client.get_schedule("invoice-nightly")``.
        """
        partition = following.partition_of(self._reader, TopicKind.SCHEDULES, schedule_id)
        return (await self._schedules(partition, fires)).get(schedule_id)

    async def _schedules(self, partition: int | None, fires: int) -> dict[str, Schedule]:
        read = await self._reader.read_changelog(partition)
        return schedules_of(
            [Record(p, offset, 0, key, value) for p, offset, key, value in read], fires
        )

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
        """The next ``n`` fires of ``spec`` after ``after`` (default now), by the
        schedulers' own code, as ``kafkron next`` prints them (`kafkron.next_fires`).

        Example: ``Client.next_fires(Cron("0 9 * * MON-FRI", tz="Europe/Paris"), 3)``.
        """
        return next_fires(spec, n, after=after, schedule_id=schedule_id, dst=dst, spread_s=spread_s)

    async def wait_for(
        self, run_id: str, timeout: float | None = None, *, since: Instant | None = None
    ) -> RunOutcome:
        """Wait until the run ``run_id`` has ended for good and return how (`RunOutcome`):
        its final result, with its dead letter if it was dead-lettered. A DAG run's id
        (``{dag}@{instant}``) waits for the DAG run's own result.

        Reads results (read_committed) from ``since`` (default: 10 minutes before the
        run's instant), so a run that ended before the call is found too.
        `TimeoutError` after ``timeout`` seconds (None: no limit).

        Example::

            outcome = await client.wait_for("fx-rates@2026-10-10T00:05:00.000Z", timeout=60)
            print(outcome.status, outcome.error)
        """
        return await following.wait_for(self._reader, run_id, timeout, since)

    def results(
        self,
        schedule: str | None = None,
        since: Instant | None = None,
        *,
        progress: bool = False,
    ) -> AsyncGenerator[Result, None]:
        """Every result (read_committed) of ``schedule`` (default: of every schedule)
        written from ``since`` on (default: from now), as it comes, in each partition's
        order; progress reports only with ``progress=True``. Runs until the loop
        breaks.

        Example::

            async for result in client.results(schedule="fx-rates"):
                print(result.run_id, result.attempt, result.status)
        """
        return following.results(self._reader, schedule, since, progress)
