"""The history database: idempotent writes from the topics, queries for people.

Guarantees:

- **Idempotent.** Every write is an upsert keyed by what is unique on the wire
  (``(run_id, attempt)`` for runs and results, the record's own (partition, offset)
  for dead letters and rejections). Writing the same batch twice leaves the same
  database, so a redelivered record after a crash changes nothing.
- **Atomic with its offsets.** `HistoryStore.write` applies a batch of rows and the
  next offsets of the partitions they came from in one SQLite transaction. The
  recorder resumes from `HistoryStore.offsets`, so the database never holds a row
  whose offset it forgot, nor an offset whose rows it lost.
- **Order-free.** A result may be written before its run record (the topics are
  read independently); both halves of an attempt row are merged whichever comes
  first, and the ``runs`` summary is recomputed from all inputs each time.

The store knows nothing about Kafka or the wire format: the recorder turns records
into the row types below.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from actors.audit.calendars import CalendarRow
from actors.audit.versions import DefinitionRow, Head, VersionRow
from actors.history import alerts as alert_rows
from actors.history.flow_keys import TOP_KEYS, FlowView, open_flow
from actors.history.schema import ADDED_COLUMNS, DDL, DDL_AFTER_COLUMNS, PRAGMAS, SCHEMA_VERSION
from topics.alerts import Alert
from topics.vocabulary import RunStatus

RUNNING = "running"
DEAD_LETTERED = "dead_lettered"

# The order in which `kafkron history` lists runs: what needs a person first.
STATUS_RANK: Mapping[str, int] = {
    DEAD_LETTERED: 0,
    RunStatus.FAILED: 1,
    RunStatus.TIMED_OUT: 1,
    RunStatus.UPSTREAM_FAILED: 2,
    RunStatus.MISSED: 2,
    RunStatus.CANCELLED: 2,
    RUNNING: 3,
    RunStatus.SKIPPED: 4,
    RunStatus.SUCCEEDED: 5,
}
FAILURE_STATUSES = frozenset(
    {
        DEAD_LETTERED,
        RunStatus.FAILED,
        RunStatus.TIMED_OUT,
        RunStatus.UPSTREAM_FAILED,
        RunStatus.MISSED,
    }
)


class HistoryError(Exception):
    """The database cannot be used as asked; the message says what to do."""


@dataclass(frozen=True, slots=True)
class AttemptFired:
    """An attempt emitted to ``{ns}.runs``."""

    run_id: str
    attempt: int
    schedule_id: str
    task: str | None
    job_name: str
    scheduled_ms: int
    fired_ms: int
    deadline_ms: int | None
    job_target: str | None = None
    """Where a target goes (``POST URL``); None for a job (`actors.display.target_text`)."""
    queue: str | None = None
    """The run record's worker queue (`actors.history.flow_keys`)."""
    flow_key: str | None = None
    """Its concurrency key, else its rate-limit key, as the shard rendered it."""
    flow: str | None = None
    """Its limit and rate, JSON (`actors.history.flow_keys.flow_of`)."""


@dataclass(frozen=True, slots=True)
class AttemptFinished:
    """A result from ``{ns}.results`` (a worker's outcome, or a shard's missed/skipped)."""

    run_id: str
    attempt: int
    schedule_id: str
    task: str | None
    status: str
    scheduled_ms: int | None
    started_ms: int | None
    finished_ms: int | None
    worker: str | None
    error_type: str | None
    error_message: str | None
    covers_to_ms: int | None = None
    """A folded missed/skipped result: its last occurrence (its first is the run's)."""
    covers_count: int | None = None
    """A folded missed/skipped result: how many occurrences it stands for."""
    counts_json: str | None = None
    """A DAG run's own result: how many of its tasks ended in each state (JSON)."""
    target_json: str | None = None
    """A target's result: what it did (JSON, the result's ``target``)."""
    job_target: str | None = None
    """Where a Kafka target wrote (``kafka:TOPIC``): it has no run record to say so."""
    fired_ms: int | None = None
    """A Kafka target's fire (its result's start: the shard wrote it as it fired), for
    the lateness no run record gives."""


