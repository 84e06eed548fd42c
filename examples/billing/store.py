"""The billing database (SQLite via aiosqlite): usage, exchange rates, invoices, emails.

The unique key of an invoice is ``(customer, period)``: whichever attempt of
invoice-nightly inserts it first owns it, and a repeat finds it (and its charge)
instead of charging again. Every write commits at once, so a ``kill -9`` loses
nothing a later attempt relies on.
"""

from __future__ import annotations

import os
from pathlib import Path

import aiosqlite

DEFAULT_BILLING_DB = ".kafkron/billing.db"

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
    path = path or billing_db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    db = await aiosqlite.connect(path, timeout=30.0)
    await db.execute("PRAGMA journal_mode=WAL")
    await db.execute("PRAGMA busy_timeout=30000")
    await db.executescript(_SCHEMA)
    await db.commit()
    return db
