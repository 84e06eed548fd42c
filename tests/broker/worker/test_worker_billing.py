"""kill -9 in the middle of invoice-nightly: every customer is still charged once."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path

from actors.examples.billing.jobs import customer_ids
from tests.kit.worker import T0, WorkerProcess, produce, results, run_record, wait_for_results
from topics.messages import run_id_for
from topics.names import Settings

CUSTOMERS = 2_000


def _count(db: Path, sql: str) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            row = conn.execute(sql).fetchone()
    except sqlite3.OperationalError:  # schema not created yet
        return 0
    return int(row[0]) if row else 0


async def test_kill_9_mid_invoice_run_charges_every_customer_exactly_once(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    env = {
        "KAFKRON_BILLING_DB": str(tmp_path / "billing.db"),
        "KAFKRON_PROVIDER_DB": str(tmp_path / "provider.db"),
    }
    provider_db = tmp_path / "provider.db"
    await produce(
        kafka_settings,
        [run_record("invoice-nightly", "billing.invoice_nightly", {"customers": CUSTOMERS})],
    )
    w1 = WorkerProcess(kafka_settings, tmp_path, "w1", jobs="actors.examples.billing.jobs", env=env)
    try:
        deadline = time.monotonic() + 120
        while _count(provider_db, "SELECT COUNT(*) FROM charges") < CUSTOMERS // 4:
            w1.check_alive()
            assert time.monotonic() < deadline, w1.log()
            await asyncio.sleep(0.05)
        w1.signal(signal.SIGKILL)
        w1.proc.wait()
    finally:
        w1.stop()
    charged_by_w1 = _count(provider_db, "SELECT COUNT(*) FROM charges")
    assert charged_by_w1 < CUSTOMERS  # killed in the middle
    assert await results(kafka_settings) == []  # the killed attempt left no result

    w2 = WorkerProcess(kafka_settings, tmp_path, "w2", jobs="actors.examples.billing.jobs", env=env)
    try:
        found = await wait_for_results(kafka_settings, lambda rs: len(rs) >= 1, workers=[w2])
    finally:
        w2.stop()

    run_id = run_id_for("invoice-nightly", T0)
    assert [(r.run_id, r.attempt, r.status, r.worker) for r in found] == [
        (run_id, 1, "succeeded", "w2")
    ]
    with sqlite3.connect(provider_db) as conn:
        ledger = Counter(c for (c,) in conn.execute("SELECT customer FROM charges"))
        requests = conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    assert ledger == Counter(customer_ids(CUSTOMERS))  # every customer exactly once
    assert requests >= CUSTOMERS
    with sqlite3.connect(tmp_path / "billing.db") as conn:
        invoices = conn.execute(
            "SELECT status, worker, attempt, COUNT(*) FROM invoices"
            " GROUP BY status, worker, attempt"
        ).fetchall()
    by_worker = {worker: n for status, worker, attempt, n in invoices if status == "charged"}
    # Both executions of the attempt did part of the work; together, all of it once.
    assert by_worker["w1"] >= charged_by_w1 - 1 and by_worker["w2"] > 0
    assert sum(by_worker.values()) == CUSTOMERS
    assert {attempt for _, _, attempt, _ in invoices} == {1}