@dataclass(frozen=True, slots=True)
class AttemptProgress:
    """A ``running`` progress report from ``{ns}.results`` (``ctx.heartbeat(details)``)."""

    run_id: str
    attempt: int
    schedule_id: str
    task: str | None
    scheduled_ms: int | None
    started_ms: int | None
    worker: str | None
    details_json: str
    at_ms: int


@dataclass(frozen=True, slots=True)
class DeadLetterRow:
    """A record of ``{ns}.dlq`` at (partition, offset)."""

    partition: int
    offset: int
    run_id: str
    schedule_id: str
    task: str | None
    job_name: str | None
    error_type: str | None
    error_message: str | None
    attempts: int
    dead_at_ms: int
    job_target: str | None = None
    """Where the dead run's target goes; None for a job."""


@dataclass(frozen=True, slots=True)
class RejectionRow:
    """A record of ``{ns}.rejected`` at (partition, offset)."""

    partition: int
    offset: int
    key: bytes | None
    reason: str
    original: bytes | None
    original_topic: str | None
    original_partition: int | None
    original_offset: int | None
    rejected_ms: int


Row = (
    AttemptFired
    | AttemptFinished
    | AttemptProgress
    | DeadLetterRow
    | RejectionRow
    | DefinitionRow
    | VersionRow
    | CalendarRow
    | Alert
)


@dataclass(frozen=True, slots=True)
class RunView:
    """One run (all attempts of one run_id) as `kafkron history` shows it."""

    run_id: str
    schedule_id: str
    task: str | None
    job_name: str | None
    scheduled_ms: int | None
    fired_ms: int | None  # first attempt's firing instant
    started_ms: int | None  # latest attempt
    finished_ms: int | None  # latest attempt
    status: str
    attempts: int
    worker: str | None
    error_type: str | None
    error_message: str | None
    dead_at_ms: int | None
    covers_to_ms: int | None = None
    """As in `AttemptFinished`, of the latest result."""
    covers_count: int | None = None
    job_target: str | None = None
    """Where a target goes (``kafka:TOPIC``, ``POST URL``); None for a job."""
    target: str | None = None
    """The latest result's ``target`` (JSON): topic and partition, or HTTP status."""

    @property
    def duration_ms(self) -> int | None:
        if self.started_ms is None or self.finished_ms is None:
            return None
        return self.finished_ms - self.started_ms

    @property
    def lateness_ms(self) -> int | None:
        """How late the first attempt was fired after its scheduled instant."""
        if self.fired_ms is None or self.scheduled_ms is None:
            return None
        return self.fired_ms - self.scheduled_ms


@dataclass(frozen=True, slots=True)
class AttemptView:
    run_id: str
    attempt: int
    schedule_id: str
    task: str | None
    scheduled_ms: int | None
    fired_ms: int | None
    started_ms: int | None
    finished_ms: int | None
    status: str
    worker: str | None
    error_type: str | None
    error_message: str | None
    progress: str | None = None
    """The latest progress details (JSON text) while it ran, if the job reported any."""
    progress_ms: int | None = None
    covers_to_ms: int | None = None
    covers_count: int | None = None
    counts: str | None = None
    """A DAG run's own result: its counts of task states (JSON text)."""
    target: str | None = None
    """A target's result: what it did (JSON text of the result's ``target``)."""


