"""The billing example's databases opened by several jobs at once on the first night.

The DAG's two roots start together and both create the billing database: SQLite
answers "database is locked" at once (no busy wait) to a racing switch to WAL, and
a deferred schema transaction fails on a stale snapshot. The job then fails and
retries, which the DAG test saw as a failed first attempt under load.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from actors.examples.billing.provider import PaymentProvider
from actors.examples.billing.store import open_billing_db

FRESH_DATABASES = 60
OPENERS_EACH = 3


async def _open_and_write(path: Path, n: int) -> None:
    db = await open_billing_db(path)
    try:
        await db.execute(
            "INSERT OR REPLACE INTO usage (customer, period, units) VALUES (?, ?, ?)",
            (f"cus_{n}", "2026-11-30", n),
        )
        await db.commit()
    finally:
        await db.close()


async def test_jobs_opening_a_new_billing_database_together_all_succeed(tmp_path: Path) -> None:
    for i in range(FRESH_DATABASES):
        path = tmp_path / f"billing-{i}.db"
        outcomes = await asyncio.wait_for(
            asyncio.gather(
                *(_open_and_write(path, n) for n in range(OPENERS_EACH)), return_exceptions=True
            ),
            timeout=60,
        )
        assert [o for o in outcomes if o is not None] == [], (i, outcomes)
        db = await open_billing_db(path)
        try:
            rows = await db.execute_fetchall("SELECT COUNT(*) FROM usage")
        finally:
            await db.close()
        assert list(rows) == [(OPENERS_EACH,)]


async def test_providers_opening_a_new_database_together_all_succeed(tmp_path: Path) -> None:
    async def charge(path: Path, n: int) -> None:
        async with PaymentProvider(path) as provider:
            await provider.charge(
                customer=f"cus_{n}", amount_cents=100, currency="EUR", idempotency_key=f"k{n}"
            )

    for i in range(FRESH_DATABASES):
        path = tmp_path / f"provider-{i}.db"
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(charge(path, n) for n in range(OPENERS_EACH)), return_exceptions=True),
            timeout=60,
        )
        assert [o for o in outcomes if o is not None] == [], (i, outcomes)
