"""The billing database (SQLite via aiosqlite): usage, exchange rates, invoices, emails.

The unique key of an invoice is ``(customer, period)``: whichever attempt of
invoice-nightly inserts it first owns it, and a repeat finds it (and its charge)
instead of charging again. Every write commits at once, so a ``kill -9`` loses
nothing a later attempt relies on.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import aiosqlite

DEFAULT_BILLING_DB = ".kafkron/billing.db"
# Switching a new database to WAL needs an exclusive lock, and SQLite answers
# "database is locked" at once (it skips the busy handler) when two connections
# race for it: the DAG's two roots open the database together on the first night.
WAL_SWITCH_ATTEMPTS = 50
WAL_SWITCH_PAUSE_S = 0.05

_SCHEMA = """
CREATE TABLE IF NOT EXISTS usage (
    customer TEXT NOT NULL,
    period   TEXT NOT NULL,
    units    INTEGER NOT NULL,
    PRIMARY KEY (customer, period)
);
CREATE TABLE IF NOT EXISTS fx_rates (
    period   TEXT NOT NULL,
    currency TEXT NOT NULL,
    per_usd  REAL NOT NULL,
    PRIMARY KEY (period, currency)
);
CREATE TABLE IF NOT EXISTS invoices (
    customer     TEXT NOT NULL,
    period       TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    currency     TEXT NOT NULL,
    status       TEXT NOT NULL,          -- pending | charged | emailed
    charge_id    TEXT,
    run_id       TEXT NOT NULL,          -- the run that created it
    attempt      INTEGER NOT NULL,
    worker       TEXT NOT NULL,          -- the worker that ran that attempt
    UNIQUE (customer, period)
);
CREATE TABLE IF NOT EXISTS outbox (
    idempotency_key TEXT PRIMARY KEY,
    customer        TEXT NOT NULL,
    period          TEXT NOT NULL,
    body            TEXT NOT NULL
);
"""


def billing_db_path() -> Path:
    """``KAFKRON_BILLING_DB``, default ``.kafkron/billing.db``."""
    return Path(os.environ.get("KAFKRON_BILLING_DB") or DEFAULT_BILLING_DB)


async def open_billing_db(path: Path | None = None) -> aiosqlite.Connection:
    return await open_sqlite(path or billing_db_path(), _SCHEMA)


async def open_sqlite(path: Path, schema: str) -> aiosqlite.Connection:
    """A connection to ``path`` in WAL mode with ``schema`` applied, safe to call from
    several jobs at once on a database that does not exist yet."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = await aiosqlite.connect(path, timeout=30.0)
    # Every pragma's rows are read to the end: a statement left pending keeps its
    # read lock, and the other root's writer then waits out the whole busy timeout.
    await db.execute_fetchall("PRAGMA busy_timeout=30000")
    await _switch_to_wal(db)
    # BEGIN IMMEDIATE takes the write lock before reading the schema: a deferred
    # transaction would read it first and then, if the other job created a table
    # meanwhile, fail at once on its stale snapshot instead of waiting.
    await db.executescript(f"BEGIN IMMEDIATE;{schema}COMMIT;")
    return db


async def _switch_to_wal(db: aiosqlite.Connection) -> None:
    """WAL lets the jobs read while another writes; it persists in the file once set."""
    for attempt in range(WAL_SWITCH_ATTEMPTS):
        try:
            await db.execute_fetchall("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == WAL_SWITCH_ATTEMPTS - 1:
                await db.close()
                raise
            await asyncio.sleep(WAL_SWITCH_PAUSE_S)
