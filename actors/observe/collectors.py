"""Scrape-time collectors: the figures each actor already keeps, as metric families.

Each collector holds a reference to its runtime and reads it when Prometheus
scrapes (on the actor's event loop, see `exposition`), so the hot path pays
nothing for these metrics and they can never drift from what the actor logs.
Names come from `actors.observe.metrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from actors.observe import metrics as m
from actors.observe.flow_metrics import KeyLabels, flow_families
from actors.shard.lateness import LatenessWindow

if TYPE_CHECKING:
    from actors.history.recorder import Recorder
    from actors.scheduler.runtime import SchedulerRuntime
    from actors.worker.runtime import WorkerRuntime

# Shard-core counters (keys of `ShardCore.stats`) -> (metric name, help).
_SHARD_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("retries_total", m.SCHEDULER_RETRIES, "Retries scheduled after a failed attempt."),
    ("timed_out_total", m.SCHEDULER_TIMED_OUT, "Attempts the shard reported timed_out."),
    ("dead_total", m.SCHEDULER_DEAD_LETTERS, "Runs written to the dead-letter topic."),
    ("cancelled_total", m.SCHEDULER_CANCELLED, "Runs cancelled by the overlap policy."),
    ("rejected_total", m.SCHEDULER_REJECTED, "Commands written to the rejected topic."),
    ("forwarded_total", m.SCHEDULER_FORWARDED, "Commands forwarded to their owning shard."),
    ("errors_total", m.SCHEDULER_ERRORS, "Unexpected errors inside the shard core."),
    ("backfill_fired_total", m.SCHEDULER_BACKFILL_FIRED, "Attempts started by backfills."),
    (
        "backfill_passed_total",
        m.SCHEDULER_BACKFILL_PASSED,
        "Backfill occurrences let pass (the live schedule's, in flight, or stale).",
    ),
    ("backfills_ended_total", m.SCHEDULER_BACKFILLS_ENDED, "Backfills ended (done or cancelled)."),
    (
        "deadline_missed_total",
        m.SCHEDULER_DEADLINES_MISSED,
        "deadline_missed alerts written (one per run and deadline broken).",
    ),
    (
        "deadline_recovered_total",
        m.SCHEDULER_DEADLINES_RECOVERED,
        "deadline_recovered records written (a late run started or ended at last).",
    ),
    (
        "calendar_held_total",
        m.SCHEDULER_CALENDAR_HELD,
        "Fires of calendar-naming schedules held: the calendars not yet read that fresh.",
    ),
    (
        "late_starts_total",
        m.SCHEDULER_LATE_STARTS,
        "Runs that started after their start deadline, counted when they started.",
    ),
)
# Occurrence outcomes: fired (a run was emitted), missed and skipped (reported instead).
_OUTCOMES = (("fired", "fired_total"), ("missed", "missed_total"), ("skipped", "skipped_total"))


def _ms_to_s(value: Any) -> float | None:
    return None if value is None else float(value) / 1000.0


class SchedulerCollector(Collector):
    """Per-shard figures of a `SchedulerRuntime` and its clock-skew estimate."""

    def __init__(self, runtime: SchedulerRuntime, shard_count: Callable[[], int]) -> None:
        self._runtime = runtime
        self._shard_count = shard_count

    def collect(self) -> Iterable[Metric]:
        runtime = self._runtime
        figures = runtime.figures()
        shards: Mapping[int, Mapping[str, Any]] = figures["shards"]

        yield GaugeMetricFamily(
            m.SCHEDULER_SHARDS,
            "Shards of the namespace (partitions of its commands topic).",
            value=self._shard_count(),
        )
        owned = GaugeMetricFamily(
            m.SCHEDULER_SHARD_OWNED, "1 for each shard this process owns.", labels=["shard"]
        )
        for p in shards:
            owned.add_metric([str(p)], 1)
        yield owned
        yield GaugeMetricFamily(
            m.SCHEDULER_SHARDS_WAITING,
            "Shards assigned to this process that are not built yet (restoring or retrying).",
            value=len(figures["waiting"]),
        )

        occurrences = CounterMetricFamily(
            m.SCHEDULER_OCCURRENCES,
            "Occurrences handled, by outcome: fired, or reported missed or skipped.",
            labels=["shard", "outcome"],
        )
        results = CounterMetricFamily(
            m.SCHEDULER_RESULTS,
            "Results read by the shard: applied to a run, or ignored (late, duplicate).",
            labels=["shard", "disposition"],
        )
        counters = {
            name: CounterMetricFamily(name, text, labels=["shard"])
            for _, name, text in _SHARD_COUNTERS
        }
        in_flight = GaugeMetricFamily(m.SCHEDULER_IN_FLIGHT, "Runs in flight.", labels=["shard"])
        schedules = GaugeMetricFamily(m.SCHEDULER_SCHEDULES, "Schedules owned.", labels=["shard"])
        timers = GaugeMetricFamily(m.SCHEDULER_TIMERS, "Timers on the wheel.", labels=["shard"])
        backfills = GaugeMetricFamily(
            m.SCHEDULER_BACKFILLS_GOING,
            "Backfills with something left or running.",
            labels=["shard"],
        )
        backfill_in_flight = GaugeMetricFamily(
            m.SCHEDULER_BACKFILL_IN_FLIGHT, "Backfills' runs in flight.", labels=["shard"]
        )
        restore_s = GaugeMetricFamily(
            m.SCHEDULER_RESTORE_SECONDS, "Duration of the shard's last restore.", labels=["shard"]
        )
        restore_records = GaugeMetricFamily(
            m.SCHEDULER_RESTORE_RECORDS,
            "Changelog records read by the shard's last restore.",
            labels=["shard"],
        )
        transactions = CounterMetricFamily(
            m.SCHEDULER_TRANSACTIONS, "Transactions committed by the shard.", labels=["shard"]
        )
        written = CounterMetricFamily(
            m.SCHEDULER_RECORDS_WRITTEN, "Records written by the shard.", labels=["shard"]
        )
        lateness = HistogramMetricFamily(
            m.SCHEDULER_LATENESS,
            "Firing lateness: the instant a run was emitted minus its scheduled instant.",
            labels=["shard"],
        )
        for p, shard in shards.items():
            label = [str(p)]
            for outcome, key in _OUTCOMES:
                occurrences.add_metric([*label, outcome], shard.get(key, 0))
            results.add_metric([*label, "applied"], shard.get("results_applied_total", 0))
            results.add_metric([*label, "ignored"], shard.get("results_ignored_total", 0))
            for key, name, _ in _SHARD_COUNTERS:
                counters[name].add_metric(label, shard.get(key, 0))
            in_flight.add_metric(label, shard.get("in_flight", 0))
            schedules.add_metric(label, shard.get("schedules", 0))
            timers.add_metric(label, shard.get("timers", 0))
            backfills.add_metric(label, shard.get("backfills_going", 0))
            backfill_in_flight.add_metric(label, shard.get("backfill_in_flight", 0))
            restore = _ms_to_s(shard.get("restore_ms"))
            if restore is not None:
                restore_s.add_metric(label, restore)
            restore_records.add_metric(label, shard.get("restored_records", 0))
            transactions.add_metric(label, shard.get("transactions", 0))
            written.add_metric(label, shard.get("records_written", 0))
            core = runtime.cores().get(p)
            window = getattr(core, "lateness", None)
            if isinstance(window, LatenessWindow):
                buckets = [
                    ("+Inf" if bound is None else str(bound / 1000.0), count)
                    for bound, count in window.bucket_counts()
                ]
                lateness.add_metric(label, buckets, window.sum_ms / 1000.0)
        yield occurrences
        yield results
        yield from counters.values()
        yield from (in_flight, schedules, timers, restore_s, restore_records)
        yield from (backfills, backfill_in_flight)
        yield from (transactions, written, lateness)

        skew = GaugeMetricFamily(
            m.SCHEDULER_SKEW,
            "Estimated local clock minus the broker's (positive: this clock runs ahead).",
        )
        skew_s = _ms_to_s(figures.get("skew_ms"))
        if skew_s is not None:
            skew.add_metric([], skew_s)
        yield skew
        uncertainty = GaugeMetricFamily(
            m.SCHEDULER_SKEW_UNCERTAINTY, "Half-width of the skew estimate's interval."
        )
        uncertainty_s = _ms_to_s(figures.get("skew_uncertainty_ms"))
        if uncertainty_s is not None:
            uncertainty.add_metric([], uncertainty_s)
        yield uncertainty
        # The calendars follower (§5.7): calendar-naming schedules wait for it.
        lag = figures.get("calendars_lag_records")
        if lag is not None:
            yield GaugeMetricFamily(
                m.SCHEDULER_CALENDARS_LAG,
                "Records of the calendars topic below its last known end not yet read.",
                value=lag,
            )
        age_s = _ms_to_s(figures.get("calendars_fresh_age_ms"))
        if age_s is not None:
            yield GaugeMetricFamily(
                m.SCHEDULER_CALENDARS_FRESH_AGE,
                "How long ago the calendars were last known read to their end; "
                "calendar-naming schedules fire no instant later than that.",
                value=age_s,
            )
        yield GaugeMetricFamily(
            m.SCHEDULER_HOLDBACK,
            "How far firing is held back because the local clock is proven ahead (0: not).",
            value=_ms_to_s(figures.get("holdback_ms")) or 0.0,
        )


# Worker-core counters (keys of `WorkerCore.counts`) -> (metric name, help).
_WORKER_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("received", m.WORKER_RECEIVED, "Run records received from the runs topic."),
    ("started", m.WORKER_STARTED, "Job attempts started."),
    ("discarded", m.WORKER_DISCARDED, "Run records that could not be runs (acknowledged)."),
    ("leases_lost", m.WORKER_LEASES_LOST, "Times the group coordinator stayed out of reach."),
)


class WorkerCollector(Collector):
    """Slots, queue and counters of a worker process: of its `WorkerRuntime`, or summed
    over its runtimes, one per queue it serves (``--queue``)."""

    def __init__(
        self,
        runtime: WorkerRuntime | Sequence[WorkerRuntime],
        key_labels: KeyLabels | None = None,
    ) -> None:
        self._runtimes = (runtime,) if not isinstance(runtime, Sequence) else tuple(runtime)
        # Per queue and per key (`flow_metrics`); keys not listed are summed as _other.
        self._key_labels = KeyLabels() if key_labels is None else key_labels

    def collect(self) -> Iterable[Metric]:
        stats: dict[str, int] = {}
        for runtime in self._runtimes:
            for key, value in runtime.stats().items():
                if isinstance(value, int | float):
                    stats[key] = stats.get(key, 0) + int(value)
        yield GaugeMetricFamily(
            m.WORKER_SLOTS,
            "Jobs this worker runs at once (--concurrency, per queue served).",
            value=_slots(self._runtimes),
        )
        yield GaugeMetricFamily(m.WORKER_SLOTS_BUSY, "Jobs running now.", value=stats["running"])
        yield GaugeMetricFamily(
            m.WORKER_QUEUED, "Runs received and waiting for a slot.", value=stats["queued"]
        )
        yield GaugeMetricFamily(
            m.WORKER_PARTITIONS, "Runs partitions this worker owns.", value=stats["partitions"]
        )
        yield GaugeMetricFamily(
            m.WORKER_RATE_PAUSED,
            "Runs waiting because their rate-limit key is paused (kafkron ratelimit ls).",
            value=stats.get("rate_paused_waiting", 0),
        )
        yield GaugeMetricFamily(
            m.WORKER_RATE_QUEUED,
            "Rate-limited runs waiting for their key's bucket or a slot.",
            value=stats.get("rate_limited_queued", 0),
        )
        for key, name, text in _WORKER_COUNTERS:
            yield CounterMetricFamily(name, text, value=stats.get(key, 0))
        yield CounterMetricFamily(
            m.WORKER_TRANSACTIONS, "Result transactions committed.", value=stats["transactions"]
        )
        yield from flow_families([r.flow_view() for r in self._runtimes], self._key_labels)


def _slots(runtimes: Sequence[WorkerRuntime]) -> int:
    """The slots of the runtimes: a queue's two lanes share one pool (docs/DESIGN.md
    §8.4), counted once."""
    pools = {id(r.pool): r.pool.concurrency for r in runtimes if r.pool is not None}
    return sum(r.options.concurrency for r in runtimes if r.pool is None) + sum(pools.values())


class RecorderCollector(Collector):
    """Records a `Recorder` has written into the history database."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def collect(self) -> Iterable[Metric]:
        yield CounterMetricFamily(
            m.RECORDER_RECORDS,
            "Records read from the outcome topics and written to the history database.",
            value=self._recorder.records_seen,
        )
        yield CounterMetricFamily(
            m.RECORDER_SKIPPED,
            "Records that could not be decoded and were skipped.",
            value=self._recorder.records_skipped,
        )
