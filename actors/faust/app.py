"""A Faust app on kafkron's broker, and the namespace's topics declared on it.

`kafkron_app` makes a ``faust.App`` whose consumer reads committed records only
(`actors.faust.transport`) with Faust's default at-least-once processing, so
offsets are committed after the agents handled the records. `declare_topics`
declares ``{ns}.runs``, ``results``, ``dlq``, ``rejected`` and ``commands`` with the
key and value serializers of the contract: the schedule id as a UTF-8 string key
(a rejection keeps its original key as bytes), the values as the typed records of
`actors.faust.records`, commands as the exact bytes `actors.faust.commands` checked.
A record that does not decode is logged, counted and skipped, never thrown into an
agent (`actors.faust.undecodable`).

The app connects with the process's client security, read from the same place as
every other kafkron client (`topics.security`: ``KAFKRON_SECURITY_PROTOCOL``,
``KAFKRON_SASL_*``, ``KAFKRON_SSL_CAFILE`` or ``KAFKRON_CLIENT_CONFIG``), turned into
Faust's ``broker_credentials`` (`broker_credentials`). Its principal needs Read on
the topics it consumes and on its group (the app id), plus what Faust itself uses
(its tables' changelog topics).

Faust tables must be partitioned like the streams that update them (a table's
changelog partition is the partition of the event that changed it), so give the
app the namespace's shard count (`topics.admin.shard_count`) as
``topic_partitions``; `kafkron_app` takes it as ``partitions``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faust

from actors.faust import transport
from actors.faust.records import (
    AlertRecord,
    CalendarRecord,
    DeadLetterRecord,
    RejectedRecord,
    ResultRecord,
    RunRecord,
)
from actors.faust.serializers import (
    alert_codec,
    calendar_codec,
    dead_letter_codec,
    rejected_codec,
    result_codec,
    run_codec,
)
from actors.faust.undecodable import SkippingTopic
from topics.names import Settings, TopicKind
from topics.security import ClientSecurity, client_kwargs, current


def broker_urls(settings: Settings) -> list[str]:
    """``kafkron://host:port`` per bootstrap server: the read-committed transport."""
    hosts = [host.strip() for host in settings.bootstrap.split(",") if host.strip()]
    return [f"{transport.SCHEME}://{host}" for host in hosts]


def broker_credentials(security: ClientSecurity) -> Any:
    """Faust's credentials for `security`; None for PLAINTEXT.

    The TLS context is the one every kafkron client builds (`client_kwargs`), so the
    Faust app trusts exactly the CA the scheduler and the workers trust.
    """
    kwargs = client_kwargs(security)
    if security.uses_sasl:
        return faust.SASLCredentials(
            username=security.username,
            password=security.password,
            mechanism=security.mechanism,
            ssl_context=kwargs.get("ssl_context"),
        )
    if security.uses_tls:
        return faust.SSLCredentials(kwargs["ssl_context"])
    return None


def kafkron_app(
    app_id: str,
    settings: Settings,
    *,
    partitions: int,
    data_dir: str | Path | None = None,
    **options: Any,
) -> faust.App:
    """A Faust app reading ``settings``' broker with read_committed isolation.

    ``app_id`` is the consumer group and prefixes the app's own topics (table
    changelogs); ``partitions`` is the namespace's shard count. ``options`` go to
    ``faust.App`` as they are (``web_enabled=False``, ``store=...``, ...); without
    ``broker_credentials`` the process's client security is used (see the module doc).
    """
    if partitions < 1:
        raise ValueError(f"partitions: expected the namespace's shard count, got {partitions}")
    if data_dir is not None:
        Path(data_dir).mkdir(parents=True, exist_ok=True)  # Faust's worker expects it
        options["datadir"] = str(data_dir)
    if "broker_credentials" not in options:
        credentials = broker_credentials(current())
        if credentials is not None:
            options["broker_credentials"] = credentials
    return faust.App(
        app_id,
        broker=broker_urls(settings),
        topic_partitions=partitions,
        **options,
    )


@dataclass(frozen=True, slots=True)
class NamespaceTopics:
    """The namespace's topics as Faust topics (subscribe agents to them, send to them)."""

    runs: faust.TopicT
    """Values: `RunRecord`. Runs of aborted transactions (clock probes) are never seen."""
    results: faust.TopicT
    """Values: `ResultRecord`; one visible result per (run_id, attempt)."""
    dlq: faust.TopicT
    """Values: `DeadLetterRecord`."""
    rejected: faust.TopicT
    """Keys: the refused record's original key (bytes). Values: `RejectedRecord`."""
    alerts: faust.TopicT
    """Values: `AlertRecord`: deadline alerts (one ``deadline_missed`` per late run)."""
    calendars: faust.TopicT
    """Keys: the calendar's name. Values: `CalendarRecord`, or None for a deletion
    (compacted, one partition: read it from the beginning for every calendar)."""
    commands: faust.TopicT
    """Keys and values as bytes: send through `actors.faust.commands.send_command`."""


def declare_topics(app: faust.App, settings: Settings) -> NamespaceTopics:
    """Declare the namespace's topics on ``app``; refuses an app that reads uncommitted.

    Every topic is a `SkippingTopic`: a record that does not decode is skipped and
    counted in `actors.faust.undecodable_records`, and the agent goes on.

    Isolation is a property of the app's consumer, not of a topic, so the app must
    come from `kafkron_app` or name its broker ``kafkron://...``.
    """
    scheme = app.conf.broker_consumer[0].scheme
    if scheme != transport.SCHEME:
        raise ValueError(
            f"broker: the app reads {scheme}://, which Faust consumes read_uncommitted "
            "(results of aborted transactions would reach your agents); make the app with "
            "actors.faust.kafkron_app(...) or give it broker='kafkron://host:port'"
        )

    def topic(
        kind: TopicKind, key_type: type, value_type: type, codec: Any, allow_empty: bool = False
    ) -> faust.TopicT:
        # What app.topic(...) builds, with the class that skips undecodable records.
        return SkippingTopic(
            app,
            topics=[settings.topic(kind)],
            key_type=key_type,
            key_serializer="raw",
            value_type=value_type,
            value_serializer=codec,
            allow_empty=allow_empty,
        )

    return NamespaceTopics(
        runs=topic(TopicKind.RUNS, str, RunRecord, run_codec),
        results=topic(TopicKind.RESULTS, str, ResultRecord, result_codec),
        dlq=topic(TopicKind.DLQ, str, DeadLetterRecord, dead_letter_codec),
        rejected=topic(TopicKind.REJECTED, bytes, RejectedRecord, rejected_codec),
        alerts=topic(TopicKind.ALERTS, str, AlertRecord, alert_codec),
        # A deletion is a tombstone: the agent gets None for it.
        calendars=topic(TopicKind.CALENDARS, str, CalendarRecord, calendar_codec, True),
        commands=topic(TopicKind.COMMANDS, bytes, bytes, "raw"),
    )
