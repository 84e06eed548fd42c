"""A fake payment provider that honours idempotency keys, like Stripe's API.

The first request with a given key creates a charge; every later request with the
same key returns that first result (``replayed=True``) and charges nothing. The
ledger is a SQLite file committed per request, so it survives ``kill -9`` of the
process that called it: it stands for a service on another machine.

``charges_by_customer()`` is the ledger a test counts: a customer charged twice for
one period would show two charges.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from actors.examples.billing.store import open_sqlite

DEFAULT_PROVIDER_DB = ".kafkron/provider.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS charges (
    charge_id       TEXT PRIMARY KEY,
    idempotency_key TEXT NOT NULL UNIQUE,
    customer        TEXT NOT NULL,
    amount_cents    INTEGER NOT NULL,
    currency        TEXT NOT NULL,
    created_ms      INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    idempotency_key TEXT NOT NULL,
    at_ms           INTEGER NOT NULL
);
"""


def provider_db_path() -> Path:
    """``KAFKRON_PROVIDER_DB``, default ``.kafkron/provider.db``."""
    return Path(os.environ.get("KAFKRON_PROVIDER_DB") or DEFAULT_PROVIDER_DB)


@dataclass(frozen=True, slots=True)
class Charge:
    charge_id: str
    customer: str
    amount_cents: int
    currency: str
    replayed: bool
    """True when this key was seen before: the first result, returned again."""


class IdempotencyMismatch(Exception):
    """The key was used before for a different request (a bug in the caller)."""


class PaymentProvider:
    """``async with PaymentProvider(path) as p: await p.charge(...)``."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or provider_db_path()
        self._db: aiosqlite.Connection | None = None

    async def __aenter__(self) -> PaymentProvider:
        self._db = await open_sqlite(self.path, _SCHEMA)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def charge(
        self, *, customer: str, amount_cents: int, currency: str, idempotency_key: str
    ) -> Charge:
        """Charge once per ``idempotency_key``; a repeat returns the first result."""
        db = self._require()
        now = time.time_ns() // 1_000_000
        charge_id = f"ch_{uuid.uuid4().hex[:16]}"
        await db.execute(
            "INSERT INTO requests (idempotency_key, at_ms) VALUES (?, ?)", (idempotency_key, now)
        )
        cursor = await db.execute(
            "INSERT OR IGNORE INTO charges VALUES (?, ?, ?, ?, ?, ?)",
            (charge_id, idempotency_key, customer, amount_cents, currency, now),
        )
        created = cursor.rowcount == 1
        await db.commit()
        if created:
            return Charge(charge_id, customer, amount_cents, currency, replayed=False)
        async with db.execute(
            "SELECT charge_id, customer, amount_cents, currency FROM charges "
            "WHERE idempotency_key = ?",
            (idempotency_key,),
        ) as rows:
            row = await rows.fetchone()
        assert row is not None
        if (row[1], row[2], row[3]) != (customer, amount_cents, currency):
            raise IdempotencyMismatch(
                f"idempotency key {idempotency_key[:12]}… was first used for "
                f"{row[1]} {row[2]} {row[3]}, now for {customer} {amount_cents} {currency}"
            )
        return Charge(row[0], row[1], row[2], row[3], replayed=True)

    async def charges_by_customer(self) -> dict[str, int]:
        """How many charges each customer has in the ledger."""
        db = self._require()
        async with db.execute("SELECT customer, COUNT(*) FROM charges GROUP BY customer") as rows:
            return {str(c): int(n) async for c, n in rows}

    async def request_count(self) -> int:
        """Charge requests received, repeats included (how often a key came back)."""
        db = self._require()
        async with db.execute("SELECT COUNT(*) FROM requests") as rows:
            row = await rows.fetchone()
        return int(row[0]) if row else 0

    def _require(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("use the provider inside 'async with PaymentProvider(...)'")
        return self._db
