"""A worker's flow control as metrics, per queue and per key, with bounded labels
(docs/DESIGN.md §8.2, §8.5).

Per queue (the label is the queue's name: queues are topics an operator created, as
bounded as the topics) and lane (``normal``, or ``high`` for a worker started with
``--lanes``): the slots, the jobs running, the runs waiting. Per key: keys are made by
users and their args (`topics.key_templates`), 10,000 customers make 10,000 keys, so a
key is a label value only if the operator lists it (`kafkron worker --metrics-key
PATTERN`, a glob, repeatable; at most `MAX_KEY_LABELS` keys in all, first come); every
other key is summed under ``key="_other"``. So the series of a worker are bounded by
the queues, the lanes and the keys listed, whatever the keys of its runs.

Everything here is read at scrape time from the views the worker core already keeps
(`WorkerCore.running_runs`, `queued_runs`, `RateGate.pauses`): the hot path pays
nothing. `flow_families` is pure: views and labels in, metric families out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from prometheus_client.core import GaugeMetricFamily, Metric

from actors.observe import metrics as m
from topics.messages import Run
from topics.ratelimits import PauseState

OTHER_KEY = "_other"
"""The label value every key not listed is summed under."""
MAX_KEY_LABELS = 100
"""At most this many keys get a label of their own, however broad the patterns."""
NORMAL_LANE = "normal"
HIGH_LANE = "high"


class KeyLabels:
    """Which keys are label values: those matching a listed pattern (``fnmatch`` globs:
    ``*``, ``?``, ``[...]``), the first `MAX_KEY_LABELS` of them; the others are
    `OTHER_KEY`. A key once given a label keeps it, so series do not flap."""

    __slots__ = ("_given", "_patterns", "_refused")

    def __init__(self, patterns: Sequence[str] = ()) -> None:
        self._patterns = tuple(patterns)
        self._given: set[str] = set()
        self._refused: set[str] = set()  # matched past the bound: not looked at again

    def label(self, key: str) -> str:
        if key in self._given:
            return key
        if not self._patterns or key in self._refused:
            return OTHER_KEY
        if not any(fnmatchcase(key, pattern) for pattern in self._patterns):
            return OTHER_KEY
        if len(self._given) >= MAX_KEY_LABELS:
            if len(self._refused) < MAX_KEY_LABELS:  # a bounded memo, no more
                self._refused.add(key)
            return OTHER_KEY
        self._given.add(key)
        return key


@dataclass(frozen=True, slots=True)
class LaneView:
    """What one worker runtime (a queue, or a queue's high lane) holds now."""

    queue: str
    lane: str
    slots: int
    slots_shared: bool  # the lanes of a queue share one pool: its slots count once
    running: Sequence[Run]
    waiting: Sequence[Run]
    pauses: Mapping[str, PauseState]
    now_ms: int


@dataclass(slots=True)
class KeyFigures:
    running: int = 0
    waiting: int = 0
    limit: int | None = None  # a listed key's (the latest run's); none for _other


@dataclass(slots=True)
class RateFigures:
    waiting: int = 0
    paused: int = 0  # keys paused now: 0 or 1 for a listed key, a count for _other


@dataclass(slots=True)
class Figures:
    slots: dict[str, int] = field(default_factory=dict)
    busy: dict[tuple[str, str], int] = field(default_factory=dict)
    waiting: dict[tuple[str, str], int] = field(default_factory=dict)
    keys: dict[str, KeyFigures] = field(default_factory=dict)
    rates: dict[str, RateFigures] = field(default_factory=dict)


def figures(views: Iterable[LaneView], labels: KeyLabels) -> Figures:
    """The per-queue and per-key figures of a worker's runtimes."""
    found = Figures(keys={OTHER_KEY: KeyFigures()}, rates={OTHER_KEY: RateFigures()})
    pauses: dict[str, PauseState] = {}
    now_ms = 0
    for view in views:
        if not view.slots_shared or view.queue not in found.slots:
            found.slots[view.queue] = found.slots.get(view.queue, 0) + view.slots
        lane = (view.queue, view.lane)
        found.busy[lane] = found.busy.get(lane, 0) + len(view.running)
        found.waiting[lane] = found.waiting.get(lane, 0) + len(view.waiting)
        for runs, running in ((view.running, True), (view.waiting, False)):
            for run in runs:
                _count(found, run, running, labels)
        pauses.update(view.pauses)  # every runtime follows the same topic
        now_ms = max(now_ms, view.now_ms)
    for key, pause in pauses.items():
        if pause.holds(now_ms):
            label = labels.label(key)
            found.rates.setdefault(label, RateFigures()).paused += 1
    return found


def _count(found: Figures, run: Run, running: bool, labels: KeyLabels) -> None:
    job = run.job
    concurrency = job.concurrency
    if concurrency is not None:
        label = labels.label(concurrency.key)
        figures = found.keys.setdefault(label, KeyFigures())
        if running:
            figures.running += 1
        else:
            figures.waiting += 1
        if label != OTHER_KEY:
            figures.limit = concurrency.limit
    rate_limit = job.rate_limit
    if rate_limit is not None and not running:
        found.rates.setdefault(labels.label(rate_limit.key), RateFigures()).waiting += 1


def flow_families(views: Iterable[LaneView], labels: KeyLabels) -> list[Metric]:
    """The metric families of `figures`."""
    seen = figures(views, labels)
    slots = GaugeMetricFamily(
        m.WORKER_QUEUE_SLOTS,
        "Jobs this worker runs at once for the queue (--concurrency).",
        labels=["queue"],
    )
    for queue, count in sorted(seen.slots.items()):
        slots.add_metric([queue], count)
    busy = GaugeMetricFamily(m.WORKER_QUEUE_BUSY, "Jobs running now.", labels=["queue", "lane"])
    for (queue, lane), count in sorted(seen.busy.items()):
        busy.add_metric([queue, lane], count)
    waiting = GaugeMetricFamily(
        m.WORKER_QUEUE_WAITING,
        "Runs received and waiting (for a slot, their key or their rate).",
        labels=["queue", "lane"],
    )
    for (queue, lane), count in sorted(seen.waiting.items()):
        waiting.add_metric([queue, lane], count)
    running = GaugeMetricFamily(
        m.WORKER_KEY_RUNNING,
        "Jobs of a concurrency key running here (keys not listed by --metrics-key: _other).",
        labels=["key"],
    )
    held = GaugeMetricFamily(
        m.WORKER_KEY_WAITING,
        "Runs of a concurrency key waiting here (others: _other).",
        labels=["key"],
    )
    limit = GaugeMetricFamily(
        m.WORKER_KEY_LIMIT, "A listed concurrency key's limit.", labels=["key"]
    )
    for key, figures_of in sorted(seen.keys.items()):
        running.add_metric([key], figures_of.running)
        held.add_metric([key], figures_of.waiting)
        if figures_of.limit is not None:
            limit.add_metric([key], figures_of.limit)
    rated = GaugeMetricFamily(
        m.WORKER_RATE_WAITING,
        "Runs of a rate-limit key waiting here, for its bucket or its pause (others: _other).",
        labels=["key"],
    )
    paused = GaugeMetricFamily(
        m.WORKER_RATE_PAUSED,
        "Rate-limit keys paused now: 1 for a listed key, the count of the others under _other.",
        labels=["key"],
    )
    for key, rates in sorted(seen.rates.items()):
        rated.add_metric([key], rates.waiting)
        paused.add_metric([key], rates.paused)
    return [slots, busy, waiting, running, held, limit, rated, paused]
