"""The commands `kafkron demo` submits: the billing example, in demo time.

Every command is made by the one builder of commands (`topics.command_builders`, as
`kafkron schedule` and `kafkron.Client` make theirs), so the shard's own decoder
checks it when it is made. Times are relative to the demo's start so something
happens within seconds:

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

from topics.command_builders import CommandRecord, dag_upsert, schedule_trigger, schedule_upsert
from topics.command_parts import At, Cron, Every, Misfire, Retry, Task
from topics.command_types import DagUpsert, ScheduleUpsert
from topics.timefmt import format_ms

# Job modules the demo's workers import.
JOB_MODULES = ("actors.examples.billing.jobs", "actors.demo.jobs")

# Customers invoice-nightly charges in the demo: enough to take a moment, few enough
# to finish well inside a 30-second demo on a small machine.
DEMO_CUSTOMERS = 200

FAST_FAILURE_RETRY = Retry(max_attempts=3, initial_s=1, coefficient=1.0, jitter="none")


def schedules(now_ms: int) -> list[CommandRecord]:
    """The valid commands, in the order they are sent, judged at ``now_ms``."""
    return [
        schedule_upsert("fx-rates", Every("5s"), "billing.fx_rates", timeout_s=30, now_ms=now_ms),
        schedule_upsert(
            "invoice-nightly",
            Cron("0 0 * * *", tz="Europe/London"),
            "billing.invoice_nightly",
            args={"customers": DEMO_CUSTOMERS},
            misfire=Misfire("run_once", grace_s=3600),
            now_ms=now_ms,
        ),
        schedule_trigger("invoice-nightly"),
        schedule_upsert("usage-rollup", Every("20s"), "billing.usage_rollup", now_ms=now_ms),
        schedule_upsert("send-invoices", Every("30s"), "billing.send_invoices", now_ms=now_ms),
        schedule_upsert(
            "remind-c42",
            At(format_ms(now_ms + 6_000)),
            "demo.send_reminder",
            args={"customer": "c-42"},
            now_ms=now_ms,
        ),
        schedule_upsert(
            "charge-expired-card",
            Every("15s"),
            "billing.always_fails",
            args={"message": "card of customer c-13 expired"},
            retry=FAST_FAILURE_RETRY,
            now_ms=now_ms,
        ),
        schedule_trigger("charge-expired-card"),
        schedule_upsert(
            "export-ledger",
            Every("10s"),
            "demo.flaky_export",
            retry=FAST_FAILURE_RETRY,
            now_ms=now_ms,
        ),
    ]


def dag() -> CommandRecord:
    """The billing example's DAG (actors/examples/billing/nightly-billing.json), every 20 s.

    Its tasks, order, misfire policy, run limit and timeout are the example's; demo
    time makes the rest: a run within a short demo, short retries (the DAG's, none of
    the tasks' own) and 60 s per task.
    """
    from actors.examples.billing.dag import DAG_ID, nightly_billing

    example = nightly_billing(customers=DEMO_CUSTOMERS)
    tasks = {
        name: Task(
            task["job"]["name"],
            args=task["job"].get("args"),
            after=task.get("after", ()),
            timeout_s=60,
        )
        for name, task in example["tasks"].items()
    }
    return dag_upsert(
        DAG_ID,
        Every("20s"),
        tasks,
        max_active_runs=example.get("max_active_runs"),
        misfire=Misfire(**example["misfire"]) if "misfire" in example else None,
        retry=FAST_FAILURE_RETRY,
        timeout_s=example.get("timeout_s"),
    )


# Sent as raw bytes, past the local validation: the shard must reject it and move on.
BROKEN_COMMAND = (
    b"typo-cron",
    b'{"v":1,"type":"schedule.upsert","id":"typo-cron","spec":{"cron":"61 * * * *"},'
    b'"job":{"name":"billing.fx_rates","args":{}}}',
)


def job_names(commands: list[CommandRecord]) -> set[str]:
    """Every job name the commands refer to (DAG tasks included), as the shard reads them."""
    names: set[str] = set()
    for command in commands:
        decoded = command.decoded
        if isinstance(decoded, ScheduleUpsert):
            names.add(decoded.job.name)
        elif isinstance(decoded, DagUpsert):
            names.update(task.job.name for task in decoded.tasks.values())
    return names
