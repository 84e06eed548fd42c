"""Metrics and logging without Kafka: names, the lateness histogram, the log setup, the flags."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from actors.observe import metrics
from actors.observe.collectors import SchedulerCollector
from actors.observe.events import log_committed
from actors.observe.logs import check_format, setup_logging
from actors.shard.lateness import BUCKET_BOUNDS_MS, LatenessWindow
from tests.kit.cli import cli
from tests.kit.shard import SECOND, T0, Shard, upsert

# Prometheus' naming rules: a prefix, snake case, a base unit where there is one.
_NAME = re.compile(r"^kafkron_(scheduler|worker|recorder|faust|consumer)_[a-z0-9_]+$")
_FORBIDDEN_LABELS = {"run_id", "schedule_id", "schedule", "id", "run", "task"}


def _names_in_module() -> dict[str, str]:
    return {k: v for k, v in vars(metrics).items() if k.isupper() and isinstance(v, str)}


def test_every_metric_name_follows_the_conventions() -> None:
    names = _names_in_module()
    for metric in (
        metrics.SCHEDULER_COMMIT_SECONDS,
        metrics.SCHEDULER_FENCED,
        metrics.SCHEDULER_TRANSACTIONS_FAILED,
        metrics.WORKER_JOB_SECONDS,
        metrics.WORKER_RESULTS,
        metrics.WORKER_COMMIT_SECONDS,
        metrics.WORKER_FENCED,
        metrics.CONSUMER_LAG_SAMPLE_ERRORS,
        metrics.FAUST_UNDECODABLE,
    ):
        names[metric._name] = metric._name
        assert not _FORBIDDEN_LABELS & set(metric._labelnames), metric._name
    assert len(names) >= 40
    for constant, name in names.items():
        if constant in {"ENV_PORT"}:
            continue
        assert _NAME.match(name), name
        assert not name.endswith("_total"), f"{name}: the client adds _total to counters"
        assert not re.search(r"_(ms|millis|milliseconds|minutes)$", name), f"{name}: base units"


def test_the_one_line_calls_count_and_reuse_their_children() -> None:
    before = metrics.WORKER_RESULTS.labels("obs.job", "failed")._value.get()
    metrics.job_exited("obs.job", "failed", 0.25)
    metrics.job_exited("obs.job", "failed", 0.5)
    assert metrics.WORKER_RESULTS.labels("obs.job", "failed")._value.get() == before + 2
    text = generate_latest(metrics.REGISTRY).decode()
    assert 'kafkron_worker_job_duration_seconds_count{job="obs.job",status="failed"}' in text
    assert 'kafkron_worker_job_results_total{job="obs.job",status="failed"}' in text
    metrics.shard_committed(7, 0.004)
    metrics.shard_fenced(7)
    text = generate_latest(metrics.REGISTRY).decode()
    assert 'kafkron_scheduler_transaction_commit_seconds_bucket{le="0.005",shard="7"}' in text
    assert 'kafkron_scheduler_fenced_total{shard="7"} 1.0' in text


def test_the_lateness_window_keeps_recent_values_and_a_cumulative_histogram() -> None:
    window = LatenessWindow(3)
    for late_ms in (0, 5, 6, 1_000, 400_000):
        window.append(late_ms)
    assert list(window) == [6, 1_000, 400_000]  # the recent ones, for the figures line
    assert window.fires == 5 and window.sum_ms == 401_011
    counts = dict(window.bucket_counts())
    assert counts[5] == 2  # le is inclusive: 0 and 5
    assert counts[10] == 3
    assert counts[1_000] == 4
    assert counts[BUCKET_BOUNDS_MS[-1]] == 4
    assert counts[None] == 5  # +Inf counts every fire
    cumulative = [n for _, n in window.bucket_counts()]
    assert cumulative == sorted(cumulative)


def test_a_batch_handed_over_at_once_counts_as_each_value_appended_in_turn() -> None:
    values = [0, 5, 6, 5, 1_000, 400_000, 6, 6, 9_999, 5]
    one_by_one, in_bulk = LatenessWindow(4), LatenessWindow(4)
    for late_ms in values:
        one_by_one.append(late_ms)
    in_bulk.extend_all(values[:3])
    in_bulk.extend_all(values[3:])
    assert list(in_bulk) == list(one_by_one) == [6, 6, 9_999, 5]
    assert (in_bulk.fires, in_bulk.sum_ms) == (one_by_one.fires, one_by_one.sum_ms) == (10, 411_032)
    assert in_bulk.bucket_counts() == one_by_one.bucket_counts()
    assert dict(in_bulk.bucket_counts())[5] == 4


class _Runner:
    """What the collector reads of a `ShardRunner`: its core and its figures."""

    def __init__(self, shard: Shard) -> None:
        self.core = shard.core

    def figures(self) -> dict[str, Any]:
        return {"restore_ms": 12.5, "restored_records": 4, "transactions": 2, **self.core.stats}


class _Runtime:
    """What the collector reads of a `SchedulerRuntime` (`figures`, `cores`)."""

    def __init__(self, runners: dict[int, _Runner]) -> None:
        self.runners = runners

    def cores(self) -> dict[int, Any]:
        return {p: r.core for p, r in self.runners.items()}

    def figures(self) -> dict[str, Any]:
        return {
            "shards": {p: r.figures() for p, r in self.runners.items()},
            "waiting": [],
            "skew_ms": -3,
            "skew_uncertainty_ms": 2,
            "holdback_ms": 0,
        }


@pytest.fixture
def scheduler_registry() -> Iterator[tuple[CollectorRegistry, Shard]]:
    shard = Shard(now_ms=T0 - SECOND)
    shard.send(upsert("tick", spec={"every": "1s"}, overlap="allow"))
    shard.run_until(T0 + 3 * SECOND)
    registry = CollectorRegistry()
    registry.register(SchedulerCollector(_Runtime({0: _Runner(shard)}), lambda: 6))
    yield registry, shard


def test_the_scheduler_collector_reads_a_real_core(
    scheduler_registry: tuple[CollectorRegistry, Shard],
) -> None:
    registry, shard = scheduler_registry
    text = generate_latest(registry).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    fired = shard.core.stats["fired_total"]
    assert fired >= 3
    key = ("kafkron_scheduler_occurrences_total", (("outcome", "fired"), ("shard", "0")))
    assert samples[key] == fired
    assert samples[("kafkron_scheduler_shards", ())] == 6
    assert samples[("kafkron_scheduler_shard_owned", (("shard", "0"),))] == 1
    lateness_count = ("kafkron_scheduler_firing_lateness_seconds_count", (("shard", "0"),))
    assert samples[lateness_count] == fired
    inf = ("kafkron_scheduler_firing_lateness_seconds_bucket", (("le", "+Inf"), ("shard", "0")))
    assert samples[inf] == fired
    assert samples[("kafkron_scheduler_restore_duration_seconds", (("shard", "0"),))] == 0.0125
    assert samples[("kafkron_scheduler_clock_skew_seconds", ())] == -0.003


def _log_lines(log_format: str, verbose: bool) -> list[str]:
    stream = io.StringIO()
    setup_logging(check_format(log_format), verbose=verbose, stream=stream)
    try:
        logging.getLogger("kafkron.scheduler").info("shard %d taken on", 3)
        logging.getLogger("kafkron.scheduler").debug("a detail")
        logging.getLogger("aiokafka.consumer.fetcher").error(
            "Failed fetch offsets from %s: %s", 1, "NotLeaderForPartitionError"
        )
    finally:
        logging.getLogger().handlers.clear()
        logging.getLogger("aiokafka").setLevel(logging.NOTSET)
    return stream.getvalue().splitlines()


def test_foreign_client_lines_stay_below_warning_unless_verbose() -> None:
    lines = _log_lines("text", verbose=False)
    assert len(lines) == 1 and "INFO kafkron.scheduler shard 3 taken on" in lines[0]
    verbose = _log_lines("text", verbose=True)
    assert any("Failed fetch offsets" in line and "ERROR" in line for line in verbose)
    assert any("a detail" in line for line in verbose)


def test_json_logs_are_one_object_per_line() -> None:
    [line] = _log_lines("json", verbose=False)
    record = orjson.loads(line)
    assert record["level"] == "INFO" and record["logger"] == "kafkron.scheduler"
    assert record["msg"] == "shard 3 taken on"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", record["ts"])
    assert isinstance(record["pid"], int)


def test_bad_observability_flags_are_usage_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = cli(capsys, "scheduler", "--metrics-port", "70000")
    assert code == 2 and "--metrics-port 70000 is not a port number" in err
    code, _, err = cli(capsys, "worker", "--jobs", "tests.jobs.worker", "--log-format", "xml")
    assert code == 2 and "--log-format" in err
    monkeypatch.setenv("KAFKRON_LOG_FORMAT", "yaml")
    code, _, err = cli(capsys, "recorder")
    assert code == 2 and "KAFKRON_LOG_FORMAT" in err
    monkeypatch.delenv("KAFKRON_LOG_FORMAT")
    monkeypatch.setenv("KAFKRON_METRICS_PORT", "http")
    code, _, err = cli(capsys, "recorder")
    assert code == 2 and "KAFKRON_METRICS_PORT 'http' is not a port number" in err
    logging.getLogger().handlers.clear()


def test_dead_letters_and_rejections_are_logged_a_line_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shard = Shard(now_ms=T0 - SECOND)
    written = shard.send(upsert("doomed", retry={"max_attempts": 1, "jitter": "none"})).records
    [run] = shard.run_until(T0 + 60 * SECOND).runs
    written += shard.report(run, "failed").records
    written += shard.send(upsert("bad", spec={"cron": "61 * * * *"})).records
    with caplog.at_level(logging.INFO, logger="kafkron.scheduler"):
        log_committed(0, written)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith(
        f"DLQ: run {run.run_id} (job test.job) dead-lettered after 1 attempts"
    )
    assert "kafkron dlq replay" in lines[0]
    assert lines[1].startswith("REJECTED: command at ") and "61" in lines[1]
