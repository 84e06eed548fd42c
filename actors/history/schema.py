"""The SQLite schema of the history database.

Four tables mirror four topics, one summary table answers "what happened to each
run", and ``offsets`` records how far into each topic partition the database has
read. Offsets are written in the same SQLite transaction as the rows they produced,
so the database, not the consumer group, is the source of truth about where to
resume: a redelivered record is an upsert that changes nothing, and an empty
database means "read every topic from the beginning" (a rebuild).

Instants are ``INTEGER`` milliseconds since the epoch UTC, like everywhere else in
kafkron. Every row is keyed by what makes it unique on the wire:

- ``attempts``: one row per (run_id, attempt). The run record (from ``{ns}.runs``)
  fills the firing columns, the result record (from ``{ns}.results``) the outcome
  columns; either may arrive first, because the topics are read independently.
  A ``running`` progress report fills ``progress`` (its details, JSON) and
  ``progress_ms`` with the latest one, and never the outcome columns.
- ``dead_letters`` and ``rejections``: one row per record, keyed by the record's
  own position (partition, offset) in its topic, and unique by what they describe
  (a run's dead letter at one instant; the rejected command's own position).
- ``runs``: derived from the three above, one row per run_id, recomputed whenever
  one of its inputs changes. ``kafkron history`` reads only this and ``attempts``.
- ``alerts``: from ``{ns}.alerts``, one row per (run_id, deadline, type)
  (`actors.history.alerts`); the console's alerts page, ``kafkron alerts`` and
  ``kafkron slo`` read it.
- ``definitions`` and ``schedule_versions``: from ``{ns}.schedules``, each
  schedule's definition, pause and completion over time, one row per change
  (`actors.audit.versions`); ``kafkron audit`` judges each instant by them. They
  are kept through a rebuild of the same namespace: the changelog is compacted, so
  what they remember of older versions is in no topic any more.
- ``calendar_versions``: every record of ``{ns}.calendars`` (a named calendar's
  days, or null for a deletion) with its timestamp, kept through a rebuild too
  (`actors.audit.calendars`).

WAL mode lets ``kafkron history`` read while ``kafkron recorder`` writes.
"""

from __future__ import annotations

from actors.history.alerts import ALERTS_DDL

# 2: ``covers_to_ms`` and ``covers_count`` (a folded missed/skipped result's range,
# `topics.covers`) in ``attempts`` and ``runs``.
SCHEMA_VERSION = 2

# Pragmas applied to every connection: WAL for concurrent readers, NORMAL sync
# (WAL keeps the database consistent on power loss; at worst the last transactions
# are lost, and they are re-read from Kafka because their offsets were lost too).
PRAGMAS: tuple[str, ...] = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=OFF",
    "PRAGMA busy_timeout=5000",
)

ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("attempts", "progress", "TEXT"),
    ("attempts", "progress_ms", "INTEGER"),
    ("attempts", "covers_to_ms", "INTEGER"),
    ("attempts", "covers_count", "INTEGER"),
    ("runs", "covers_to_ms", "INTEGER"),
    ("runs", "covers_count", "INTEGER"),
    ("attempts", "counts", "TEXT"),
    ("attempts", "target", "TEXT"),
    ("attempts", "job_target", "TEXT"),
    ("runs", "target", "TEXT"),
    ("runs", "job_target", "TEXT"),
    ("dead_letters", "job_target", "TEXT"),
    ("attempts", "queue", "TEXT"),
    ("attempts", "flow_key", "TEXT"),
    ("attempts", "flow", "TEXT"),
)
"""Columns added after version 1 was released: a database made before them gets
them at open (``ALTER TABLE ... ADD COLUMN``). The progress columns need nothing
more, nor does ``counts`` (a DAG run's own result: its counts of task states, JSON;
null in a result recorded before it); the covers columns come with version 2, whose
older databases are refused until rebuilt (their folded results' ranges are re-read
from the topics), and the rebuild runs in the very tables these columns were added
to. The target columns need nothing more either: ``target`` is a result's own
``target`` (JSON: the topic and partition a Kafka target wrote, an HTTP target's
status), ``job_target`` where a target goes (``kafka:TOPIC``, ``POST URL``, from the
run, the result or the dead letter: `actors.display.target_text`); both null for a
job, and for a result recorded before targets existed (none carried one). The flow
columns need nothing more (`actors.history.flow_keys`): ``queue`` is a run record's
worker queue, ``flow_key`` its concurrency key (else its rate-limit key; the shard
rendered it), ``flow`` its limit and rate (JSON); null for an attempt recorded before
them, which the console's keys page then does not count."""

# Made after the added columns exist (an older database gets them at open first).
DDL_AFTER_COLUMNS: tuple[str, ...] = (
    # The attempts fired and not ended, the only rows the keys page reads: few, so a
    # partial index (a result takes its row out).
    "CREATE INDEX IF NOT EXISTS attempts_open ON attempts (flow_key, queue) WHERE status IS NULL",
)

