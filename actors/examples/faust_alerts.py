"""Alerts, failure counts and replays from kafkron's topics, as a Faust app.

Three agents on one namespace (`KAFKRON_NAMESPACE`, brokers `KAFKRON_BOOTSTRAP`):

1. **alert**: each new dead letter in ``{ns}.dlq`` prints an alert, or POSTs it as
   JSON to ``KAFKRON_ALERT_WEBHOOK``. Once per dead letter: the letters already
   alerted are kept in a table (its changelog survives restarts), so a letter read
   again after a restart (Faust commits offsets after processing, at least once) is
   not alerted again. The webhook also receives the letter's id as
   ``Idempotency-Key``, for the one case a table cannot cover: a crash between
   the POST and the table's write.
2. **count_failures**: a tumbling one-hour table of failed attempts (``failed`` and
   ``timed_out`` results) per job, ``schedule_id`` or ``schedule_id/task`` for a DAG
   task, in the hour of the result's timestamp. Each ``(run_id, attempt)`` is counted
   once even when Faust delivers its result again (a second table remembers them).
3. **replay**: dead letters of one job (``KAFKRON_REPLAY_JOB``, the job name) are
   replayed with a ``dlq.replay`` command once the health check passes (HTTP 2xx from
   ``KAFKRON_HEALTH_URL``, checked every 5 s). A letter waiting for the upstream is
   kept in a table, not held in the stream: Faust waits for every record in flight
   before a rebalance or a stop, so an agent blocked on an upstream would stall the
   whole group. Every 5 s the leader sends a tick to each partition of an internal
   topic partitioned like ``{ns}.dlq``; the owner of that partition checks health and
   replays the letters waiting there. A letter already replayed is remembered and not
   replayed twice.

Run it against the local broker, from the checkout, with the extra installed
(``pip install -e '.[faust]'``)::

    KAFKRON_REPLAY_JOB=billing.always_fails KAFKRON_HEALTH_URL=http://127.0.0.1:8000/ \\
        python -m actors.examples.faust_alerts worker -l info --without-web

Tests build the same agents with `build` and their own alert sink and health check.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import faust

from actors.faust import (
    DeadLetterRecord,
    NamespaceTopics,
    ResultRecord,
    declare_topics,
    dlq_replay,
    kafkron_app,
    send_command,
)
from topics.admin import shard_count
from topics.names import Settings
from topics.vocabulary import RunStatus

FAILURE_STATUSES = frozenset((RunStatus.FAILED, RunStatus.TIMED_OUT))
WINDOW_S = 3600
WINDOW_EXPIRES = timedelta(days=2)
HEALTH_POLL_S = 5.0

AlertSink = Callable[[DeadLetterRecord], Awaitable[None]]
HealthCheck = Callable[[], Awaitable[bool]]


def failure_key(result: ResultRecord) -> str:
    """The job a failure is counted under: the schedule id, plus the task of a DAG run."""
    return result.schedule_id if result.task is None else f"{result.schedule_id}/{result.task}"


def alert_text(letter: DeadLetterRecord) -> str:
    error = letter.last_error
    reason = "no error recorded" if error is None else f"{error.type}: {error.message}"
    attempts = letter.last_attempt
    tried = f" after {attempts} attempts" if attempts is not None else ""
    return f"DEAD {letter.run_id} ({letter.job.name}){tried}: {reason}"


async def print_alert(letter: DeadLetterRecord) -> None:
    print(alert_text(letter), flush=True)


def webhook_alert(url: str, timeout_s: float = 10.0) -> AlertSink:
    """POST each alert as JSON; a non-2xx answer raises, so the letter is not marked sent."""

    async def post(letter: DeadLetterRecord) -> None:
        body = {"text": alert_text(letter), "dead_letter": letter.asdict()}
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.post(url, json=body, headers={"Idempotency-Key": letter.letter_id}) as reply,
        ):
            reply.raise_for_status()

    return post


def http_health(url: str, timeout_s: float = 5.0) -> HealthCheck:
    """Healthy while ``url`` answers 2xx."""

    async def check() -> bool:
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
                session.get(url) as reply,
            ):
                return 200 <= reply.status < 300
        except (aiohttp.ClientError, TimeoutError):
            return False

    return check


@dataclass
class AlertsApp:
    """The app, its topics and tables, and what the agents did in this process."""

    app: faust.App
    topics: NamespaceTopics
    failures: Any
    """The windowed table: ``failures[job].now()`` is this hour's count."""
    alerted: Any
    replayed: Any
    letters_seen: list[str] = field(default_factory=list)
    """Letter ids the alert agent received, duplicates included (for tests and logs)."""
    replays_sent: list[str] = field(default_factory=list)

    def failure_counts(self) -> dict[tuple[str, int], int]:
        """Every window of the failure table: ``(job, window start in s)`` to its count."""
        counts: dict[tuple[str, int], int] = {}
        for (job, (start_s, _end_s)), count in self.failures.table.items():
            if count:
                counts[(job, int(start_s))] = count
        return counts


