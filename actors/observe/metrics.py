"""Every Prometheus metric kafkron exposes, named in one place.

Conventions (Prometheus' own): the ``kafkron_`` prefix, then the actor
(``scheduler``, ``worker``, ``recorder``, ``faust`` for a Faust app's agents,
``consumer``); base units in the name (``_seconds``, ``_records``); counters end
in ``_total``; labels have few values (a shard number, a job name, a status, a
topic partition), never a run id or a schedule id, so a namespace with a million
schedules has the same series count as one with ten.

Two kinds of metric live here:

- **events**, counted the moment they happen by a one-line call from the
  runtime (a transaction's commit latency, a fencing, a job's duration): the
  module-level `Histogram`\\ s and `Counter`\\ s below, on `REGISTRY`;
- **figures the actors already keep** (the shard cores' counters, the worker
  core's slots, the skew estimate): read at scrape time by the collectors of
  `actors.observe.collectors`, which name their families with the constants
  below. Nothing is copied on the hot path; a scrape reads a few dicts.

A shard's counters live in its core and start at zero when the shard is built
(after a failover, in another process): Prometheus' ``rate()`` and
``increase()`` treat that as a counter reset, as after a restart.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.process_collector import ProcessCollector

# One registry per process, served by `actors.observe.exposition`; the process
# collector adds CPU, memory and open files (process_*), as every exporter does.
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)

# Buckets (seconds) of the latency histograms: a transaction commits in
# milliseconds on a healthy broker and takes seconds when the broker is unwell.
COMMIT_BUCKETS_S = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Jobs run from milliseconds to hours.
JOB_BUCKETS_S = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14400.0)

# --- scheduler: events -----------------------------------------------------------

SCHEDULER_COMMIT_SECONDS = Histogram(
    "kafkron_scheduler_transaction_commit_seconds",
    "Time to write one shard batch: begin, records, offsets and commit of its transaction.",
    ["shard"],
    buckets=COMMIT_BUCKETS_S,
    registry=REGISTRY,
)
SCHEDULER_FENCED = Counter(
    "kafkron_scheduler_fenced",
    "Shards this process stopped writing for because another owner's producer fenced it.",
    ["shard"],
    registry=REGISTRY,
)
SCHEDULER_TRANSACTIONS_FAILED = Counter(
    "kafkron_scheduler_transactions_failed",
    "Shard transactions that did not commit (not fenced); each rebuilds the shard.",
    ["shard"],
    registry=REGISTRY,
)

# --- scheduler: figures read at scrape time (names used by the collector) ----------

SCHEDULER_SHARDS = "kafkron_scheduler_shards"
SCHEDULER_SHARD_OWNED = "kafkron_scheduler_shard_owned"
SCHEDULER_SHARDS_WAITING = "kafkron_scheduler_shards_waiting"
SCHEDULER_OCCURRENCES = "kafkron_scheduler_occurrences"  # _total, by outcome
SCHEDULER_RETRIES = "kafkron_scheduler_retries"
SCHEDULER_TIMED_OUT = "kafkron_scheduler_attempts_timed_out"
SCHEDULER_DEAD_LETTERS = "kafkron_scheduler_dead_letters"
SCHEDULER_CANCELLED = "kafkron_scheduler_runs_cancelled"
SCHEDULER_REJECTED = "kafkron_scheduler_commands_rejected"
SCHEDULER_FORWARDED = "kafkron_scheduler_commands_forwarded"
SCHEDULER_BACKFILL_FIRED = "kafkron_scheduler_backfill_runs_fired"
SCHEDULER_BACKFILL_PASSED = "kafkron_scheduler_backfill_occurrences_passed"
SCHEDULER_BACKFILLS_ENDED = "kafkron_scheduler_backfills_ended"
SCHEDULER_DEADLINES_MISSED = "kafkron_scheduler_deadlines_missed"
SCHEDULER_DEADLINES_RECOVERED = "kafkron_scheduler_deadlines_recovered"
SCHEDULER_LATE_STARTS = "kafkron_scheduler_late_starts"
SCHEDULER_CALENDAR_HELD = "kafkron_scheduler_calendar_held"
SCHEDULER_CALENDARS_LAG = "kafkron_scheduler_calendars_lag_records"
SCHEDULER_CALENDARS_FRESH_AGE = "kafkron_scheduler_calendars_fresh_age_seconds"
SCHEDULER_BACKFILLS_GOING = "kafkron_scheduler_backfills_going"
SCHEDULER_BACKFILL_IN_FLIGHT = "kafkron_scheduler_backfill_runs_in_flight"
SCHEDULER_RESULTS = "kafkron_scheduler_results"  # _total, applied | ignored
SCHEDULER_ERRORS = "kafkron_scheduler_errors"
SCHEDULER_IN_FLIGHT = "kafkron_scheduler_runs_in_flight"
SCHEDULER_SCHEDULES = "kafkron_scheduler_schedules"
SCHEDULER_TIMERS = "kafkron_scheduler_timers"
SCHEDULER_LATENESS = "kafkron_scheduler_firing_lateness_seconds"
SCHEDULER_RESTORE_SECONDS = "kafkron_scheduler_restore_duration_seconds"
SCHEDULER_RESTORE_RECORDS = "kafkron_scheduler_restore_records"
SCHEDULER_TRANSACTIONS = "kafkron_scheduler_transactions"
SCHEDULER_RECORDS_WRITTEN = "kafkron_scheduler_records_written"
SCHEDULER_SKEW = "kafkron_scheduler_clock_skew_seconds"
SCHEDULER_SKEW_UNCERTAINTY = "kafkron_scheduler_clock_skew_uncertainty_seconds"
SCHEDULER_HOLDBACK = "kafkron_scheduler_clock_holdback_seconds"

# --- worker: events ----------------------------------------------------------------

WORKER_JOB_SECONDS = Histogram(
    "kafkron_worker_job_duration_seconds",
    "Wall time of one attempt of a job, from its start to its exit, by job and status.",
    ["job", "status"],
    buckets=JOB_BUCKETS_S,
    registry=REGISTRY,
)
WORKER_RESULTS = Counter(
    "kafkron_worker_job_results",
    "Attempts that ended on this worker, by job and status (succeeded, failed, cancelled).",
    ["job", "status"],
    registry=REGISTRY,
)
WORKER_COMMIT_SECONDS = Histogram(
    "kafkron_worker_transaction_commit_seconds",
    "Time to commit one batch of results with its runs offset, in one transaction.",
    buckets=COMMIT_BUCKETS_S,
    registry=REGISTRY,
)
WORKER_FENCED = Counter(
    "kafkron_worker_fenced",
    "Runs partitions this worker gave up because a newer owner's producer fenced it.",
    registry=REGISTRY,
)

# --- worker: figures read at scrape time --------------------------------------------

WORKER_SLOTS = "kafkron_worker_slots"
WORKER_SLOTS_BUSY = "kafkron_worker_slots_busy"
WORKER_QUEUED = "kafkron_worker_runs_queued"
WORKER_PARTITIONS = "kafkron_worker_partitions_owned"
WORKER_RECEIVED = "kafkron_worker_runs_received"
WORKER_STARTED = "kafkron_worker_runs_started"
WORKER_DISCARDED = "kafkron_worker_runs_discarded"
WORKER_LEASES_LOST = "kafkron_worker_leases_lost"
WORKER_TRANSACTIONS = "kafkron_worker_transactions"
# Rate limits (docs/DESIGN.md §8.5): no key label (keys are unbounded); `kafkron
# ratelimit ls` names the paused keys.
WORKER_RATE_PAUSED = "kafkron_worker_runs_waiting_paused_key"
WORKER_RATE_QUEUED = "kafkron_worker_runs_queued_rate_limited"
# Per queue and lane, per key (`actors.observe.flow_metrics`: keys are label values only
# when `kafkron worker --metrics-key` lists them, the others summed under _other).
WORKER_QUEUE_SLOTS = "kafkron_worker_queue_slots"
WORKER_QUEUE_BUSY = "kafkron_worker_queue_slots_busy"
WORKER_QUEUE_WAITING = "kafkron_worker_queue_runs_waiting"
WORKER_KEY_RUNNING = "kafkron_worker_key_runs_running"
WORKER_KEY_WAITING = "kafkron_worker_key_runs_waiting"
WORKER_KEY_LIMIT = "kafkron_worker_key_limit"
WORKER_RATE_WAITING = "kafkron_worker_rate_key_runs_waiting"
WORKER_RATE_PAUSED = "kafkron_worker_rate_key_paused"

# --- recorder: figures read at scrape time ---------------------------------------

RECORDER_RECORDS = "kafkron_recorder_records"
RECORDER_SKIPPED = "kafkron_recorder_records_undecodable"

# --- a Faust app's agents (actors.faust): events -----------------------------------

FAUST_UNDECODABLE = Counter(
    "kafkron_faust_records_undecodable",
    "Records of a kafkron topic a Faust app skipped because they did not decode.",
    ["topic"],
    registry=REGISTRY,
)

# --- every group: consumer lag, sampled at scrape time ----------------------------

CONSUMER_LAG = "kafkron_consumer_lag_records"
QUEUE_OPEN_RUNS = "kafkron_scheduler_queue_open_records"
QUEUE_OLDEST_AGE = "kafkron_scheduler_queue_oldest_open_age_seconds"
QUEUE_WORKERS = "kafkron_scheduler_queue_workers"
CONSUMER_LAG_SAMPLE_ERRORS = Counter(
    "kafkron_consumer_lag_sample_errors",
    "Scrapes whose consumer-lag sample failed (the broker did not answer in time).",
    registry=REGISTRY,
)


# --- the one-line calls of the runtimes ------------------------------------------
# Children of labelled metrics are looked up once per label value and kept:
# ``metric.labels(...)`` takes a lock and builds a tuple on every call.

_shard_commit: dict[int, Histogram] = {}
_jobs: dict[tuple[str, str], tuple[Histogram, Counter]] = {}


def shard_committed(shard: int, seconds: float) -> None:
    """A shard's transaction committed after ``seconds``."""
    child = _shard_commit.get(shard)
    if child is None:
        child = _shard_commit[shard] = SCHEDULER_COMMIT_SECONDS.labels(str(shard))
    child.observe(seconds)


def shard_fenced(shard: int) -> None:
    SCHEDULER_FENCED.labels(str(shard)).inc()


def shard_transaction_failed(shard: int) -> None:
    SCHEDULER_TRANSACTIONS_FAILED.labels(str(shard)).inc()


def job_exited(job: str, status: str, seconds: float) -> None:
    """An attempt of ``job`` ended with ``status`` after ``seconds`` of running."""
    children = _jobs.get((job, status))
    if children is None:
        children = _jobs[(job, status)] = (
            WORKER_JOB_SECONDS.labels(job, status),
            WORKER_RESULTS.labels(job, status),
        )
    children[0].observe(seconds)
    children[1].inc()


def worker_committed(seconds: float) -> None:
    WORKER_COMMIT_SECONDS.observe(seconds)


def worker_fenced() -> None:
    WORKER_FENCED.inc()


def faust_record_undecodable(topic: str) -> None:
    """A Faust app skipped a record of ``topic`` that did not decode (rare: no cache)."""
    FAUST_UNDECODABLE.labels(topic).inc()
