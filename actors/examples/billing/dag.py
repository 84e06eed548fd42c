"""The ``nightly-billing`` DAG: the billing jobs in dependency order.

``nightly-billing.json`` next to this file is the ``dag.upsert`` command, ready to
send as it is (``kafkron submit actors/examples/billing/nightly-billing.json``)::

    usage-rollup ──┐
                   ├──> invoice-nightly ──> send-invoices
    fx-rates ──────┘

It runs at midnight UTC; each run processes the day before (its logical date,
Airflow's convention), which `actors.examples.billing.jobs.period_of` reads from the
run, so a rerun or a retry bills the same day. Each task has its own timeout
and retry policy; invoice-nightly never retries ``AccountDeleted``.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

DAG_ID = "nightly-billing"
COMMAND_FILE = "nightly-billing.json"


def nightly_billing(**overrides: Any) -> dict[str, Any]:
    """The ``dag.upsert`` command as a dict; ``overrides`` replace top-level fields.

    ``customers=N`` sets the customer count of usage-rollup and invoice-nightly.
    """
    text = resources.files(__package__).joinpath(COMMAND_FILE).read_text(encoding="utf-8")
    command: dict[str, Any] = json.loads(text)
    customers = overrides.pop("customers", None)
    if customers is not None:
        for task in ("usage-rollup", "invoice-nightly"):
            command["tasks"][task]["job"]["args"]["customers"] = customers
    command.update(overrides)
    return command