def summarize(
    run_id: str, attempts: Sequence[AttemptView], dead_letters: Sequence[DeadLetterRow]
) -> RunView | None:
    """The run a person sees, from its attempts and its dead letters (pure).

    Status is the latest attempt's: its result if one arrived, else ``running``. A
    dead letter written after every attempt was fired makes it ``dead_lettered``;
    one followed by a newer attempt (a replay) does not.
    """
    if not attempts and not dead_letters:
        return None
    ordered = sorted(attempts, key=lambda a: a.attempt)
    latest = ordered[-1] if ordered else None
    finished = [a for a in ordered if a.status != RUNNING]
    fired = [a.fired_ms for a in ordered if a.fired_ms is not None]
    last_dl = max(dead_letters, key=lambda d: (d.dead_at_ms, d.offset), default=None)

    status = latest.status if latest is not None else RUNNING
    error_type = finished[-1].error_type if finished else None
    error_message = finished[-1].error_message if finished else None
    attempt_count = latest.attempt if latest is not None else 0
    dead_at_ms: int | None = None
    if last_dl is not None and (not fired or last_dl.dead_at_ms >= max(fired)):
        status = DEAD_LETTERED
        dead_at_ms = last_dl.dead_at_ms
        error_type = last_dl.error_type or error_type
        error_message = last_dl.error_message or error_message
        attempt_count = max(attempt_count, last_dl.attempts)

    first = ordered[0] if ordered else None
    scheduled = next((a.scheduled_ms for a in ordered if a.scheduled_ms is not None), None)
    return RunView(
        run_id=run_id,
        schedule_id=first.schedule_id if first else last_dl.schedule_id,  # type: ignore[union-attr]
        task=first.task if first else (last_dl.task if last_dl else None),
        job_name=last_dl.job_name if last_dl and last_dl.job_name else None,
        scheduled_ms=scheduled,
        fired_ms=min(fired) if fired else None,
        started_ms=latest.started_ms if latest else None,
        finished_ms=latest.finished_ms if latest else None,
        status=status,
        attempts=attempt_count,
        worker=latest.worker if latest else None,
        error_type=error_type,
        error_message=error_message,
        dead_at_ms=dead_at_ms,
        covers_to_ms=finished[-1].covers_to_ms if finished else None,
        covers_count=finished[-1].covers_count if finished else None,
        job_target=last_dl.job_target if last_dl else None,
        target=finished[-1].target if finished else None,
    )


_ATTEMPT_COLUMNS = (
    "run_id, attempt, schedule_id, task, scheduled_ms, fired_ms, started_ms, finished_ms, "
    "COALESCE(status, 'running'), worker, error_type, error_message, progress, progress_ms, "
    "covers_to_ms, covers_count, counts, target"
)
_RUN_COLUMNS = (
    "run_id, schedule_id, task, job_name, scheduled_ms, fired_ms, started_ms, finished_ms, "
    "status, attempts, worker, error_type, error_message, dead_at_ms, covers_to_ms, covers_count, "
    "job_target, target"
)
_DL_COLUMNS = (
    "partition, offset, run_id, schedule_id, task, job_name, error_type, error_message, "
    "attempts, dead_at_ms, job_target"
)


def _run_view(row: Iterable[Any]) -> RunView:
    return RunView(*row)


