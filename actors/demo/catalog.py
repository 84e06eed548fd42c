"""The commands `kafkron demo` submits: the billing example, in demo time.

Every command goes through the same validation as `kafkron submit`. Times are
relative to the demo's start so something happens within seconds:

- ``fx-rates`` every 5 s (billing example);
- ``invoice-nightly`` at midnight London time, plus one ``schedule.trigger`` so it
  runs during the demo (billing example);
- ``usage-rollup`` every 20 s, and ``send-invoices`` every 30 s (billing example);
- ``remind-c42`` once, a few seconds out (a one-off ``at``);
- ``charge-expired-card`` every 15 s and triggered at once: billing.always_fails,
  3 attempts 1 s apart (no jitter), then the dead-letter topic;
- ``export-ledger`` every 10 s: fails its first attempt, succeeds on the retry;
- ``nightly-billing``, the example's DAG (usage-rollup and fx-rates, then
  invoice-nightly, then send-invoices), when the scheduler accepts DAGs;
- one deliberately broken command (a cron minute of 61) to show ``{ns}.rejected``.
"""

from __future__ import annotations

from typing import Any

from topics.timefmt import format_ms

# Job modules the demo's workers import.
JOB_MODULES = ("actors.examples.billing.jobs", "actors.demo.jobs")

# Customers invoice-nightly charges in the demo: enough to take a moment, few enough
# to finish well inside a 30-second demo on a small machine.
DEMO_CUSTOMERS = 200

FAST_FAILURE_RETRY = {"max_attempts": 3, "initial_s": 1, "coefficient": 1.0, "jitter": "none"}


def _upsert(schedule_id: str, spec: dict[str, Any], job: str, **more: Any) -> dict[str, Any]:
    return {
        "v": 1,
        "type": "schedule.upsert",
        "id": schedule_id,
        "spec": spec,
        "job": {"name": job, "args": more.pop("args", {})},
        **more,
    }


def _command(kind: str, schedule_id: str) -> dict[str, Any]:
    return {"v": 1, "type": kind, "id": schedule_id}


def schedules(now_ms: int) -> list[dict[str, Any]]:
    """The valid commands, in the order they are sent."""
    return [
        _upsert("fx-rates", {"every": "5s"}, "billing.fx_rates", timeout_s=30),
        _upsert(
            "invoice-nightly",
            {"cron": "0 0 * * *", "tz": "Europe/London"},
            "billing.invoice_nightly",
            args={"customers": DEMO_CUSTOMERS},
            misfire={"policy": "run_once", "grace_s": 3600},
        ),
        _command("schedule.trigger", "invoice-nightly"),
        _upsert("usage-rollup", {"every": "20s"}, "billing.usage_rollup"),
        _upsert("send-invoices", {"every": "30s"}, "billing.send_invoices"),
        _upsert(
            "remind-c42",
            {"at": format_ms(now_ms + 6_000)},
            "demo.send_reminder",
            args={"customer": "c-42"},
        ),
        _upsert(
            "charge-expired-card",
            {"every": "15s"},
            "billing.always_fails",
            args={"message": "card of customer c-13 expired"},
            retry=FAST_FAILURE_RETRY,
        ),
        _command("schedule.trigger", "charge-expired-card"),
        _upsert("export-ledger", {"every": "10s"}, "demo.flaky_export", retry=FAST_FAILURE_RETRY),
    ]


def dag() -> dict[str, Any]:
    """The billing example's DAG (actors/examples/billing/nightly-billing.json), every 20 s.

    Demo time: a run within a short demo, short retries and timeouts.
    """
    from actors.examples.billing.dag import nightly_billing

    command = nightly_billing(customers=DEMO_CUSTOMERS, spec={"every": "20s"})
    command["retry"] = FAST_FAILURE_RETRY
    for task in command["tasks"].values():
        task.pop("retry", None)
        task["timeout_s"] = 60
    return command


# Sent as raw bytes, past the local validation: the shard must reject it and move on.
BROKEN_COMMAND = (
    b"typo-cron",
    b'{"v":1,"type":"schedule.upsert","id":"typo-cron","spec":{"cron":"61 * * * *"},'
    b'"job":{"name":"billing.fx_rates","args":{}}}',
)


def job_names(commands: list[dict[str, Any]]) -> set[str]:
    """Every job name the commands refer to (DAG tasks included)."""
    names: set[str] = set()
    for command in commands:
        if "job" in command:
            names.add(command["job"]["name"])
        for task in command.get("tasks", {}).values():
            names.add(task["job"]["name"])
    return names
