"""Jobs of the demo: a one-off reminder, and a retry that ends well.

Registered under ``demo.*`` so they never collide with the billing example's
names; the demo's workers import this module next to ``actors.examples.billing.jobs``.
"""

from __future__ import annotations

from typing import Any

from actors.worker.context import RunContext
from actors.worker.registry import job


class ProviderBusy(Exception):
    """The fake provider asks to come back later (once)."""


@job("demo.send_reminder")
async def send_reminder(ctx: RunContext, customer: str = "c-42", **_: Any) -> None:
    """A one-off reminder: nothing to do but succeed, once per run id."""
    ctx.idempotency_key("reminder", customer)  # what a real mailer would dedupe on


@job("demo.flaky_export")
async def flaky_export(ctx: RunContext, **_: Any) -> None:
    """Fails its first attempt and succeeds on the retry: a retried run that ends well."""
    if ctx.attempt == 1:
        raise ProviderBusy("export endpoint answered 503; retry later")
