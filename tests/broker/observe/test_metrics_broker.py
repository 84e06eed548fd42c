"""Each actor's ``/metrics`` on the real broker: the counters move as runs fire, fail, die.

One scheduler, one worker and one recorder run as `kafkron` child processes with
``--metrics-port`` (the worker's from ``KAFKRON_METRICS_PORT``, so both ways of
asking are exercised). A schedule fires a no-op every second; a trigger of a job
that always fails is tried twice and dead-lettered.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.kit.metrics import Samples, scrape_until, total
from tests.kit.ports import free_port_block
from tests.kit.scheduler import produce
from tests.kit.worker import ChildProcess, WorkerProcess
from topics.names import Settings

# Below Linux's ephemeral range (`tests.kit.ports`): a fixed port in it (39182 was)
# can be held by any client connection's local port when the actor binds it.
SCHEDULER_PORT = free_port_block(3)
WORKER_PORT = SCHEDULER_PORT + 1
RECORDER_PORT = SCHEDULER_PORT + 2


def _command(**fields: object) -> tuple[bytes, bytes]:
    command = {"v": 1, **fields}
    return str(command["id"]).encode(), orjson.dumps(command)


@pytest.mark.broker
async def test_every_actor_counts_fires_failures_and_dead_letters(
    kafka_settings: Settings, tmp_path: Path
) -> None:
    settings = kafka_settings
    scheduler = ChildProcess(
        settings,
        tmp_path,
        "scheduler",
        [
            "scheduler",
            "--session-timeout-ms",
            "6000",
            "--heartbeat-ms",
            "1000",
            "--metrics-port",
            str(SCHEDULER_PORT),
            "--log-format",
            "json",
        ],
    )
    worker = WorkerProcess(
        settings, tmp_path, "worker", env={"KAFKRON_METRICS_PORT": str(WORKER_PORT)}
    )
    recorder = ChildProcess(
        settings,
        tmp_path,
        "recorder",
        ["recorder", "--db", str(tmp_path / "history.db"), "--metrics-port", str(RECORDER_PORT)],
    )
    children = (scheduler, worker, recorder)

    def alive() -> None:
        for child in children:
            child.check_alive()

    try:
        await produce(
            settings,
            [
                _command(
                    type="schedule.upsert",
                    id="tick",
                    spec={"every": "1s"},
                    job={"name": "test.noop", "args": {}},
                ),
                _command(
                    type="schedule.upsert",
                    id="doomed",
                    spec={"every": "1h"},
                    job={"name": "test.fail", "args": {"message": "card declined"}},
                    retry={"max_attempts": 2, "initial_s": 0.1, "jitter": "none"},
                ),
            ],
        )
        await produce(settings, [_command(type="schedule.trigger", id="doomed")])

        def scheduler_ready(s: Samples) -> bool:
            return (
                total(s, "kafkron_scheduler_occurrences_total", outcome="fired") >= 3
                and total(s, "kafkron_scheduler_dead_letters_total") >= 1
                # A triggered fire has no lateness: wait for three scheduled ones.
                and total(s, "kafkron_scheduler_firing_lateness_seconds_count") >= 3
            )

        s = await scrape_until(SCHEDULER_PORT, scheduler_ready, 60, alive)
        assert total(s, "kafkron_scheduler_shards") == 3
        assert total(s, "kafkron_scheduler_shard_owned") == 3, s.get(
            "kafkron_scheduler_shard_owned"
        )
        assert total(s, "kafkron_scheduler_occurrences_total", outcome="fired") >= 3
        assert total(s, "kafkron_scheduler_retries_total") >= 1
        assert total(s, "kafkron_scheduler_dead_letters_total") == 1
        assert total(s, "kafkron_scheduler_schedules") == 2
        fires = total(s, "kafkron_scheduler_firing_lateness_seconds_count")
        assert fires >= 3
        assert total(s, "kafkron_scheduler_firing_lateness_seconds_bucket", le="+Inf") == fires
        assert total(s, "kafkron_scheduler_transaction_commit_seconds_count") >= 1
        assert total(s, "kafkron_scheduler_transactions_total") >= 1
        assert "kafkron_scheduler_restore_records" in s
        assert "kafkron_scheduler_clock_holdback_seconds" in s
        lag = s.get("kafkron_consumer_lag_records", [])
        assert {labels["topic"] for labels, _ in lag} == {
            f"{settings.namespace}.commands",
            f"{settings.namespace}.results",
        }

        def worker_ready(s: Samples) -> bool:
            return (
                total(s, "kafkron_worker_job_results_total", job="test.fail", status="failed") >= 2
                and total(s, "kafkron_worker_job_results_total", job="test.noop") >= 2
            )

        w = await scrape_until(WORKER_PORT, worker_ready, 30, alive)
        assert total(w, "kafkron_worker_job_results_total", job="test.fail", status="failed") == 2
        assert (
            total(w, "kafkron_worker_job_results_total", job="test.noop", status="succeeded") >= 2
        )
        assert total(w, "kafkron_worker_job_duration_seconds_count", job="test.noop") >= 2
        assert total(w, "kafkron_worker_slots") == 4
        # Per queue and lane; per key, the keys not listed summed under _other (none here).
        assert total(w, "kafkron_worker_queue_slots", queue="default") == 4
        assert ({"queue": "default", "lane": "normal"}, 0.0) in w[
            "kafkron_worker_queue_runs_waiting"
        ]
        assert w["kafkron_worker_key_runs_running"] == [({"key": "_other"}, 0.0)]
        assert total(w, "kafkron_worker_runs_started_total") >= 4
        assert total(w, "kafkron_worker_transaction_commit_seconds_count") >= 1
        assert total(w, "kafkron_worker_partitions_owned") >= 1

        r = await scrape_until(
            RECORDER_PORT, lambda s: total(s, "kafkron_recorder_records_total") >= 6, 30, alive
        )
        assert total(r, "kafkron_recorder_records_total") >= 6
        assert {labels["group"] for labels, _ in r.get("kafkron_consumer_lag_records", [])} == {
            settings.recorder_group
        }
        # Moves on: a later scrape sees more fires than the first one.
        later = await scrape_until(
            SCHEDULER_PORT,
            lambda s: total(s, "kafkron_scheduler_occurrences_total", outcome="fired") > fires,
            30,
            alive,
        )
        assert total(later, "kafkron_scheduler_occurrences_total", outcome="fired") > fires
    finally:
        for child in children:
            child.stop()
    # --log-format json: every line of the scheduler's log is one JSON object.
    lines = [line for line in scheduler.log().splitlines() if line.strip()]
    assert lines
    assert all(orjson.loads(line)["logger"].startswith("kafkron") for line in lines)