def build(
    settings: Settings,
    *,
    partitions: int,
    app_id: str | None = None,
    alert: AlertSink = print_alert,
    replay_job: str | None = None,
    healthy: HealthCheck | None = None,
    health_poll_s: float = HEALTH_POLL_S,
    data_dir: str | Path | None = None,
    **options: Any,
) -> AlertsApp:
    """The three agents on ``settings``' namespace; ``partitions`` is its shard count.

    ``replay_job`` None leaves the replay agent idle; ``healthy`` None means always.
    ``options`` go to ``faust.App`` (tests pass ``web_enabled=False``).
    """
    app = kafkron_app(
        app_id or f"{settings.namespace}-alerts",
        settings,
        partitions=partitions,
        data_dir=data_dir,
        **options,
    )
    topics = declare_topics(app, settings)
    failures = (
        app.Table("failures-per-hour", default=int)
        .tumbling(WINDOW_S, expires=WINDOW_EXPIRES)
        .relative_to_stream()
    )
    # The failures already counted, windowed like the counts so that it expires with them
    # (a redelivered result has the same timestamp, so it falls in the same window).
    counted = (
        app.Table("counted-attempts", default=bool)
        .tumbling(WINDOW_S, expires=WINDOW_EXPIRES)
        .relative_to_stream()
    )
    # Keyed by letter id; the value is only "present".
    alerted = app.Table("alerted", default=bool)
    replayed = app.Table("replayed", default=bool)
    pending = app.Table("pending-replays", default=None)
    state = AlertsApp(app, topics, failures, alerted, replayed)

    @app.agent(topics.dlq, name="alert")
    async def alert_agent(letters: faust.StreamT[DeadLetterRecord]) -> None:
        async for letter in letters:
            state.letters_seen.append(letter.letter_id)
            if alerted[letter.letter_id]:
                continue  # read again after a restart: alerted already
            await alert(letter)
            alerted[letter.letter_id] = True

    @app.agent(topics.results, name="count_failures")
    async def count_agent(results: faust.StreamT[ResultRecord]) -> None:
        async for result in results:
            if result.status not in FAILURE_STATUSES:
                continue
            # kafkron makes one result visible per (run_id, attempt); Faust may deliver
            # it again after a restart or rebalance, so count each pair once.
            attempt_id = f"{result.run_id}#{result.attempt}"
            if counted[attempt_id].current():
                continue
            counted[attempt_id] = True
            failures[failure_key(result)] += 1

    # Replays wait for the health check without holding the dlq stream: a letter to
    # replay is written to the `pending` table (in the letter's partition, so its owner
    # keeps it across restarts); the leader sends one tick per partition every
    # `health_poll_s` to a topic partitioned like the dlq, and the owner of that
    # partition replays its pending letters once the upstream is healthy.
    ticks = app.topic(
        f"{app.conf.id}-replay-ticks", internal=True, partitions=partitions, value_type=int
    )

    @app.agent(topics.dlq, name="replay")
    async def replay_agent(letters: faust.StreamT[DeadLetterRecord]) -> None:
        async for letter in letters:
            wanted = replay_job is not None and letter.job.name == replay_job
            event = letters.current_event
            if wanted and event is not None and not replayed[letter.letter_id]:
                pending[letter.letter_id] = [letter.run_id, event.message.partition]

    @app.timer(health_poll_s, on_leader=True)
    async def tick() -> None:
        for partition in range(partitions):
            await ticks.send(value=partition, partition=partition)

    @app.agent(ticks, name="replay_when_healthy")
    async def replay_pending(stream: faust.StreamT[int]) -> None:
        async for partition in stream:
            waiting = [(k, run_id) for k, (run_id, p) in pending.items() if p == partition]
            if not waiting or (healthy is not None and not await healthy()):
                continue
            for letter_id, run_id in waiting:
                await send_command(topics.commands, dlq_replay(run_id))
                print(f"REPLAY {run_id}: upstream healthy", flush=True)
                replayed[letter_id] = True
                del pending[letter_id]
                state.replays_sent.append(letter_id)

    return state


def _from_env(environ: Mapping[str, str]) -> AlertsApp:
    settings = Settings.from_env()
    webhook = environ.get("KAFKRON_ALERT_WEBHOOK")
    health_url = environ.get("KAFKRON_HEALTH_URL")
    return build(
        settings,
        partitions=asyncio.run(shard_count(settings)),
        alert=webhook_alert(webhook) if webhook else print_alert,
        replay_job=environ.get("KAFKRON_REPLAY_JOB") or None,
        healthy=http_health(health_url) if health_url else None,
        data_dir=environ.get("KAFKRON_FAUST_DATA_DIR") or ".kafkron/faust",
    )


def main() -> None:
    """``python -m actors.examples.faust_alerts worker -l info`` (Faust's own command line)."""
    with contextlib.suppress(KeyboardInterrupt):
        _from_env(os.environ).app.main()


if __name__ == "__main__":
    main()
