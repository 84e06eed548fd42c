"""The jobs of the nightly billing DAG, and one that always fails (for the demo).

Run them with ``kafkron worker --jobs actors.examples.billing.jobs``. Databases:
``KAFKRON_BILLING_DB`` (default ``.kafkron/billing.db``) and the fake provider's
``KAFKRON_PROVIDER_DB`` (default ``.kafkron/provider.db``).

Execution is at least once: a worker killed halfway through invoice-nightly leaves
some customers charged and the run is delivered again. The job makes its effects
exactly once the way section 5.3 of the chapter describes (the Stripe pattern):

1. The period comes from the run (its logical date in a DAG run, else the scheduled
   date), never from the clock, so every attempt bills the same period.
2. An invoice row with a unique ``(customer, period)`` is inserted before charging;
   an attempt that finds it ``charged`` skips the customer.
3. The charge carries ``ctx.idempotency_key("charge", customer, period)``, the same
   on every attempt, so a crash between charging and recording the charge cannot
   charge twice: the provider returns the first charge again.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from actors import RunContext, job
from actors.examples.billing.provider import PaymentProvider
from actors.examples.billing.store import open_billing_db

CURRENCIES = ("EUR", "GBP", "JPY")
HEARTBEAT_EVERY = 50


def period_of(ctx: RunContext) -> str:
    """The billing day this run covers: its logical date, else its scheduled date."""
    when: datetime = ctx.logical_date or ctx.scheduled_at
    return when.strftime("%Y-%m-%d")


def customer_ids(customers: int) -> list[str]:
    return [f"cus_{i:05d}" for i in range(customers)]


def _stable(text: str, modulo: int) -> int:
    """A deterministic number in [0, modulo): reruns compute the very same values."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") % modulo


@job("billing.usage_rollup")
async def usage_rollup(ctx: RunContext, customers: int = 3000) -> None:
    """Total each customer's usage for the period (an idempotent upsert)."""
    period = period_of(ctx)
    db = await open_billing_db()
    try:
        await db.executemany(
            "INSERT OR REPLACE INTO usage (customer, period, units) VALUES (?, ?, ?)",
            [(c, period, 1 + _stable(f"{c}/{period}", 500)) for c in customer_ids(customers)],
        )
        await db.commit()
    finally:
        await db.close()


@job("billing.fx_rates")
async def fx_rates(ctx: RunContext) -> None:
    """Fetch the period's exchange rates (here: made up, deterministically)."""
    period = period_of(ctx)
    db = await open_billing_db()
    try:
        await db.executemany(
            "INSERT OR REPLACE INTO fx_rates (period, currency, per_usd) VALUES (?, ?, ?)",
            [(period, cur, 0.5 + _stable(f"{cur}/{period}", 1000) / 1000) for cur in CURRENCIES],
        )
        await db.commit()
    finally:
        await db.close()


@job("billing.invoice_nightly")
async def invoice_nightly(
    ctx: RunContext, customers: int = 3000, cents_per_unit: int = 7
) -> dict[str, Any]:
    """Invoice and charge every customer once for the period, however often it runs."""
    period = period_of(ctx)
    db = await open_billing_db()
    charged = skipped = 0
    try:
        async with db.execute(
            "SELECT customer, units FROM usage WHERE period = ?", (period,)
        ) as rows:
            usage = {str(c): int(u) async for c, u in rows}
        async with PaymentProvider() as provider:
            for n, customer in enumerate(customer_ids(customers)):
                if n % HEARTBEAT_EVERY == 0:
                    ctx.heartbeat({"customers_done": n})
                units = usage.get(customer, 1 + _stable(f"{customer}/{period}", 500))
                amount = units * cents_per_unit
                currency = CURRENCIES[_stable(customer, len(CURRENCIES))]
                await db.execute(
                    "INSERT OR IGNORE INTO invoices (customer, period, amount_cents, currency,"
                    " status, charge_id, run_id, attempt, worker)"
                    " VALUES (?, ?, ?, ?, 'pending', NULL, ?, ?, ?)",
                    (customer, period, amount, currency, ctx.run_id, ctx.attempt, ctx.worker),
                )
                await db.commit()
                async with db.execute(
                    "SELECT status, amount_cents, currency FROM invoices"
                    " WHERE customer = ? AND period = ?",
                    (customer, period),
                ) as rows:
                    row = await rows.fetchone()
                assert row is not None
                if row[0] != "pending":
                    skipped += 1  # charged by an earlier attempt
                    continue
                charge = await provider.charge(
                    customer=customer,
                    amount_cents=int(row[1]),
                    currency=str(row[2]),
                    idempotency_key=ctx.idempotency_key("charge", customer, period),
                )
                await db.execute(
                    "UPDATE invoices SET status = 'charged', charge_id = ?"
                    " WHERE customer = ? AND period = ? AND status = 'pending'",
                    (charge.charge_id, customer, period),
                )
                await db.commit()
                charged += 1
    finally:
        await db.close()
    return {"charged": charged, "skipped": skipped}


@job("billing.send_invoices")
async def send_invoices(ctx: RunContext) -> None:
    """Email each charged invoice of the period once (an outbox keyed by idempotency key)."""
    period = period_of(ctx)
    db = await open_billing_db()
    try:
        async with db.execute(
            "SELECT customer, amount_cents, currency FROM invoices"
            " WHERE period = ? AND status = 'charged'",
            (period,),
        ) as rows:
            due = [(str(c), int(a), str(cur)) async for c, a, cur in rows]
        for customer, amount, currency in due:
            await db.execute(
                "INSERT OR IGNORE INTO outbox (idempotency_key, customer, period, body)"
                " VALUES (?, ?, ?, ?)",
                (
                    ctx.idempotency_key("email", customer, period),
                    customer,
                    period,
                    f"Your invoice for {period}: {amount / 100:.2f} {currency}",
                ),
            )
            await db.execute(
                "UPDATE invoices SET status = 'emailed' WHERE customer = ? AND period = ?",
                (customer, period),
            )
        await db.commit()
    finally:
        await db.close()


@job("billing.always_fails")
def always_fails(ctx: RunContext, message: str = "the card network is down") -> None:
    """Fails on every attempt: retried with backoff, then dead-lettered (the demo's DLQ)."""
    raise RuntimeError(f"{message} (attempt {ctx.attempt} of run {ctx.run_id})")
