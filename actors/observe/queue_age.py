"""Per worker queue: what waits, for how long, and whether any worker serves it.

``kafkron_scheduler_queue_oldest_open_age_seconds{queue}`` is the age of the oldest run the
queue's workers have not finished (waiting or running: the broker's append time of
the first record their group has not committed, `actors.views.queues`);
``kafkron_scheduler_queue_open_records{queue}`` how many records that is, and
``kafkron_scheduler_queue_workers{queue}`` the members of the queue's group. A queue nobody
serves shows 0 workers and a growing age until the shard's deadline ends its runs.

The scheduler serves these (it runs whether or not any worker of a queue does). The
label is the queue's name: queues are created one by one by an operator (`kafkron
topics create --queue`), so the label's values are as bounded as the topics. A
sample is kept `MIN_INTERVAL_S`, as the lag's is.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from actors.observe import metrics as m
from actors.views.queues import QueueState, queue_states
from topics.names import Settings

log = logging.getLogger("kafkron.metrics")

MIN_INTERVAL_S = 5.0


class QueueAgeSampler(Collector):
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._states: list[QueueState] = []
        self._sampled_at = -MIN_INTERVAL_S
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        async with self._lock:
            if time.monotonic() - self._sampled_at < MIN_INTERVAL_S:
                return
            try:
                self._states = await queue_states(self._settings)
            except Exception as exc:  # a scrape still answers, with the last sample
                log.debug("queues not sampled: %s", exc)
                return
            self._sampled_at = time.monotonic()

    def collect(self) -> Iterable[Metric]:
        now_ms = time.time_ns() // 1_000_000
        age = GaugeMetricFamily(
            m.QUEUE_OLDEST_AGE,
            "Age of the oldest run a worker queue has not finished (waiting or running).",
            labels=["queue"],
        )
        open_runs = GaugeMetricFamily(
            m.QUEUE_OPEN_RUNS,
            "Records of a worker queue's topic its workers have not committed yet.",
            labels=["queue"],
        )
        workers = GaugeMetricFamily(
            m.QUEUE_WORKERS, "Workers in a worker queue's group now.", labels=["queue"]
        )
        for state in self._states:
            age.add_metric([state.queue], state.age_s(now_ms))
            open_runs.add_metric([state.queue], state.open_runs)
            workers.add_metric([state.queue], state.workers)
        yield from (age, open_runs, workers)

    async def close(self) -> None:
        return None
