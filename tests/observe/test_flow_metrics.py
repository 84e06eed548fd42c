"""Per-queue and per-key worker metrics (docs/DESIGN.md §8.2, §8.5): figures of the
worker core's own views, keys as label values only when listed, bounded with 10,000
distinct keys."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import Metric

from actors.observe import metrics as m
from actors.observe.flow_metrics import (
    MAX_KEY_LABELS,
    OTHER_KEY,
    KeyLabels,
    LaneView,
    flow_families,
)
from actors.worker.core import StartJob, WorkerCore
from tests.kit.metrics import Samples, collected, total
from tests.kit.worker import heard
from topics.command_types import Job
from topics.concurrency import Concurrency
from topics.messages import Run, idempotency_key, parse_run, run_id_for, run_value
from topics.names import TopicKind
from topics.ratelimits import PauseState, RateLimit
from topics.records import InRecord

T0 = 1_790_000_000_000


def _run(sid: str, job: Job) -> Run:
    run_id = run_id_for(sid, T0)
    return parse_run(
        run_value(
            run_id=run_id,
            schedule_id=sid,
            task=None,
            scheduled_ms=T0,
            fired_ms=T0,
            attempt=1,
            job=job,
            idempotency_key=idempotency_key(run_id),
            deadline_ms=T0 + 600_000,
        )
    )


def _keyed(sid: str, key: str, limit: int = 1) -> Run:
    return _run(sid, Job("noop", {}, concurrency=Concurrency(key, limit)))


def _rated(sid: str, key: str) -> Run:
    return _run(sid, Job("noop", {}, rate_limit=RateLimit(key, 5.0)))


class _Flow:
    def __init__(self, views: Sequence[LaneView], labels: KeyLabels) -> None:
        self._views, self._labels = views, labels

    def collect(self) -> Iterable[Metric]:
        return flow_families(self._views, self._labels)


def _view(
    running: Sequence[Run] = (),
    waiting: Sequence[Run] = (),
    *,
    queue: str = "default",
    lane: str = "normal",
    slots: int = 8,
    shared: bool = False,
    pauses: dict[str, PauseState] | None = None,
) -> LaneView:
    return LaneView(queue, lane, slots, shared, running, waiting, pauses or {}, T0)


def _scrape(views: Sequence[LaneView], *patterns: str) -> Samples:
    return collected(_Flow(views, KeyLabels(patterns)))


def _label_values(samples: Samples, name: str) -> set[str]:
    return {labels["key"] for labels, _ in samples.get(name, [])}


def test_per_queue_and_lane_slots_busy_and_waiting_a_shared_pool_counted_once() -> None:
    normal = _view([_keyed("a", "k")], [_keyed("b", "k")], queue="gpu", slots=4, shared=True)
    high = _view([_keyed("c", "j")], [], queue="gpu", lane="high", slots=4, shared=True)
    default = _view([], [_keyed("d", "k"), _keyed("e", "k")], slots=8)
    samples = _scrape([normal, high, default])
    assert total(samples, m.WORKER_QUEUE_SLOTS, queue="gpu") == 4
    assert total(samples, m.WORKER_QUEUE_SLOTS, queue="default") == 8
    assert total(samples, m.WORKER_QUEUE_BUSY, queue="gpu", lane="normal") == 1
    assert total(samples, m.WORKER_QUEUE_BUSY, queue="gpu", lane="high") == 1
    assert total(samples, m.WORKER_QUEUE_WAITING, queue="gpu", lane="normal") == 1
    assert total(samples, m.WORKER_QUEUE_WAITING, queue="default", lane="normal") == 2


def test_a_listed_key_has_its_own_label_and_limit_the_others_are_summed() -> None:
    running = [_keyed("a", "customer-42"), _keyed("b", "customer-7", 3)]
    waiting = [_keyed("c", "customer-42"), _keyed("d", "customer-42"), _keyed("e", "gpu", 2)]
    samples = _scrape([_view(running, waiting)], "customer-42")
    assert _label_values(samples, m.WORKER_KEY_RUNNING) == {"customer-42", OTHER_KEY}
    assert total(samples, m.WORKER_KEY_RUNNING, key="customer-42") == 1
    assert total(samples, m.WORKER_KEY_WAITING, key="customer-42") == 2
    assert total(samples, m.WORKER_KEY_LIMIT, key="customer-42") == 1
    assert total(samples, m.WORKER_KEY_RUNNING, key=OTHER_KEY) == 1  # customer-7
    assert total(samples, m.WORKER_KEY_WAITING, key=OTHER_KEY) == 1  # gpu
    assert _label_values(samples, m.WORKER_KEY_LIMIT) == {"customer-42"}  # no sum of limits
    globbed = _scrape([_view(running, waiting)], "customer-*")
    assert _label_values(globbed, m.WORKER_KEY_RUNNING) == {
        "customer-42",
        "customer-7",
        OTHER_KEY,
    }


def test_rate_limit_keys_waiting_and_paused() -> None:
    pauses = {
        "payments": PauseState(None, "maintenance", T0 - 1),
        "sms": PauseState(T0 + 60_000, None, T0 - 1),
        "mail": PauseState(T0 - 1, None, T0 - 10),  # ended
    }
    waiting = [_rated("a", "payments"), _rated("b", "payments"), _rated("c", "sms")]
    samples = _scrape([_view([], waiting, pauses=pauses)], "payments")
    assert total(samples, m.WORKER_RATE_WAITING, key="payments") == 2
    assert total(samples, m.WORKER_RATE_PAUSED, key="payments") == 1
    assert total(samples, m.WORKER_RATE_WAITING, key=OTHER_KEY) == 1
    assert total(samples, m.WORKER_RATE_PAUSED, key=OTHER_KEY) == 1  # sms; mail ended


def test_ten_thousand_keys_keep_the_label_set_bounded() -> None:
    waiting = [_keyed(f"s{i}", f"customer-{i}") for i in range(10_000)]
    rated = [_rated(f"r{i}", f"provider-{i}") for i in range(10_000)]
    unlisted = _scrape([_view(waiting[:5], waiting[5:] + rated)])
    for name in (m.WORKER_KEY_RUNNING, m.WORKER_KEY_WAITING, m.WORKER_RATE_WAITING):
        assert _label_values(unlisted, name) == {OTHER_KEY}
    assert total(unlisted, m.WORKER_KEY_WAITING, key=OTHER_KEY) == 9_995
    labels = KeyLabels(["*"])  # as broad as it gets: still at most MAX_KEY_LABELS
    for _ in range(2):  # a second scrape keeps the same label values
        samples = collected(_Flow([_view(waiting[:5], waiting[5:] + rated)], labels))
        keys = _label_values(samples, m.WORKER_KEY_WAITING) | _label_values(
            samples, m.WORKER_RATE_WAITING
        )
        assert len(keys) == MAX_KEY_LABELS + 1 and OTHER_KEY in keys
        assert total(samples, m.WORKER_KEY_WAITING) + total(samples, m.WORKER_KEY_RUNNING) == 10_000


def test_the_worker_cores_own_views_feed_the_figures() -> None:
    worker = WorkerCore(
        worker="w1", concurrency=8, known_job=lambda n: True, now_ms=T0, lease_loss_ms=3_000
    )
    worker.assign(0, 0, None, T0)
    now_ms = heard(worker, T0 + 60_000)
    started = []
    for offset, sid in enumerate(("a", "b", "c")):
        run = _keyed(sid, "customer-42")
        value = run_value(
            run_id=run.run_id,
            schedule_id=sid,
            task=None,
            scheduled_ms=T0,
            fired_ms=T0,
            attempt=1,
            job=run.job,
            idempotency_key=run.idempotency_key,
            deadline_ms=T0 + 600_000,
        )
        record = InRecord(TopicKind.RUNS, 0, offset, sid.encode(), value)
        started += [a for a in worker.receive(record, now_ms) if isinstance(a, StartJob)]
    assert len(started) == 1
    view = _view(worker.running_runs(), worker.queued_runs())
    samples = _scrape([view], "customer-42")
    assert total(samples, m.WORKER_KEY_RUNNING, key="customer-42") == 1
    assert total(samples, m.WORKER_KEY_WAITING, key="customer-42") == 2