class HistoryStore:
    """An open history database. Use `open`; close with `close` (or ``async with``)."""

    def __init__(self, db: aiosqlite.Connection, path: Path, namespace: str | None) -> None:
        self._db = db
        self.path = path
        self.namespace = namespace

    @classmethod
    async def open(
        cls,
        path: Path | str,
        *,
        namespace: str | None = None,
        readonly: bool = False,
        reset: bool = False,
    ) -> HistoryStore:
        """Open (or create, unless ``readonly``) the database at ``path``.

        A database remembers the namespace it was built from; opening it for another
        namespace raises `HistoryError` rather than mixing two clusters' histories.
        ``reset`` empties it first (rows, offsets and namespace): a rebuild.
        """
        path = Path(path)
        if readonly:
            if not path.exists():
                raise HistoryError(
                    f"no history database at {path}; run `kafkron recorder` to build one, "
                    "or pass --db (env KAFKRON_HISTORY_DB) to point at it"
                )
            db = await aiosqlite.connect(f"file:{path}?mode=ro", uri=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = await aiosqlite.connect(path)
        try:
            for pragma in PRAGMAS[1:] if readonly else PRAGMAS:
                await db.execute(pragma)
            if not readonly:
                for statement in DDL:
                    await db.execute(statement)
                for table, column, kind in ADDED_COLUMNS:
                    info = await db.execute_fetchall(f"PRAGMA table_info({table})")
                    if column not in {str(row[1]) for row in info}:
                        await db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                for statement in DDL_AFTER_COLUMNS:
                    await db.execute(statement)
                await db.commit()
            store = cls(db, path, None)
            if reset and not readonly:
                stored = await db.execute_fetchall(
                    "SELECT value FROM meta WHERE name = 'namespace'"
                )
                same = namespace is not None and [tuple(r) for r in stored] == [(namespace,)]
                # The definitions over time outlive a rebuild of the same namespace:
                # the compacted changelog no longer holds the older ones.
                await store.clear(keep_versions=same)
                await db.execute("DELETE FROM meta")
                await db.commit()
            store.namespace = await store._check_meta(namespace, readonly)
            return store
        except BaseException:
            await db.close()
            raise

    async def _check_meta(self, namespace: str | None, readonly: bool) -> str | None:
        try:
            rows = await self._db.execute_fetchall("SELECT name, value FROM meta")
        except aiosqlite.OperationalError as exc:
            raise HistoryError(
                f"{self.path} is not a kafkron history database ({exc}); "
                "pass --db with the recorder's path"
            ) from None
        meta = {str(name): str(value) for name, value in rows}
        stored = meta.get("namespace")
        version = meta.get("schema_version")
        if version is not None and int(version) != SCHEMA_VERSION:
            raise HistoryError(
                f"{self.path} has schema version {version}, this kafkron writes "
                f"{SCHEMA_VERSION}; rebuild it with `kafkron recorder --rebuild`"
            )
        if namespace is not None and stored is not None and stored != namespace:
            raise HistoryError(
                f"{self.path} holds the history of namespace {stored!r}, not {namespace!r}; "
                "pass another --db, or `kafkron recorder --rebuild` to start it over"
            )
        if not readonly and stored is None and namespace is not None:
            await self._db.executemany(
                "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
                [("namespace", namespace), ("schema_version", str(SCHEMA_VERSION))],
            )
            await self._db.commit()
            stored = namespace
        return stored

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> HistoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def clear(self, *, keep_versions: bool = False) -> None:
        """Forget everything (rows and offsets): the next read starts at the beginning.

        ``keep_versions`` keeps the schedules' definitions over time, which a re-read
        of the compacted changelog could not give back."""
        tables = ["offsets", "attempts", "dead_letters", "rejections", "runs", "alerts"]
        if not keep_versions:
            tables += ["definitions", "schedule_versions", "calendar_versions"]
        for table in tables:
            await self._db.execute(f"DELETE FROM {table}")
        await self._db.commit()

    # ---------------------------------------------------------------- writes

    async def write(self, rows: Sequence[Row], next_offsets: Mapping[tuple[str, int], int]) -> None:
        """Apply ``rows`` and record ``next_offsets`` in one transaction (idempotent).

        One statement per kind of row and a handful for the summaries, whatever the
        batch size: each await crosses to SQLite's thread, so per-row awaits would
        cap the recorder at about a thousand records a second.
        """
        fired = [r for r in rows if isinstance(r, AttemptFired)]
        finished = [r for r in rows if isinstance(r, AttemptFinished)]
        progress = [r for r in rows if isinstance(r, AttemptProgress)]
        dead = [r for r in rows if isinstance(r, DeadLetterRow)]
        rejected = [r for r in rows if isinstance(r, RejectionRow)]
        definitions = [r for r in rows if isinstance(r, DefinitionRow)]
        versions = [r for r in rows if isinstance(r, VersionRow)]
        calendars = [r for r in rows if isinstance(r, CalendarRow)]
        alerts = [r for r in rows if isinstance(r, Alert)]
        db = self._db
        if calendars:
            await db.executemany(
                "INSERT OR IGNORE INTO calendar_versions (name, offset, effective_ms, calendar) "
                "VALUES (?, ?, ?, ?)",
                [(r.name, r.offset, r.effective_ms, r.calendar_json) for r in calendars],
            )
        if alerts:
            await db.executemany(alert_rows.UPSERT_SQL, [alert_rows.row_of(r) for r in alerts])
        if definitions:
            await db.executemany(
                "INSERT OR IGNORE INTO definitions (def_key, def) VALUES (?, ?)",
                [(r.def_key, r.def_json) for r in definitions],
            )
        if versions:
            await db.executemany(
                "INSERT OR IGNORE INTO schedule_versions (schedule_id, partition, offset, "
                "effective_ms, def_key, paused, completed, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        r.schedule_id,
                        r.partition,
                        r.offset,
                        r.effective_ms,
                        r.def_key,
                        int(r.paused),
                        r.completed,
                        int(r.created),
                    )
                    for r in versions
                ],
            )
        if fired:
            await db.executemany(
                "INSERT INTO attempts (run_id, attempt, schedule_id, task, job_name, "
                "scheduled_ms, fired_ms, deadline_ms, job_target, queue, flow_key, flow) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, attempt) DO UPDATE SET "
                "schedule_id = excluded.schedule_id, task = excluded.task, "
                "job_name = excluded.job_name, scheduled_ms = excluded.scheduled_ms, "
                "fired_ms = excluded.fired_ms, deadline_ms = excluded.deadline_ms, "
                "job_target = excluded.job_target, queue = excluded.queue, "
                "flow_key = excluded.flow_key, flow = excluded.flow",
                [
                    (
                        r.run_id,
                        r.attempt,
                        r.schedule_id,
                        r.task,
                        r.job_name,
                        r.scheduled_ms,
                        r.fired_ms,
                        r.deadline_ms,
                        r.job_target,
                        r.queue,
                        r.flow_key,
                        r.flow,
                    )
                    for r in fired
                ],
            )
        if finished:
            await db.executemany(
                "INSERT INTO attempts (run_id, attempt, schedule_id, task, scheduled_ms, "
                "started_ms, finished_ms, status, worker, error_type, error_message, "
                "covers_to_ms, covers_count, counts, target, job_target, fired_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, attempt) DO UPDATE SET "
                "scheduled_ms = COALESCE(attempts.scheduled_ms, excluded.scheduled_ms), "
                "started_ms = excluded.started_ms, finished_ms = excluded.finished_ms, "
                "status = excluded.status, worker = excluded.worker, "
                "error_type = excluded.error_type, error_message = excluded.error_message, "
                "covers_to_ms = excluded.covers_to_ms, covers_count = excluded.covers_count, "
                "counts = excluded.counts, target = excluded.target, "
                "job_target = COALESCE(attempts.job_target, excluded.job_target), "
                "fired_ms = COALESCE(attempts.fired_ms, excluded.fired_ms)",
                [
                    (
                        r.run_id,
                        r.attempt,
                        r.schedule_id,
                        r.task,
                        r.scheduled_ms,
                        r.started_ms,
                        r.finished_ms,
                        r.status,
                        r.worker,
                        r.error_type,
                        r.error_message,
                        r.covers_to_ms,
                        r.covers_count,
                        r.counts_json,
                        r.target_json,
                        r.job_target,
                        r.fired_ms,
                    )
                    for r in finished
                ],
            )
        if progress:
            # The latest report wins; the outcome columns are left alone (a report
            # never replaces a result, whichever of the two is read first).
            await db.executemany(
                "INSERT INTO attempts (run_id, attempt, schedule_id, task, scheduled_ms, "
                "started_ms, worker, progress, progress_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, attempt) DO UPDATE SET "
                "scheduled_ms = COALESCE(attempts.scheduled_ms, excluded.scheduled_ms), "
                "started_ms = COALESCE(attempts.started_ms, excluded.started_ms), "
                "worker = COALESCE(attempts.worker, excluded.worker), "
                "progress = excluded.progress, progress_ms = excluded.progress_ms "
                "WHERE attempts.progress_ms IS NULL "
                "OR attempts.progress_ms <= excluded.progress_ms",
                [
                    (
                        r.run_id,
                        r.attempt,
                        r.schedule_id,
                        r.task,
                        r.scheduled_ms,
                        r.started_ms,
                        r.worker,
                        r.details_json,
                        r.at_ms,
                    )
                    for r in progress
                ],
            )
        if dead:
            await db.executemany(
                f"INSERT OR REPLACE INTO dead_letters ({_DL_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        r.partition,
                        r.offset,
                        r.run_id,
                        r.schedule_id,
                        r.task,
                        r.job_name,
                        r.error_type,
                        r.error_message,
                        r.attempts,
                        r.dead_at_ms,
                        r.job_target,
                    )
                    for r in dead
                ],
            )
        if rejected:
            await db.executemany(
                "INSERT OR REPLACE INTO rejections (partition, offset, key, reason, "
                "original, original_topic, original_partition, original_offset, "
                "rejected_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        r.partition,
                        r.offset,
                        r.key,
                        r.reason,
                        r.original,
                        r.original_topic,
                        r.original_partition,
                        r.original_offset,
                        r.rejected_ms,
                    )
                    for r in rejected
                ],
            )
        touched = {r.run_id for r in fired} | {r.run_id for r in finished}
        touched |= {r.run_id for r in progress}
        touched |= {r.run_id for r in dead}
        if touched:
            await self._refresh_runs(touched)
        await db.executemany(
            "INSERT INTO offsets (topic, partition, next_offset) VALUES (?, ?, ?) "
            "ON CONFLICT (topic, partition) DO UPDATE SET "
            "next_offset = MAX(offsets.next_offset, excluded.next_offset)",
            [(topic, partition, offset) for (topic, partition), offset in next_offsets.items()],
        )
        await db.commit()

    async def _refresh_runs(self, run_ids: set[str]) -> None:
        """Recompute the ``runs`` rows of ``run_ids`` from all their inputs."""
        db = self._db
        await db.execute("CREATE TEMP TABLE IF NOT EXISTS touched (run_id TEXT PRIMARY KEY)")
        await db.execute("DELETE FROM touched")
        await db.executemany(
            "INSERT OR IGNORE INTO touched (run_id) VALUES (?)", [(r,) for r in run_ids]
        )
        attempts: dict[str, list[AttemptView]] = {}
        job_names: dict[str, str] = {}
        job_targets: dict[str, str] = {}
        for row in await db.execute_fetchall(
            f"SELECT {_ATTEMPT_COLUMNS}, job_name, job_target FROM attempts "
            "WHERE run_id IN (SELECT run_id FROM touched)"
        ):
            attempt = AttemptView(*row[:-2])
            attempts.setdefault(attempt.run_id, []).append(attempt)
            if row[-2] is not None:
                job_names.setdefault(attempt.run_id, str(row[-2]))
            if row[-1] is not None:
                job_targets.setdefault(attempt.run_id, str(row[-1]))
        dead: dict[str, list[DeadLetterRow]] = {}
        for row in await db.execute_fetchall(
            f"SELECT {_DL_COLUMNS} FROM dead_letters WHERE run_id IN (SELECT run_id FROM touched)"
        ):
            letter = DeadLetterRow(*row)
            dead.setdefault(letter.run_id, []).append(letter)
        summaries: list[tuple[Any, ...]] = []
        for run_id in run_ids:
            view = summarize(run_id, attempts.get(run_id, []), dead.get(run_id, []))
            if view is None:
                continue
            summaries.append(
                (
                    view.run_id,
                    view.schedule_id,
                    view.task,
                    job_names.get(run_id, view.job_name),
                    view.scheduled_ms,
                    view.fired_ms,
                    view.started_ms,
                    view.finished_ms,
                    view.status,
                    view.attempts,
                    view.worker,
                    view.error_type,
                    view.error_message,
                    view.dead_at_ms,
                    view.covers_to_ms,
                    view.covers_count,
                    job_targets.get(run_id, view.job_target),
                    view.target,
                )
            )
        await db.executemany(
            f"INSERT OR REPLACE INTO runs ({_RUN_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            summaries,
        )
        await db.execute("DELETE FROM touched")

    # --------------------------------------------------------------- queries

    async def offsets(self) -> dict[tuple[str, int], int]:
        """The next offset to read per (topic, partition); empty for a new database."""
        rows = await self._db.execute_fetchall("SELECT topic, partition, next_offset FROM offsets")
        return {(str(t), int(p)): int(o) for t, p, o in rows}

    async def alerts(
        self, *, open_only: bool = False, ids: Sequence[str] = (), since_ms: int | None = None
    ) -> list[Alert]:
        """The deadline alerts recorded (`actors.history.alerts.query`)."""
        sql, params = alert_rows.query(open_only=open_only, ids=ids, since_ms=since_ms)
        return [alert_rows.alert_of(row) for row in await self._db.execute_fetchall(sql, params)]

    async def version_heads(self) -> dict[str, Head]:
        """Every schedule's latest recorded version (`actors.audit.versions.Head`)."""
        rows = await self._db.execute_fetchall(
            "SELECT schedule_id, partition, offset, def_key, paused, completed "
            "FROM schedule_versions ORDER BY schedule_id, partition, offset"
        )
        # The last row of each schedule wins.
        return {
            str(s): (int(p), int(o), None if d is None else str(d), bool(pz), c)
            for s, p, o, d, pz, c in rows
        }

    async def latest_per_schedule(self) -> list[RunView]:
        """The latest run of every schedule (every task of a DAG's latest run), failures first."""
        rows = await self._db.execute_fetchall(
            f"SELECT {', '.join('r.' + c.strip() for c in _RUN_COLUMNS.split(','))} "
            "FROM runs r JOIN (SELECT schedule_id, MAX(scheduled_ms) AS m FROM runs "
            "GROUP BY schedule_id) l ON r.schedule_id = l.schedule_id AND r.scheduled_ms = l.m"
        )
        views = [_run_view(r) for r in rows]
        views.sort(key=lambda v: (v.schedule_id, v.task or ""))
        views.sort(key=lambda v: STATUS_RANK.get(v.status, 3))
        return views

    async def runs(
        self,
        *,
        schedule_id: str | None = None,
        status: str | None = None,
        since_ms: int | None = None,
        limit: int = 20,
    ) -> list[RunView]:
        """Runs newest first (by scheduled instant), filtered as given."""
        where: list[str] = []
        params: list[Any] = []
        if schedule_id is not None:
            where.append("schedule_id = ?")
            params.append(schedule_id)
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if since_ms is not None:
            where.append("scheduled_ms >= ?")
            params.append(since_ms)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self._db.execute_fetchall(
            f"SELECT {_RUN_COLUMNS} FROM runs {clause} ORDER BY scheduled_ms DESC, task LIMIT ?",
            (*params, limit),
        )
        return [_run_view(r) for r in rows]

    async def run(self, run_id: str) -> RunView | None:
        rows = list(
            await self._db.execute_fetchall(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
            )
        )
        return _run_view(rows[0]) if rows else None

    async def dag_tasks(self, run_id: str) -> list[RunView]:
        """The task runs of DAG run ``run_id`` (``{run_id}/{task}``), by task."""
        # Every id starting with "{run_id}/" sorts in ["{run_id}/", "{run_id}0") ("0"
        # follows "/"), a range the primary key's index answers without a scan.
        rows = await self._db.execute_fetchall(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id >= ? AND run_id < ? ORDER BY task",
            (run_id + "/", run_id + "0"),
        )
        return [_run_view(r) for r in rows]

    async def attempts(self, run_id: str) -> list[AttemptView]:
        rows = await self._db.execute_fetchall(
            f"SELECT {_ATTEMPT_COLUMNS} FROM attempts WHERE run_id = ? ORDER BY attempt",
            (run_id,),
        )
        return [AttemptView(*r) for r in rows]

    async def dead_letters(self, limit: int = 100) -> list[DeadLetterRow]:
        rows = await self._db.execute_fetchall(
            f"SELECT {_DL_COLUMNS} FROM dead_letters ORDER BY dead_at_ms DESC LIMIT ?", (limit,)
        )
        return [DeadLetterRow(*r) for r in rows]

    async def rejections(self, limit: int = 100) -> list[RejectionRow]:
        rows = await self._db.execute_fetchall(
            "SELECT partition, offset, key, reason, original, original_topic, "
            "original_partition, original_offset, rejected_ms FROM rejections "
            "ORDER BY rejected_ms DESC, partition, offset LIMIT ?",
            (limit,),
        )
        return [RejectionRow(*r) for r in rows]

    async def status_counts(self) -> dict[str, int]:
        """How many runs end in each status, plus ``retried`` (runs with more than one attempt)."""
        rows = await self._db.execute_fetchall("SELECT status, COUNT(*) FROM runs GROUP BY status")
        counts = {str(s): int(n) for s, n in rows}
        retried = await self._db.execute_fetchall("SELECT COUNT(*) FROM runs WHERE attempts > 1")
        counts["retried"] = int(next(iter(retried))[0])
        return counts

    async def open_flow(self, top: int = TOP_KEYS) -> FlowView:
        """The runs in flight by key and by queue (`actors.history.flow_keys`)."""
        return await open_flow(self._db, top)