DDL: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS meta (
        name  TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS offsets (
        topic       TEXT    NOT NULL,
        partition   INTEGER NOT NULL,
        next_offset INTEGER NOT NULL,
        PRIMARY KEY (topic, partition)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS attempts (
        run_id          TEXT    NOT NULL,
        attempt         INTEGER NOT NULL,
        schedule_id     TEXT    NOT NULL,
        task            TEXT,
        job_name        TEXT,
        scheduled_ms    INTEGER,
        fired_ms        INTEGER,
        deadline_ms     INTEGER,
        started_ms      INTEGER,
        finished_ms     INTEGER,
        status          TEXT,
        worker          TEXT,
        error_type      TEXT,
        error_message   TEXT,
        progress        TEXT,
        progress_ms     INTEGER,
        covers_to_ms    INTEGER,
        covers_count    INTEGER,
        counts          TEXT,
        target          TEXT,
        job_target      TEXT,
        PRIMARY KEY (run_id, attempt)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS dead_letters (
        partition       INTEGER NOT NULL,
        offset          INTEGER NOT NULL,
        run_id          TEXT    NOT NULL,
        schedule_id     TEXT    NOT NULL,
        task            TEXT,
        job_name        TEXT,
        error_type      TEXT,
        error_message   TEXT,
        attempts        INTEGER NOT NULL,
        dead_at_ms      INTEGER NOT NULL,
        job_target      TEXT,
        PRIMARY KEY (partition, offset)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS rejections (
        partition          INTEGER NOT NULL,
        offset             INTEGER NOT NULL,
        key                BLOB,
        reason             TEXT    NOT NULL,
        original           BLOB,
        original_topic     TEXT,
        original_partition INTEGER,
        original_offset    INTEGER,
        rejected_ms        INTEGER NOT NULL,
        PRIMARY KEY (partition, offset)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS runs (
        run_id          TEXT PRIMARY KEY,
        schedule_id     TEXT    NOT NULL,
        task            TEXT,
        job_name        TEXT,
        scheduled_ms    INTEGER,
        fired_ms        INTEGER,
        started_ms      INTEGER,
        finished_ms     INTEGER,
        status          TEXT    NOT NULL,
        attempts        INTEGER NOT NULL,
        worker          TEXT,
        error_type      TEXT,
        error_message   TEXT,
        dead_at_ms      INTEGER,
        covers_to_ms    INTEGER,
        covers_count    INTEGER,
        job_target      TEXT,
        target          TEXT
    )
    """,
    # A schedule's runs by instant, covering what the audit reads of each (status, a
    # folded range, a DAG's task), so an audit of a namespace never visits the table:
    # twice as fast over a day of 100k schedules. It replaces the index of the first
    # two columns alone (dropped at open; created then, once, on an older database).
    "DROP INDEX IF EXISTS runs_by_schedule",
    "CREATE INDEX IF NOT EXISTS runs_by_schedule_status ON runs "
    "(schedule_id, scheduled_ms, status, covers_to_ms, task)",
    "CREATE INDEX IF NOT EXISTS runs_by_time ON runs (scheduled_ms)",
    "CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, scheduled_ms)",
    "CREATE INDEX IF NOT EXISTS attempts_by_schedule ON attempts (schedule_id, scheduled_ms)",
    # A dead letter or rejection written twice (a producer retry outside a
    # transaction) is still one fact: the unique keys below make the copy replace it.
    "CREATE UNIQUE INDEX IF NOT EXISTS dead_letters_once ON dead_letters "
    "(run_id, attempts, dead_at_ms)",
    "CREATE UNIQUE INDEX IF NOT EXISTS rejections_once ON rejections "
    "(original_topic, original_partition, original_offset)",
    "CREATE INDEX IF NOT EXISTS rejections_by_time ON rejections (rejected_ms)",
    # Added after version 2, created at open like every table here (no rebuild): each
    # schedule's definitions over time, read from the changelog (`actors.audit.versions`),
    # which the audit judges each instant by (`actors.audit.walk`).
    """
    CREATE TABLE IF NOT EXISTS definitions (
        def_key  TEXT PRIMARY KEY,
        def      TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS schedule_versions (
        schedule_id   TEXT    NOT NULL,
        partition     INTEGER NOT NULL,
        offset        INTEGER NOT NULL,
        effective_ms  INTEGER NOT NULL,
        def_key       TEXT,
        paused        INTEGER NOT NULL,
        completed     TEXT,
        created       INTEGER NOT NULL,
        PRIMARY KEY (schedule_id, partition, offset)
    )
    """,
    # Added with named calendars (§5.7), created at open (no rebuild): every record of
    # ``{ns}.calendars`` with the instant it took effect (`actors.audit.calendars`), so
    # the audit judges each instant of a calendar-naming schedule by the calendar then
    # in effect. Kept through a rebuild, as the versions above: the topic is compacted.
    """
    CREATE TABLE IF NOT EXISTS calendar_versions (
        name          TEXT    NOT NULL,
        offset        INTEGER NOT NULL,
        effective_ms  INTEGER NOT NULL,
        calendar      TEXT,
        PRIMARY KEY (name, offset)
    )
    """,
    # The folded results that reach into a window from before it (the audit's one
    # look outside the window): few rows, so a partial index.
    "CREATE INDEX IF NOT EXISTS runs_folded ON runs (covers_to_ms) WHERE covers_to_ms IS NOT NULL",
    # Added later, created at open (no rebuild): the deadline alerts.
    *ALERTS_DDL,
)
